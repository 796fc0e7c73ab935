"""A NUL character cannot travel in a process argument, an environment variable
or a path (execve(2) takes C strings): a job field or queue parameter holding
one is refused where it enters (exit 2, the field named), and a worker that
meets one in a task already in Redis dead-letters that task with the reason
and goes on to the next one."""

from __future__ import annotations

import json
import sys
import time

import pytest
import redis
from typer.testing import CliRunner

from gpucloud.cli import app
from gpucloud.errors import SpecError, exit_code_for
from gpucloud.jobs.spec import JobSpec, loads
from gpucloud.queue import Queue
from gpucloud.queue import worker as W
from tests.cli.test_hostile_files_cli import JOB
from tests.unit.test_queue import make  # noqa: F401 - the fixture

PY = sys.executable


@pytest.mark.parametrize("extra, field", [
    ('args: ["a\\0b"]', "args: contains a NUL character (\\0) in item 0"),
    ('command: ["python\\x00", "-c"]', "command: contains a NUL character (\\0) in item 0"),
    ("env: {A: \"1\\0\"}", "env: contains a NUL character (\\0) in the value of 'A'"),
    ("secrets: {T: {env: \"X\\0\"}}", "secrets.T.env: contains a NUL character"),
    ("checkpoint: {dir: \"/ck\\0pt\"}", "checkpoint.dir: contains a NUL character"),
])
def test_a_nul_in_a_job_field_is_refused_naming_the_field(extra, field):
    with pytest.raises(SpecError) as caught:
        loads(JOB + extra + "\n", "job.yaml")
    assert str(caught.value).startswith("job.yaml:4: " + field), str(caught.value)
    assert exit_code_for(caught.value) == 2


def test_a_nul_in_the_name_or_image_is_refused_as_a_nul():
    for field in ("name", "image"):
        text = JOB.replace(f"{field}: ", f'{field}: "a\\0"\nx-was: ')
        with pytest.raises(SpecError, match=f"{field}: contains a NUL character"):
            loads(text.replace("x-was: train\n", "").replace("x-was: busybox\n", ""))


def test_python_construction_refuses_a_nul_too():
    with pytest.raises(ValueError, match="contains a NUL character"):
        JobSpec(name="t", image="busybox", args=["\0"], resources={"gpu": "h100"})


def test_a_nul_in_a_queue_parameter_is_refused_at_submit(make):
    q = make()
    spec = loads(JOB + 'args: ["--lr={lr}"]\n')
    with pytest.raises(SpecError, match="parameter lr: the value contains a NUL") as caught:
        q.submit(spec, [{"lr": "1e-4"}, {"lr": "3e-4\0"}])
    assert exit_code_for(caught.value) == 2
    assert q.status().tasks == []  # refused whole: no task of the sweep was queued


def test_the_cli_refuses_a_nul_param_with_exit_2(tmp_path):
    # A NUL cannot be put in a real command line (argv is C strings): the
    # option parser is driven in process here, as a program calling main() could.
    path = tmp_path / "job.yaml"
    path.write_text(JOB + 'args: ["--lr={lr}"]\n')
    result = CliRunner().invoke(app, ["queue", "submit", str(path), "--param", "lr=3e-4\0x"])
    assert result.exit_code == 2, result.output
    assert "parameter lr: the value contains a NUL" in result.stderr


def _enqueue_raw(q: Queue, task_id: str, spec: dict, params: dict) -> None:
    """A task written straight to Redis, as an older or foreign producer could."""
    r = redis.Redis.from_url(q.url, decode_responses=True)
    key = f"gq:{{{q.name}}}"
    now = time.time()
    r.hset(f"{key}:task:{task_id}", mapping={
        "spec": json.dumps(spec), "params": json.dumps(params), "state": "pending",
        "attempts": 0, "retries": 0, "submitted_at": now, "worker": ""})
    r.zadd(f"{key}:ids", {task_id: now})
    r.xadd(f"{key}:tasks", {"task_id": task_id})
    r.close()


def test_a_worker_dead_letters_a_queued_nul_and_runs_the_next_task(make, tmp_path):
    q = make()
    good = {"name": "ok", "image": "python:3.12", "command": [PY, "-c", "print('ran')"],
            "resources": {"gpu": "H100"}}
    _enqueue_raw(q, "bad-args", {**good, "name": "bad", "args": ["x\0y"]}, {})
    _enqueue_raw(q, "bad-param", good, {"lr": "3e-4\0"})
    [ok] = q.submit(good)
    summary = W.run_worker(q, worker_id="w1", idle=1.0, runner=W.direct_runner,
                           work_dir=tmp_path)
    assert summary.tasks == [ok] and summary.succeeded == 1
    assert q.task(ok).state == "succeeded"
    args, param = q.task("bad-args"), q.task("bad-param")
    assert args.state == "dead" and "args: contains a NUL character" in args.error
    assert param.state == "dead" and "parameter lr: the value contains a NUL" in param.error
    assert {d.task_id for d in q.dead()} == {"bad-args", "bad-param"}


def test_a_worker_given_a_nul_by_any_queue_fails_that_task_and_goes_on(tmp_path):
    # The worker's own guard, whatever queue hands it the task: the process
    # cannot start ("embedded null byte"), so the task fails with that reason.
    from tests.unit.test_worker import FakeQueue, claim

    q = FakeQueue([claim("t1", "print('never')", params={"lr": "3e-4\0"}),
                   claim("t2", "print('ran')")])
    summary = W.run_worker(q, worker_id="w1", idle=0.3, runner=W.direct_runner,
                           work_dir=tmp_path)
    assert summary.tasks == ["t1", "t2"] and summary.succeeded == 1
    [(verdict, task, _, error), second] = q.ended
    assert (verdict, task) == ("fail", "t1") and "null byte" in error
    assert second[:2] == ("succeed", "t2")
