"""`gpucloud queue` end to end on the embedded Redis server: a sweep, status,
dead letters and requeue, cancel, and a password that is never printed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpucloud.cli import app
from gpucloud.cli.commands.queue import parse_params
from gpucloud.errors import SpecError
from gpucloud.queue import Queue

JOB = """name: sweep
image: busybox
args: ["--lr={lr}"]
resources: {gpu: h100}
"""


@pytest.fixture
def job(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return str(path)


def run(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.stderr == "", result.stderr
    return {"exit": result.exit_code, **json.loads(result.stdout)}


def test_the_sweep_rule():
    assert parse_params([]) == []
    assert parse_params(["lr=1", "lr=2", "bs=8"]) == [{"lr": "1", "bs": "8"},
                                                      {"lr": "2", "bs": "8"}]
    assert len(parse_params(["a=1", "a=2", "b=1", "b=2", "b=3"])) == 6
    assert parse_params(["expr=a=b"]) == [{"expr": "a=b"}]  # the first '=' splits
    with pytest.raises(SpecError):
        parse_params(["lr"])


def test_submit_status_cancel(job):
    submitted = run("queue", "submit", job, "--param", "lr=1e-4", "--param", "lr=3e-4",
                    "--queue", "exp")
    assert submitted["exit"] == 0 and submitted["queue"] == "exp"
    assert [t["params"] for t in submitted["tasks"]] == [{"lr": "1e-4"}, {"lr": "3e-4"}]
    first, second = (t["id"] for t in submitted["tasks"])
    with Queue(name="exp") as q:  # a worker takes one
        claim = q.claim("gpu-box-1", block_seconds=0)
        assert claim.spec.args == ["--lr=1e-4"]
    status = run("queue", "status", "--queue", "exp")
    assert status["counts"]["running"] == 1 and status["counts"]["pending"] == 1
    running = next(t for t in status["tasks"] if t["id"] == first)
    assert running["worker"] == "gpu-box-1" and running["age_seconds"] >= 0
    unconfirmed = run("queue", "cancel", second, "--queue", "exp")  # --json never prompts
    assert unconfirmed["exit"] == 8 and unconfirmed["error"]["code"] == "confirmation_required"
    cancelled = run("queue", "cancel", second, "--queue", "exp", "--yes")
    assert cancelled["exit"] == 0 and cancelled["task"]["state"] == "cancelled"
    assert run("queue", "cancel", "nope", "--queue", "exp", "--yes")["exit"] == 5
    # the default queue is another queue
    assert run("queue", "status")["tasks"] == []


def test_dead_and_requeue(job):
    ids = [t["id"] for t in run("queue", "submit", job, "--param", "lr=1",
                                "--param", "lr=2")["tasks"]]
    with Queue() as q:
        for _ in ids:
            claim = q.claim("w", block_seconds=0)
            q.append_log(claim, ["Traceback ...", "RuntimeError: NaN loss"])
            q.fail(claim, "exit 1")
    dead = run("queue", "dead")
    assert {d["task_id"] for d in dead["dead"]} == set(ids)
    assert dead["dead"][0]["log_tail"].endswith("NaN loss")
    one = run("queue", "dead", "--requeue", ids[0])
    assert one["requeued"] == [ids[0]] and [d["task_id"] for d in one["dead"]] == [ids[1]]
    rest = run("queue", "dead", "--all")
    assert rest["requeued"] == [ids[1]] and rest["dead"] == []
    assert run("queue", "status")["counts"]["pending"] == 2
    text = CliRunner().invoke(app, ["queue", "dead"])
    assert text.exit_code == 0 and "No dead tasks" in text.stdout


def test_text_status_shows_worker_and_age(job):
    run("queue", "submit", job, "--param", "lr=1")
    with Queue() as q:
        q.claim("gpu-box-7", block_seconds=0)
    result = CliRunner().invoke(app, ["queue", "status"])
    assert result.exit_code == 0
    assert "1 running" in result.stdout and "gpu-box-7" in result.stdout


def test_a_password_in_the_url_is_never_printed(job, monkeypatch):
    url = "redis://:hunter2-secret@127.0.0.1:1/0"  # nothing listens on port 1
    for args in (["queue", "status", "--redis", url], ["queue", "submit", job, "--param", "lr=1",
                                                         "--redis", url]):
        for extra in ([], ["--json"]):
            result = CliRunner().invoke(app, [*args, *extra])
            assert result.exit_code == 10
            assert "hunter2" not in result.stdout + result.stderr
            assert "redis://:***@127.0.0.1:1/0" in result.stdout + result.stderr
    monkeypatch.setenv("GPUCLOUD_REDIS_URL", url)
    result = CliRunner().invoke(app, ["queue", "status"])
    assert result.exit_code == 10 and "hunter2" not in result.stdout + result.stderr
    assert "***" in result.stderr


def test_bad_input_exits_2(job, tmp_path):
    assert run("queue", "submit", job, "--param", "lr")["exit"] == 2
    assert run("queue", "submit", str(tmp_path / "missing.yaml"))["exit"] == 2
    assert run("queue", "submit", job, "--param", "lr=1", "--queue", "bad name!")["exit"] == 2
    assert run("queue", "submit", job, "--param", "lr=1", "--redis", "http://x")["exit"] == 2
