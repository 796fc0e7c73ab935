"""What the queue reports: a task, the queue's status, a dead letter, a claim."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from pydantic import BaseModel, Field

from gpucloud.jobs.spec import JobSpec
from gpucloud.queue.names import STATES

__all__ = ["STATES", "Claim", "DeadTask", "QueueStatus", "TaskInfo"]


class TaskInfo(BaseModel):
    """One task. `failed` means its last run failed and a retry is scheduled
    (at `not_before`); `dead` means no retry is left (see `gpucloud queue dead`)."""

    id: str
    name: str = Field(description="The job spec's name.")
    state: str
    params: dict[str, str] = Field(default_factory=dict)
    attempts: int = Field(description="Runs started so far.")
    retries: int = Field(description="Runs allowed after the first (the spec's retries).")
    worker: Optional[str] = None
    submitted_at: Optional[datetime] = None
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    not_before: Optional[datetime] = Field(default=None, description="A retry's earliest start.")
    age_seconds: Optional[float] = Field(
        default=None, description="Running: since started; else since submitted.")
    exit_code: Optional[int] = None
    error: Optional[str] = None


class QueueStatus(BaseModel):
    queue: str
    counts: dict[str, int]
    tasks: list[TaskInfo]
    workers: dict[str, datetime] = Field(default_factory=dict,
                                         description="Worker id -> last heartbeat.")


class DeadTask(BaseModel):
    task_id: str
    error: str
    log_tail: str
    dead_at: Optional[datetime] = None


class Claim(BaseModel):
    """A task a worker holds. (worker_id, attempt) is the claim's identity: a
    claim whose task was re-delivered to another worker is stale, and its
    heartbeat/succeed/fail change nothing."""

    task_id: str
    spec: JobSpec = Field(description="The job, with the task's params already applied.")
    params: dict[str, str]
    attempt: int
    entry_id: str
    worker_id: str


class LogLine(BaseModel):
    """One output line a worker streamed for a task."""

    id: str = Field(description="The log stream's entry id (read on after it).")
    at: Optional[datetime] = Field(default=None, description="When the worker sent it.")
    line: str
