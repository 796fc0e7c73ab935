"""`gpucloud worker`: one JSON document, the Redis password never printed,
the URL taken from GPUCLOUD_REDIS_URL (how a provisioned worker receives it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from gpucloud.cli import app
from gpucloud.cli.commands import worker as worker_cmds
from tests.unit.test_worker import FakeQueue, claim

SECRET_URL = "rediss://default:s3cr3t-pass@redis.example.com:6380/0"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> list[tuple[Any, str, FakeQueue]]:
    monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path))
    calls: list[tuple[Any, str, FakeQueue]] = []

    def fake(url: Any, name: str, **options: Any) -> FakeQueue:
        q = FakeQueue([claim("t1", "print('hi')"),
                       claim("t2", "import sys; sys.exit(2)")])
        q.close = lambda: None  # type: ignore[attr-defined]
        assert options == {"visibility_timeout": 60.0}
        calls.append((url, name, q))
        return q
    monkeypatch.setattr(worker_cmds, "open_queue", fake)
    monkeypatch.setattr("gpucloud.queue.runners.shutil.which", lambda name: None)
    return calls


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_worker_json_is_one_document_and_hides_the_password(opened, monkeypatch) -> None:
    monkeypatch.setenv("GPUCLOUD_REDIS_URL", SECRET_URL)
    result = run("worker", "--queue", "sweep", "--idle", "1s", "--worker-id", "w9", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["worker"]["worker_id"] == "w9"
    assert (doc["worker"]["succeeded"], doc["worker"]["failed"]) == (1, 1)
    assert doc["redis"] == "rediss://default:***@redis.example.com:6380/0"
    assert "s3cr3t" not in result.output
    assert opened[0][:2] == (SECRET_URL, "sweep")
    assert opened[0][2].ended[1][:3] == ("fail", "t2", 2)


def test_worker_text_names_tasks_and_the_flag_wins_over_env(opened, monkeypatch) -> None:
    monkeypatch.setenv("GPUCLOUD_REDIS_URL", "redis://other:6379")
    result = run("worker", "--redis", SECRET_URL, "--idle", "1s")
    assert result.exit_code == 0, result.output
    assert "task t1 (attempt 1) started" in result.stderr and "task t2 failed" in result.stderr
    assert "1 succeeded, 1 failed" in result.stdout
    assert "s3cr3t" not in result.output and "***@redis.example.com" in result.stderr
    assert opened[0][:2] == (SECRET_URL, "default")


def test_bad_idle_is_a_usage_error(opened) -> None:
    result = run("worker", "--idle", "soon", "--json")
    assert result.exit_code == 2 and json.loads(result.stdout)["error"]
    assert opened == []


@pytest.mark.parametrize("url,shown", [
    (None, "embedded Redis"),
    ("redis://localhost:6379/0", "redis://localhost:6379/0"),
    ("redis://:pw@h:1", "redis://:***@h:1"),
    ("rediss://user:pw@[::1]:6380", "rediss://user:***@[::1]:6380"),
])
def test_shown_url(url, shown) -> None:
    assert worker_cmds.shown_url(url) == shown



def test_runner_and_visibility_timeout_options(opened, monkeypatch) -> None:
    bad = run("worker", "--runner", "podman", "--json")
    assert bad.exit_code == 2
    assert "auto, docker or direct" in json.loads(bad.stdout)["error"]["message"]
    assert opened == []
