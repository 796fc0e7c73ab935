"""A task's output lines on their way to Redis (its log stream).

Lines are read as the task writes them, each with the task's secret values
(and their base64, alone or inside the base64 of longer text) replaced with
``[redacted]`` before it is kept, so nothing sent to Redis holds them. They
go in batches; while Redis is away they wait, up to the log stream's cap.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from gpucloud.queue.redis_retry import transient

LOG_BATCH = 200          # lines per append_log call at most
LOG_FLUSH_SECONDS = 1.0  # a quiet task's lines still reach Redis this soon
LOG_HOLD = 10_000        # lines kept for Redis while it is away (the log stream's cap)
TAIL_LINES = 50          # last output lines kept to pick the task's error from


class LineBuffer:
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


def flush(queue: Any, claim: Any, lines: LineBuffer, strict: bool = False) -> None:
    """Send the lines read so far. While Redis is away they are kept for the next
    flush (up to LOG_HOLD), and `strict` raises its error; a batch Redis
    refuses is dropped (logs are best effort; the task's result is not)."""
    batch = lines.take()
    for start in range(0, len(batch), LOG_BATCH):
        try:
            queue.append_log(claim, batch[start:start + LOG_BATCH])
        except Exception as exc:
            if not transient(exc):
                continue
            lines.put_back(batch[start:])
            if strict:
                raise
            return
