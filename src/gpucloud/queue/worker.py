"""The worker: takes one task at a time from a Queue, runs it, reports how it ended.

This module is the worker's loop: claim a task, run it, record its result
(succeeded, failed and retried, or a dead letter), count what happened, until
``idle`` seconds pass with no work or a signal comes. SIGTERM acks nothing:
the task is left as it is, re-delivered, and resumes from its CHECKPOINT_DIR
(a per-task directory, the same for every attempt of a task id).

The parts it drives live next to it: ``runners`` (how a task's process is
started; tests plug their own), ``task_run`` (one task run to its end, its
heartbeat, a cancel or a lost claim seen while it runs), ``task_logs`` (its
output lines, free of its secrets, on their way to Redis) and ``redis_retry``
(a lost connection to Redis waited out within ``idle``).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel

from gpucloud.queue.redis_retry import Persist, Stopped, transient
from gpucloud.queue.runners import (Launch, Runner, checkpoint_dir, default_runner,
                                    direct_runner, docker_runner, param_env, task_env)
from gpucloud.queue.task_run import KILL_GRACE, Cancelled, Lost, is_cancelled, run_task

# What a caller of the worker uses, importable from here as before the parts moved out.
__all__ = ["KILL_GRACE", "Launch", "Runner", "WorkerSummary", "checkpoint_dir",
           "default_runner", "default_work_dir", "direct_runner", "docker_runner",
           "param_env", "run_worker", "task_env"]


class WorkerSummary(BaseModel):
    worker_id: str
    succeeded: int = 0
    failed: int = 0
    lost: int = 0              # no longer this worker's (re-delivered, requeued): its run
                               # stopped here, or its result ignored
    cancelled: int = 0         # cancelled while it ran here: stopped, nothing recorded
    interrupted: bool = False  # stopped by a signal; the task it held was not acked
    reason: str = "idle"       # "idle" or "signal"
    tasks: list[str] = []      # task ids run to an end and recorded, in order (not the lost
                               # or cancelled)


def default_work_dir() -> Path:
    from gpucloud.config.settings import data_dir

    return data_dir() / "worker"


def run_worker(queue: Any, worker_id: Optional[str] = None, idle: float = 600,
               runner: Optional[Runner] = None, *, work_dir: Optional[Path] = None,
               stop: Optional[threading.Event] = None,
               on_event: Optional[Callable[[str, dict[str, Any]], None]] = None,
               kill_grace: float = KILL_GRACE) -> WorkerSummary:
    """Run tasks until ``idle`` seconds pass with no work, or SIGTERM/SIGINT
    (or ``stop`` is set). Returns what was done. ``kill_grace``: seconds
    between SIGTERM and SIGKILL of a task that is cancelled or interrupted."""
    worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    runner = runner or default_runner()
    work_dir = Path(work_dir) if work_dir else default_work_dir()
    stop = stop or threading.Event()
    summary = WorkerSummary(worker_id=worker_id)
    emit = on_event or (lambda kind, data: None)
    persist = Persist(queue, stop, emit, idle)
    restore = _on_signals(stop)
    try:
        last_work = time.monotonic()
        while not stop.is_set():
            left = idle - (time.monotonic() - last_work)
            if left <= 0:
                break
            try:
                claim = queue.claim(worker_id, block_seconds=max(0.05, min(5.0, left)))
            except Exception as exc:
                if not transient(exc):
                    raise
                # Redis restarting or a network blip: wait it out, within `idle`.
                emit("retry", {"error": str(exc)})
                persist.pause(left)
                continue
            persist.reset()
            if claim is None:
                continue
            if stop.is_set():  # not started: left for re-delivery
                summary.interrupted = True
                break
            emit("start", {"task_id": claim.task_id, "attempt": claim.attempt})
            try:
                code, error, permanent = run_task(queue, worker_id, claim, runner, work_dir,
                                                  stop, persist, kill_grace)
                if code == 0:
                    recorded = persist(lambda: queue.succeed(claim, exit_code=0))
                elif permanent:  # no retry can heal it: a dead letter now
                    recorded = persist(lambda: queue.fail(claim, error, exit_code=code,
                                                          permanent=True))
                else:
                    recorded = persist(lambda: queue.fail(claim, error, exit_code=code))
            except Stopped:
                summary.interrupted = True
                break
            except Cancelled:
                last_work = time.monotonic()
                summary.cancelled += 1
                emit("cancelled", {"task_id": claim.task_id})
                continue
            except Lost:
                last_work = time.monotonic()
                summary.lost += 1
                emit("lost", {"task_id": claim.task_id, "exit_code": None, "error": "",
                              "stopped": True})
                continue
            last_work = time.monotonic()
            if recorded is False and is_cancelled(queue, claim):  # ended as it was cancelled
                summary.cancelled += 1
                emit("cancelled", {"task_id": claim.task_id})
                continue
            if recorded is False:  # a stale claim: the task is another worker's now
                summary.lost += 1
                emit("lost", {"task_id": claim.task_id, "exit_code": code, "error": error})
                continue
            if code == 0:
                summary.succeeded += 1
            else:
                summary.failed += 1
            summary.tasks.append(str(claim.task_id))
            emit("end", {"task_id": claim.task_id, "exit_code": code, "error": error})
    finally:
        restore()
    if stop.is_set():
        summary.reason = "signal"
    return summary


def _on_signals(stop: threading.Event) -> Callable[[], None]:
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    for sig in before:
        signal.signal(sig, lambda *_: stop.set())

    def restore() -> None:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    return restore
