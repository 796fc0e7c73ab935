"""The worker: takes one task at a time from a Queue, runs it, reports how it ended.

While a task runs, a heartbeat every visibility_timeout/3 keeps it ours; a
worker that stops heart-beating (killed, machine preempted) loses the task to
another worker after the visibility timeout. That is also why SIGTERM acks
nothing: the task is left as it is, re-delivered, and resumes from its
CHECKPOINT_DIR (a per-task directory, the same for every attempt of a task id).

A task cancelled while it runs (``gpucloud queue cancel``) is seen at the
next heartbeat, whose answer says the task is no longer this worker's: its
process group (or container) gets SIGTERM, then SIGKILL after the kill grace,
and the worker counts it as cancelled; the queue's state stays `cancelled`.
Any other answer that the claim is gone stops the run the same way, whatever
the task's state is by then: cancelled and requeued before the beat, or taken
by another worker past the visibility timeout. That run is counted as lost:
the task's current holder (or next claimer) runs it, and two runs of one task
at once would write one CHECKPOINT_DIR and one log stream.

A lost connection to Redis (a restart of the server, a network blip) is
waited out within ``idle``: every call is retried with backoff, reconnecting
first (the embedded server comes back on a new socket). A finished task's
result waits for Redis as long; a worker that was away longer than the
visibility timeout finds its task re-delivered, and its late result is
ignored (the queue's scripts refuse a stale claim) and reported as lost.

What the worker sends to Redis (log lines, errors) never holds the task's
secret values, nor their base64, alone or inside the base64 of longer text
(``Basic base64("user:" + token)``): they are replaced with ``[redacted]`` before
they leave the machine, as everywhere else gpucloud keeps text.

The runner decides how a task's process is started (``docker run --gpus all``
where docker exists, the task's command directly elsewhere); tests plug their
own.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol, TypeVar

from pydantic import BaseModel

from gpucloud.queue import stopping
from gpucloud.queue.params import env_name

LOG_BATCH = 200          # lines per append_log call at most
LOG_FLUSH_SECONDS = 1.0  # a quiet task's lines still reach Redis this soon
LOG_HOLD = 10_000        # lines kept for Redis while it is away (the log stream's cap)
TAIL_LINES = 50          # last output lines kept to pick the task's error from
RETRY_FIRST = 0.1        # seconds before the first retry of a failed Redis call
RETRY_MAX = 1.0          # ... doubling up to this: a restarted server is found within it
KILL_GRACE = 10.0        # seconds between TERM and KILL of a task stopped early (default)
_PARAM = re.compile(r"[^A-Za-z0-9_]")
_WORKER_ONLY = {"GPUCLOUD_REDIS_URL"}
T = TypeVar("T")


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


@dataclass
class Launch:
    """How one task's process starts: argv and its complete environment."""

    argv: list[str]
    env: dict[str, str]
    cleanup: list[str] = field(default_factory=list)  # run after a forced stop
    container: str = ""  # the container's name, stopped through the daemon on a forced stop


class Runner(Protocol):
    def __call__(self, claim: Any, checkpoint_dir: Path) -> Launch: ...


def param_env(params: dict[str, Any]) -> dict[str, str]:
    return {env_name(_PARAM.sub("_", str(k))): str(v) for k, v in (params or {}).items()}


def task_env(claim: Any, checkpoint_dir: str) -> dict[str, str]:
    """What gpucloud adds to a task's env (secrets excluded)."""
    spec = claim.spec
    env = dict(spec.env)
    env.update(param_env(claim.params))
    env["GPUCLOUD_TASK_ID"] = str(claim.task_id)
    env["GPUCLOUD_ATTEMPT"] = str(claim.attempt)
    env["CHECKPOINT_DIR"] = checkpoint_dir
    return env


def _secrets(spec: Any) -> dict[str, str]:
    """The task's secrets, read from the worker's own environment or keyring (a
    worker machine gets them as its own job's secrets)."""
    if not spec.secrets:
        return {}
    from gpucloud.jobs.ops import resolve_secrets

    return {k: v.get_secret_value() for k, v in resolve_secrets(spec).items()}


def _inherited() -> dict[str, str]:
    """The worker's environment minus what only the worker may see (the queue's
    URL carries its password)."""
    return {k: v for k, v in os.environ.items() if k not in _WORKER_ONLY}


def direct_runner(claim: Any, checkpoint_dir: Path) -> Launch:
    """The task's command run here, as a child process (no container runtime)."""
    spec = claim.spec
    argv = [*spec.command, *spec.args]  # params were applied at submit (Claim.spec)
    if not spec.command:  # args alone are for the image's entrypoint, not a program here
        from gpucloud.errors import SpecError

        raise SpecError(f"task {claim.task_id}: without docker a task needs a command",
                        hint="set command in the job file, or run the worker where docker is")
    env = _inherited()
    env.update(task_env(claim, str(checkpoint_dir)))
    env.update(_secrets(spec))
    return Launch(argv, env)


def docker_runner(claim: Any, checkpoint_dir: Path) -> Launch:
    """``docker run --rm --gpus all`` of the task's image; values travel in the
    docker client's env and are named on its command line only (-e NAME), so
    none shows in the process list."""
    spec = claim.spec
    inside = spec.checkpoint.dir if spec.checkpoint else "/checkpoints"
    plain = task_env(claim, inside)
    secrets = _secrets(spec)
    name = "gq-" + _PARAM.sub("-", str(claim.task_id))[:40] + f"-{claim.attempt}"
    argv = ["docker", "run", "--rm", "--name", name, "--gpus", "all"]
    for key in [*plain, *secrets]:
        argv += ["-e", key]
    argv += ["-v", f"{checkpoint_dir}:{inside}"]
    if spec.command:
        argv += ["--entrypoint", spec.command[0], spec.image, *spec.command[1:], *spec.args]
    else:
        argv += [spec.image, *spec.args]
    env = _inherited()
    env.update(plain)
    env.update(secrets)
    return Launch(argv, env, cleanup=["docker", "rm", "-f", name], container=name)


def default_runner() -> Runner:
    return docker_runner if shutil.which("docker") else direct_runner


def default_work_dir() -> Path:
    from gpucloud.config.settings import data_dir

    return data_dir() / "worker"


def checkpoint_dir(work_dir: Path, task_id: str) -> Path:
    """The same directory for every attempt of one task on this machine."""
    path = work_dir / "tasks" / _PARAM.sub("_", str(task_id)) / "checkpoint"
    path.mkdir(parents=True, exist_ok=True)
    return path


class _Stopped(Exception):
    pass


class _Cancelled(Exception):
    """The task was cancelled while it ran here; its process is stopped."""


class _Lost(Exception):
    """The claim was gone while the task ran here (cancelled and requeued,
    re-delivered to another worker); its process is stopped."""


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
    persist = _Persist(queue, stop, emit, idle)
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
                if not _transient(exc):
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
                code, error, permanent = _run_task(queue, worker_id, claim, runner, work_dir,
                                                   stop, persist, kill_grace)
                if code == 0:
                    recorded = persist(lambda: queue.succeed(claim, exit_code=0))
                elif permanent:  # no retry can heal it: a dead letter now
                    recorded = persist(lambda: queue.fail(claim, error, exit_code=code,
                                                          permanent=True))
                else:
                    recorded = persist(lambda: queue.fail(claim, error, exit_code=code))
            except _Stopped:
                summary.interrupted = True
                break
            except _Cancelled:
                last_work = time.monotonic()
                summary.cancelled += 1
                emit("cancelled", {"task_id": claim.task_id})
                continue
            except _Lost:
                last_work = time.monotonic()
                summary.lost += 1
                emit("lost", {"task_id": claim.task_id, "exit_code": None, "error": "",
                              "stopped": True})
                continue
            last_work = time.monotonic()
            if recorded is False and _cancelled(queue, claim):  # ended as it was cancelled
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


class _Persist:
    """Calls to Redis retried through a lost connection: reconnect, then wait
    with doubling pauses, for at most ``window`` seconds from the first
    failure (the worker's ``idle``). Past it the error is raised."""

    def __init__(self, queue: Any, stop: threading.Event,
                 emit: Callable[[str, dict[str, Any]], None], window: float) -> None:
        self.queue, self.stop, self.emit, self.window = queue, stop, emit, window
        self.delay = RETRY_FIRST

    def reset(self) -> None:
        self.delay = RETRY_FIRST

    def pause(self, at_most: float) -> None:
        """Wait before the next try, reconnecting first where the queue can."""
        if _reconnect(self.queue):
            self.delay = RETRY_FIRST
            return
        self.stop.wait(max(0.01, min(self.delay, at_most)))
        self.delay = min(RETRY_MAX, self.delay * 2)

    def __call__(self, call: Callable[[], T]) -> T:
        give_up = time.monotonic() + self.window
        self.reset()
        while True:
            try:
                return call()
            except Exception as exc:
                left = give_up - time.monotonic()
                if not _transient(exc) or left <= 0:
                    raise
                if self.stop.is_set():  # not reported: re-delivered, as on any signal
                    raise _Stopped from None
                self.emit("retry", {"error": str(exc)})
                self.pause(left)


def _reconnect(queue: Any) -> bool:
    """True when the queue reached its server again (a Queue can; fakes need not)."""
    reconnect = getattr(queue, "reconnect", None)
    try:
        return bool(reconnect()) if reconnect is not None else False
    except Exception:  # noqa: BLE001 - a failed reconnect is one more wait
        return False


def _transient(exc: BaseException) -> bool:
    return any(cls.__module__.split(".")[0] == "redis"
               and cls.__name__ in ("ConnectionError", "TimeoutError", "BusyLoadingError")
               for cls in type(exc).__mro__) or getattr(exc, "code", None) == "connection_error"


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


def _run_task(queue: Any, worker_id: str, claim: Any, runner: Runner, work_dir: Path,
              stop: threading.Event, persist: _Persist,
              kill_grace: float = KILL_GRACE) -> tuple[Optional[int], str, bool]:
    """(exit code, error, whether no retry can heal it), free of the task's
    secrets; raises _Stopped when a signal stopped the task, _Cancelled when a
    cancel did, _Lost when the claim was gone for another reason."""
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
    lines = _LineBuffer(lambda text: scrub(text, hidden))
    pump = threading.Thread(target=lines.read, args=(proc.stdout,), daemon=True)
    pump.start()
    beating = threading.Event()
    revoked = threading.Event()
    cancelled = threading.Event()
    interval = max(0.05, float(getattr(queue, "visibility_timeout", 60.0)) / 3)
    beat = threading.Thread(target=_heartbeat,
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
                raise _Stopped
            if revoked.is_set():
                _stop(proc, launch, kill_grace)
                pump.join(timeout=5)
                if not cancelled.is_set():
                    # The log stream is the next run's now: its last lines stay out.
                    raise _Lost
                _flush(queue, claim, lines)  # its last lines, for `queue logs`
                raise _Cancelled
            if lines.pending() >= LOG_BATCH or time.monotonic() - last_flush >= LOG_FLUSH_SECONDS:
                _flush(queue, claim, lines)
                last_flush = time.monotonic()
        pump.join(timeout=5)
        # Every line before the result: a dead letter's log tail is read from them.
        persist(lambda: _flush(queue, claim, lines, strict=True))
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


def _heartbeat(queue: Any, worker_id: str, claim: Any, interval: float,
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
                if cancelled is not None and _cancelled(queue, claim):
                    cancelled.set()
                if revoked is not None:
                    revoked.set()
                return
        except Exception as exc:  # noqa: BLE001 - a blip must not end the task
            if _transient(exc):  # find a restarted server now, not at the task's end
                _reconnect(queue)


def _cancelled(queue: Any, claim: Any) -> bool:
    """Is the task cancelled? (A Queue can say; a queue without ``task`` cannot.)"""
    task = getattr(queue, "task", None)
    if task is None:
        return False
    try:
        state = task(claim.task_id).state
    except Exception:  # noqa: BLE001 - unknown now: the next beat asks again
        return False
    return str(getattr(state, "value", state)) == "cancelled"


def _flush(queue: Any, claim: Any, lines: _LineBuffer, strict: bool = False) -> None:
    """Send the lines read so far. While Redis is away they are kept for the next
    flush (up to LOG_HOLD), and `strict` raises its error; a batch Redis
    refuses is dropped (logs are best effort; the task's result is not)."""
    batch = lines.take()
    for start in range(0, len(batch), LOG_BATCH):
        try:
            queue.append_log(claim, batch[start:start + LOG_BATCH])
        except Exception as exc:
            if not _transient(exc):
                continue
            lines.put_back(batch[start:])
            if strict:
                raise
            return


class _LineBuffer:
    """The task's output lines, each with the task's secrets replaced as it is read."""

    def __init__(self, clean: Callable[[str], str] = lambda text: text) -> None:
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._clean = clean
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)  # non-empty lines, for the error

    def read(self, stream: Any) -> None:
        for line in stream:
            line = self._clean(line.rstrip("\n"))
            with self._lock:
                self._lines.append(line)
                if line.strip():
                    self.tail.append(line.strip())
        stream.close()

    def put_back(self, batch: list[str]) -> None:
        with self._lock:
            self._lines[:0] = batch
            del self._lines[:-LOG_HOLD]

    def pending(self) -> int:
        with self._lock:
            return len(self._lines)

    def take(self) -> list[str]:
        with self._lock:
            batch, self._lines = self._lines, []
        return batch
