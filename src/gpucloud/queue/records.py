"""A task's Redis hash read back as what the queue reports (``TaskInfo``).

Submit and the queue's scripts write a task's fields as strings (times as
epoch seconds, "" for none); these read them back, tolerating a hash an
older gpucloud or another writer left without some of them.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Optional

from gpucloud.errors import NotFoundError
from gpucloud.queue.models import TaskInfo


def unknown_task(task_id: str, queue: str) -> NotFoundError:
    return NotFoundError(f"no task {task_id} in queue {queue}", provider="queue",
                         status_code=404, hint="`gpucloud queue status` lists the tasks")


def when(value: Optional[str]) -> Optional[datetime]:
    """An epoch-seconds field as a UTC time; None for none ("", "0")."""
    if value in (None, "", "0"):
        return None
    return datetime.fromtimestamp(float(value), tz=timezone.utc)


def task_info(task_id: str, d: dict[str, str], now: float) -> TaskInfo:
    state = d.get("state", "pending")
    since = d.get("started_at") if state == "running" else d.get("submitted_at")
    try:
        name = json.loads(d.get("spec", "{}")).get("name", "")
    except ValueError:
        name = ""
    return TaskInfo(
        id=task_id, name=name, state=state, params=json.loads(d.get("params") or "{}"),
        attempts=int(d.get("attempts") or 0), retries=int(d.get("retries") or 0),
        worker=d.get("worker") or None, submitted_at=when(d.get("submitted_at")),
        started_at=when(d.get("started_at")), finished_at=when(d.get("finished_at")),
        not_before=when(d.get("not_before")) if state == "failed" else None,
        age_seconds=round(now - float(since), 3) if since else None,
        exit_code=int(d["exit_code"]) if d.get("exit_code") not in (None, "") else None,
        error=d.get("error") or None)
