"""The worker's logic against a fake Queue that keeps the brief's interface
(claim/heartbeat/append_log/succeed/fail): no Redis here."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import apply_params
from gpucloud.queue import runners, task_logs
from gpucloud.queue import worker as W

PY = sys.executable


@dataclass
class Claim:
    task_id: str
    spec: JobSpec
    params: dict[str, str]
    attempt: int
    entry_id: str = "0-1"


@dataclass
class FakeQueue:
    tasks: list[Claim]
    visibility_timeout: float = 0.3
    heartbeats: list[tuple[str, str, float]] = field(default_factory=list)
    logs: dict[str, list[list[str]]] = field(default_factory=dict)
    ended: list[tuple[str, str, Any, Any]] = field(default_factory=list)
    claims: int = 0
    permanent: list[str] = field(default_factory=list)  # failed with no retry left to try

    def claim(self, worker_id: str, block_seconds: float = 5.0) -> Claim | None:
        self.claims += 1
        if self.tasks:
            return self.tasks.pop(0)
        time.sleep(min(block_seconds, 0.05))
        return None

    def heartbeat(self, worker_id: str, claim: Claim) -> None:
        self.heartbeats.append((worker_id, claim.task_id, time.monotonic()))

    def append_log(self, claim: Claim, lines: list[str]) -> None:
        self.logs.setdefault(claim.task_id, []).append(list(lines))

    def succeed(self, claim: Claim, exit_code: int = 0) -> None:
        self.ended.append(("succeed", claim.task_id, exit_code, None))

    def fail(self, claim: Claim, error: str, exit_code: int | None = None,
             permanent: bool = False) -> None:
        self.ended.append(("fail", claim.task_id, exit_code, error))
        if permanent:
            self.permanent.append(claim.task_id)


def spec(code: str, **extra: Any) -> JobSpec:
    return JobSpec(name="t", image="python:3.12", command=[PY, "-c", code],
                   resources={"gpu": "H100"}, **extra)


def claim(task_id: str, code: str, attempt: int = 1, params: dict[str, str] | None = None,
          **extra: Any) -> Claim:
    return Claim(task_id, spec(code, **extra), params or {}, attempt)


def run(queue: FakeQueue, tmp_path: Path, **kw: Any) -> W.WorkerSummary:
    kw.setdefault("idle", 0.3)
    return W.run_worker(queue, worker_id="w1", runner=W.direct_runner, work_dir=tmp_path, **kw)


def lines(queue: FakeQueue, task_id: str) -> list[str]:
    return [line for batch in queue.logs.get(task_id, []) for line in batch]


def test_success_and_failure_are_reported_with_exit_code_and_log_tail(tmp_path: Path) -> None:
    q = FakeQueue([claim("ok", "print('fine')"),
                   claim("bad", "import sys; print('boom: lr too high'); sys.exit(3)")])
    summary = run(q, tmp_path)
    assert q.ended[0] == ("succeed", "ok", 0, None)
    kind, task, code, error = q.ended[1]
    assert (kind, task, code) == ("fail", "bad", 3)
    assert "exit code 3" in error and "boom: lr too high" in error
    assert (summary.succeeded, summary.failed, summary.reason) == (1, 1, "idle")
    assert summary.tasks == ["ok", "bad"]


def test_a_command_that_cannot_start_fails_the_task_not_the_worker(tmp_path: Path) -> None:
    q = FakeQueue([Claim("x", JobSpec(name="t", image="i", command=["/no/such/program"],
                                      resources={"gpu": "H100"}), {}, 1)])
    summary = run(q, tmp_path)
    assert q.ended[0][:3] == ("fail", "x", None) and "/no/such/program" in q.ended[0][3]
    assert summary.failed == 1
    assert q.permanent == ["x"] and "the executable was not found" in q.ended[0][3]


def test_exits_after_idle_seconds_without_work(tmp_path: Path) -> None:
    q = FakeQueue([])
    started = time.monotonic()
    summary = run(q, tmp_path, idle=0.5)
    took = time.monotonic() - started
    assert 0.5 <= took < 2.0 and q.claims >= 2
    assert summary.reason == "idle" and summary.tasks == []


def test_idle_clock_restarts_after_each_task(tmp_path: Path) -> None:
    q = FakeQueue([claim("long", "import time; time.sleep(0.8)")])
    summary = run(q, tmp_path, idle=0.5)
    assert summary.succeeded == 1  # the task outlived `idle`; the worker did not quit under it


def test_heartbeats_every_third_of_the_visibility_timeout_while_a_task_runs(
        tmp_path: Path) -> None:
    q = FakeQueue([claim("long", "import time; time.sleep(1.2)")], visibility_timeout=0.3)
    run(q, tmp_path, idle=0.1)
    beats = [t for _, task, t in q.heartbeats if task == "long"]
    assert len(beats) >= 8  # 1.2 s / 0.1 s, with slack for a slow machine
    assert max(b - a for a, b in zip(beats, beats[1:])) < 0.3  # never a gap of a timeout
    assert {w for w, _, _ in q.heartbeats} == {"w1"}
    count = len(q.heartbeats)
    time.sleep(0.3)
    assert len(q.heartbeats) == count  # stops with the task


def test_log_lines_stream_in_batches_while_the_task_runs(tmp_path: Path) -> None:
    code = ("import sys, time\n"
            "for i in range(500): print(f'line {i}')\n"
            "sys.stdout.flush(); print('to stderr', file=sys.stderr); sys.stderr.flush()\n"
            "time.sleep(1.5); print('late')")
    q = FakeQueue([claim("logs", code)])
    seen_before_end: list[int] = []
    real_append = q.append_log

    def append(c: Claim, batch: list[str]) -> None:
        if not q.ended:
            seen_before_end.append(len(batch))
        real_append(c, batch)
    q.append_log = append  # type: ignore[method-assign]
    run(q, tmp_path, idle=0.1)
    got = lines(q, "logs")
    assert got == [f"line {i}" for i in range(500)] + ["to stderr", "late"]
    assert all(len(b) <= task_logs.LOG_BATCH for b in q.logs["logs"]) and len(q.logs["logs"]) >= 3
    assert sum(seen_before_end) == len(got)  # all sent before the task was reported


def test_checkpoint_dir_is_the_same_for_every_attempt_of_a_task(tmp_path: Path) -> None:
    code = ("import os, pathlib\n"
            "d = pathlib.Path(os.environ['CHECKPOINT_DIR']); f = d / 'step'\n"
            "n = int(f.read_text()) if f.exists() else 0\n"
            "print(d, n, os.environ['GPUCLOUD_ATTEMPT'], os.environ['GPUCLOUD_TASK_ID'])\n"
            "f.write_text(str(n + 1))")
    q = FakeQueue([claim("a", code, attempt=1), claim("b", code, attempt=1),
                   claim("a", code, attempt=2)])
    run(q, tmp_path, idle=0.1)
    first, second = lines(q, "a")
    d1, n1, att1, id1 = first.split()
    d2, n2, att2, _ = second.split()
    assert d1 == d2 and Path(d1).is_relative_to(tmp_path)
    assert (n1, n2, att1, att2, id1) == ("0", "1", "1", "2", "a")  # resumed from attempt 1
    assert lines(q, "b")[0].split()[0] != d1


def test_params_reach_the_env_and_args(tmp_path: Path) -> None:
    code = ("import os, sys; e = os.environ\n"
            "print(e['GPUCLOUD_PARAM_LR'], e['GPUCLOUD_PARAM_BATCH_SIZE'], sys.argv[1:])")
    params = {"lr": "3e-4", "batch_size": "64"}
    # As the queue hands it over: the params applied to the spec at submit.
    c = Claim("p", apply_params(JobSpec(name="t", image="i", command=[PY, "-c", code],
                                        args=["--lr={lr}", "{untouched}"], env={"PLAIN": "1"},
                                        resources={"gpu": "H100"}), params), params, 1)
    q = FakeQueue([c])
    run(q, tmp_path, idle=0.1)
    assert lines(q, "p") == ["3e-4 64 ['--lr=3e-4', '{untouched}']"]


def test_sigterm_stops_the_task_and_acks_nothing(tmp_path: Path) -> None:
    q = FakeQueue([claim("held", "import time; print('started', flush=True); time.sleep(30)"),
                   claim("next", "print('never')")])

    def later() -> None:
        deadline = time.monotonic() + 10
        while not lines(q, "held") and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=later, daemon=True).start()
    before = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    summary = run(q, tmp_path, idle=30)
    assert time.monotonic() - started < 10  # the 30 s task was stopped
    assert q.ended == []  # neither succeed nor fail: re-delivered after the timeout
    assert summary.interrupted and summary.reason == "signal" and summary.tasks == []
    assert [t.task_id for t in q.tasks] == ["next"]  # no new task taken
    assert signal.getsignal(signal.SIGTERM) is before


def test_docker_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN_SRC", "hf-secret-value")
    c = Claim("t-1", apply_params(JobSpec(
        name="t", image="pytorch/pytorch:2.4", command=["python", "train.py"],
        args=["--lr", "{lr}"], env={"EPOCHS": "3"}, secrets={"HF_TOKEN": {"env": "HF_TOKEN_SRC"}},
        checkpoint={"dir": "/ckpt"}, resources={"gpu": "H100"}), {"lr": "0.1"}), {"lr": "0.1"}, 2)
    launch = W.docker_runner(c, tmp_path / "ck")
    assert launch.argv == [
        "docker", "run", "--rm", "--name", "gq-t-1-2", "--gpus", "all",
        "-e", "EPOCHS", "-e", "GPUCLOUD_PARAM_LR", "-e", "GPUCLOUD_TASK_ID",
        "-e", "GPUCLOUD_ATTEMPT", "-e", "CHECKPOINT_DIR", "-e", "HF_TOKEN",
        "-v", f"{tmp_path / 'ck'}:/ckpt",
        "--entrypoint", "python", "pytorch/pytorch:2.4", "train.py", "--lr", "0.1"]
    assert "hf-secret-value" not in " ".join(launch.argv)
    assert launch.env["HF_TOKEN"] == "hf-secret-value" and launch.env["CHECKPOINT_DIR"] == "/ckpt"
    assert launch.env["GPUCLOUD_ATTEMPT"] == "2" and launch.cleanup == ["docker", "rm", "-f",
                                                                        "gq-t-1-2"]


def test_docker_without_command_uses_the_image_entrypoint(tmp_path: Path) -> None:
    c = Claim("t", JobSpec(name="t", image="img:1", args=["a"], resources={"gpu": "H100"}), {}, 1)
    argv = W.docker_runner(c, tmp_path).argv
    assert argv[-2:] == ["img:1", "a"] and "--entrypoint" not in argv
    assert f"{tmp_path}:/checkpoints" in argv


def test_runner_is_docker_only_where_docker_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runners.shutil, "which", lambda name: "/usr/bin/docker")
    assert W.default_runner() is W.docker_runner
    monkeypatch.setattr(runners.shutil, "which", lambda name: None)
    assert W.default_runner() is W.direct_runner


def test_the_queue_url_is_not_passed_to_tasks(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCLOUD_REDIS_URL", "rediss://:pw@r:1")
    monkeypatch.setenv("OTHER_VAR", "kept")
    code = "import os; print(os.environ.get('GPUCLOUD_REDIS_URL'), os.environ['OTHER_VAR'])"
    q = FakeQueue([claim("u", code)])
    run(q, tmp_path, idle=0.1)
    assert lines(q, "u") == ["None kept"]
    assert "GPUCLOUD_REDIS_URL" not in W.docker_runner(claim("d", "x"), tmp_path).env
