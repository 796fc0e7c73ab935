"""The queue under real concurrency: worker processes on the embedded Redis,
one of them SIGKILLed mid-task, a task that always fails and one that kills
its worker every time. (The `gpucloud worker` command has its own test; these
workers are a few lines on the Queue API, so this checks the queue alone.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import Queue

WORKER = r"""
import os, sys, time
from gpucloud.queue import Queue
q = Queue(sys.argv[1], visibility_timeout=1.0, backoff_base=0.1)
me = sys.argv[2]
while True:
    claim = q.claim(me, block_seconds=0.3)
    if claim is None:
        counts = q.status().counts
        if not (counts["pending"] or counts["running"] or counts["failed"]):
            break
        continue
    kind = claim.params["kind"]
    q.append_log(claim, [f"start on {me}"])
    if kind == "poison":
        os._exit(9)  # takes its worker down, every time
    for _ in range(30 if kind == "slow" else 1):
        time.sleep(0.1)
        q.heartbeat(me, claim)
    if kind == "fail":
        q.fail(claim, "always fails", exit_code=1)
        continue
    q.append_log(claim, ["done"])
    q.succeed(claim)
q.close()
"""

SPEC = JobSpec.model_validate({"name": "t", "image": "busybox", "resources": {"gpu": "h100"},
                               "retries": 1})


def test_tasks_through_four_worker_processes_with_a_kill(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    q = Queue()
    try:
        kinds = ["good"] * 47 + ["slow", "fail", "poison"]
        ids = dict(zip(q.submit(SPEC, [{"kind": k, "n": str(i)} for i, k in enumerate(kinds)]),
                       kinds))
        slow = next(i for i, k in ids.items() if k == "slow")
        procs: dict[str, subprocess.Popen[bytes]] = {}
        spawned = 0

        def spawn() -> None:
            nonlocal spawned
            spawned += 1
            wid = f"w{spawned}"
            procs[wid] = subprocess.Popen([sys.executable, str(script), q.url, wid],
                                          env=os.environ.copy())

        for _ in range(4):
            spawn()
        killed = None
        end = time.monotonic() + 90
        while time.monotonic() < end:
            info = q.task(slow)
            if killed is None and info.state == "running" and info.worker in procs:
                killed = info.worker
                procs[killed].send_signal(signal.SIGKILL)  # mid-task
            for wid, proc in list(procs.items()):
                if proc.poll() is not None:  # keep four workers, as a pool would
                    del procs[wid]
                    if proc.returncode != 0:
                        spawn()
            if not procs:
                break
            time.sleep(0.1)
        for proc in procs.values():
            proc.kill()
        status = q.status()
        print(f"\ncounts {status.counts}; workers started {spawned}; killed {killed}")
        assert killed is not None and not procs
        states = {t.id: t for t in status.tasks}
        for task_id, kind in ids.items():
            if kind in ("good", "slow"):
                assert states[task_id].state == "succeeded", (task_id, states[task_id])
                assert q.logs(task_id).count("done") == 1  # ran to completion once
        assert states[slow].attempts == 2  # re-delivered after the kill
        dead = {d.task_id: d for d in q.dead()}
        assert {ids[i] for i in dead} == {"fail", "poison"}
        fail = next(i for i, k in ids.items() if k == "fail")
        poison = next(i for i, k in ids.items() if k == "poison")
        assert dead[fail].error == "always fails" and states[fail].attempts == 2
        assert "poison" in dead[poison].error and states[poison].attempts == 2
        assert status.counts == {"pending": 0, "running": 0, "succeeded": 48, "failed": 0,
                                 "dead": 2, "cancelled": 0}
    finally:
        q.close()
