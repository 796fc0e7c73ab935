"""The worker's calls to Redis, retried through a lost connection.

A lost connection to Redis (a restart of the server, a network blip) is
waited out within the worker's ``idle``: every call is retried with backoff,
reconnecting first (the embedded server comes back on a new socket). A
finished task's result waits for Redis as long; a worker that was away longer
than the visibility timeout finds its task re-delivered, and its late result
is ignored (the queue's scripts refuse a stale claim) and reported as lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

RETRY_FIRST = 0.1        # seconds before the first retry of a failed Redis call
RETRY_MAX = 1.0          # ... doubling up to this: a restarted server is found within it
T = TypeVar("T")


class Stopped(Exception):
    """A signal stopped the worker while it waited or ran a task: the task is
    not reported, so it is re-delivered."""


class Persist:
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
        if reconnect(self.queue):
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
                if not transient(exc) or left <= 0:
                    raise
                if self.stop.is_set():  # not reported: re-delivered, as on any signal
                    raise Stopped from None
                self.emit("retry", {"error": str(exc)})
                self.pause(left)


def reconnect(queue: Any) -> bool:
    """True when the queue reached its server again (a Queue can; fakes need not)."""
    again = getattr(queue, "reconnect", None)
    try:
        return bool(again()) if again is not None else False
    except Exception:  # noqa: BLE001 - a failed reconnect is one more wait
        return False


def transient(exc: BaseException) -> bool:
    """Is ``exc`` a lost or slow connection (worth waiting out), not a refusal?"""
    return any(cls.__module__.split(".")[0] == "redis"
               and cls.__name__ in ("ConnectionError", "TimeoutError", "BusyLoadingError")
               for cls in type(exc).__mro__) or getattr(exc, "code", None) == "connection_error"
