"""Following a task's log lines as its worker streams them, until it ends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from gpucloud.queue.models import LogLine
from gpucloud.queue.names import ENDED



def follow(queue: Any, task_id: str, *, tail: Optional[int] = None,
           wait: float = 1.0) -> Iterator[LogLine]:
    """The task's lines (the last ``tail`` ones first), then each new one as it
    arrives, until the task has ended and every line is read. The state is read
    before the lines each round: a worker sends a task's last lines before its
    result, so none written before the end is missed."""
    lines = queue.log_entries(task_id, tail=tail)
    yield from lines
    after = lines[-1].id if lines else "0-0"
    while True:
        ended = queue.task(task_id).state in ENDED
        new = queue.log_entries(task_id, after, block_seconds=0.0 if ended else wait)
        yield from new
        if new:
            after = new[-1].id
        elif ended:
            return
