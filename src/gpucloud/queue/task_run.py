"""One claimed task run to its end: its process started, heart-beaten, its
output sent, and how it ended.

While a task runs, a heartbeat every visibility_timeout/3 keeps it ours; a
worker that stops heart-beating (killed, machine preempted) loses the task to
another worker after the visibility timeout.

A task cancelled while it runs (``gpucloud queue cancel``) is seen at the
next heartbeat, whose answer says the task is no longer this worker's: its
process group (or container) gets SIGTERM, then SIGKILL after the kill grace,
and the run ends as cancelled; the queue's state stays `cancelled`. Any other
answer that the claim is gone stops the run the same way, whatever the task's
state is by then: cancelled and requeued before the beat, or taken by another
worker past the visibility timeout. That run ends as lost: the task's current
holder (or next claimer) runs it, and two runs of one task at once would
write one CHECKPOINT_DIR and one log stream.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Optional

from gpucloud.queue import stopping
from gpucloud.queue.redis_retry import Persist, Stopped, reconnect, transient
from gpucloud.queue.runners import Launch, Runner, checkpoint_dir
from gpucloud.queue.task_logs import LOG_BATCH, LOG_FLUSH_SECONDS, LineBuffer, flush

KILL_GRACE = 10.0        # seconds between TERM and KILL of a task stopped early (default)


class Cancelled(Exception):
    """The task was cancelled while it ran here; its process is stopped."""


class Lost(Exception):
    """The claim was gone while the task ran here (cancelled and requeued,
    re-delivered to another worker); its process is stopped."""


def run_task(queue: Any, worker_id: str, claim: Any, runner: Runner, work_dir: Path,
             stop: threading.Event, persist: Persist,
             kill_grace: float = KILL_GRACE) -> tuple[Optional[int], str, bool]:
    """(exit code, error, whether no retry can heal it), free of the task's
    secrets; raises Stopped when a signal stopped the task, Cancelled when a
    cancel did, Lost when the claim was gone for another reason."""
    from gpucloud.errors import CredentialsError, GpuCloudError
    from gpucloud.transport.redaction import scrub, secret_forms
    from gpucloud.queue import failures

    try:
        launch = runner(claim, checkpoint_dir(work_dir, claim.task_id))
    except CredentialsError as exc:  # a secret the worker's environment lacks
        return (None, *failures.missing_secret(exc.message))
    except GpuCloudError as exc:  # the spec cannot run here (e.g. no command, no docker)
        return (None, *failures.bad_spec(exc.message))
    except OSError as exc:
        return None, f"cannot prepare the task: {exc}", False
    try:
        proc = subprocess.Popen(launch.argv, env=launch.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace", bufsize=1,
                                **stopping.popen_options())
    except FileNotFoundError as exc:
        return (None, *failures.missing_executable(launch.argv[0], exc.strerror or str(exc)))
    except ValueError as exc:  # a NUL in argv or env ("embedded null byte")
        return (None, *failures.bad_spec(f"cannot start {launch.argv[0]!r}: {exc}"))
    except OSError as exc:
        return None, f"cannot start {launch.argv[0]!r}: {exc.strerror or exc}", False
    # The values the task was given as secrets, whatever runner gave them.
    hidden = secret_forms(launch.env[name] for name in claim.spec.secrets if name in launch.env)
    lines = LineBuffer(lambda text: scrub(text, hidden))
    pump = threading.Thread(target=lines.read, args=(proc.stdout,), daemon=True)
    pump.start()
    beating = threading.Event()
    revoked = threading.Event()
    cancelled = threading.Event()
    interval = max(0.05, float(getattr(queue, "visibility_timeout", 60.0)) / 3)
    beat = threading.Thread(target=heartbeat,
                            args=(queue, worker_id, claim, interval, beating, revoked,
                                  cancelled),
                            daemon=True)
    beat.start()
    last_flush = time.monotonic()
    try:
        while True:
            try:
                code: Optional[int] = proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            if stop.is_set():
                _stop(proc, launch, kill_grace)
                raise Stopped
            if revoked.is_set():
                _stop(proc, launch, kill_grace)
                pump.join(timeout=5)
                if not cancelled.is_set():
                    # The log stream is the next run's now: its last lines stay out.
                    raise Lost
                flush(queue, claim, lines)  # its last lines, for `queue logs`
                raise Cancelled
            if lines.pending() >= LOG_BATCH or time.monotonic() - last_flush >= LOG_FLUSH_SECONDS:
                flush(queue, claim, lines)
                last_flush = time.monotonic()
        pump.join(timeout=5)
        # Every line before the result: a dead letter's log tail is read from them.
        persist(lambda: flush(queue, claim, lines, strict=True))
    finally:
        beating.set()
        beat.join(timeout=5)
    if code == 0:
        return 0, "", False
    # From lines whose secrets are out already: a cut leaves no piece of one.
    error, permanent = failures.classify(code, list(lines.tail),
                                         docker=Path(launch.argv[0]).name == "docker")
    return code, error, permanent


def _stop(proc: subprocess.Popen[str], launch: Launch, grace: float = KILL_GRACE) -> None:
    stopping.stop(proc, grace, container=launch.container, cleanup=launch.cleanup)


def heartbeat(queue: Any, worker_id: str, claim: Any, interval: float,
              done: threading.Event, revoked: Optional[threading.Event] = None,
              cancelled: Optional[threading.Event] = None) -> None:
    """Beat until ``done``; set ``revoked`` (and stop) when the beat's answer
    says the claim is gone, whatever the task's state now (cancelled, pending
    again after a requeue, another worker's), with ``cancelled`` set first
    when that state is `cancelled`. The run must stop either way: a second
    run of the task may be starting elsewhere."""
    while not done.wait(interval):
        try:
            if queue.heartbeat(worker_id, claim) is False:
                if cancelled is not None and is_cancelled(queue, claim):
                    cancelled.set()
                if revoked is not None:
                    revoked.set()
                return
        except Exception as exc:  # noqa: BLE001 - a blip must not end the task
            if transient(exc):  # find a restarted server now, not at the task's end
                reconnect(queue)


def is_cancelled(queue: Any, claim: Any) -> bool:
    """Is the task cancelled? (A Queue can say; a queue without ``task`` cannot.)"""
    task = getattr(queue, "task", None)
    if task is None:
        return False
    try:
        state = task(claim.task_id).state
    except Exception:  # noqa: BLE001 - unknown now: the next beat asks again
        return False
    return str(getattr(state, "value", state)) == "cancelled"
