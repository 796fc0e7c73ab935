"""The requests the simulated cloud answered, for the tests that count them.

The last thousand stay in memory (``SandboxCloud.log``). With the
``REQUEST_LOG`` knob every request is also a line ``METHOD PATH STATUS`` of a
file that every process of a test appends to, so what several processes sent
one cloud (three reapers' DELETEs) can be counted in one place.
"""

from __future__ import annotations

import os
from collections import deque


class RequestLog:
    def __init__(self, path: str | None, keep: int = 1000) -> None:
        self.recent: deque[tuple[str, str, int]] = deque(maxlen=keep)
        self.path = path

    def record(self, method: str, path: str, status: int) -> None:
        self.recent.append((method, path, status))
        if self.path:
            _append_line(self.path, f"{method} {path} {status}\n")


def _append_line(path: str, line: str) -> None:
    """One write with O_APPEND: lines of several processes never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


__all__ = ["RequestLog"]
