"""What a batch create takes and gives back: CreateRequest, BatchItem,
BatchResult, BatchIncompleteError (the operation itself is in batch.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, field_validator

from gpucloud.errors import GpuCloudError
from gpucloud.models import Attempt, Instance, Plan
from gpucloud.core.instructions import DEFAULT_CONCURRENCY  # noqa: F401 - also part of this module's names

# defer_build: the schemas are built on first use, so importing the client (for
# a catalog-only `gpucloud offers`) does not pay for models a batch needs.


class CreateRequest(BaseModel):
    """One machine of a batch: the arguments of ``Client.create``. A dict with
    these keys is accepted wherever a CreateRequest is."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    gpu: str = "h100"
    count: int = 8
    provider: str | None = None
    region: str | None = None
    name: str | None = None
    image: str | None = None
    ssh_key: str | None = None
    disk_gb: int | None = None
    auto_shutdown: Union[timedelta, str, None] = None
    until: Union[datetime, str, None] = None
    max_cost: Union[Decimal, str, int, None] = None
    spot: bool = False

    @field_validator("max_cost", mode="before")
    @classmethod
    def _no_binary_float(cls, value: object) -> object:
        # As everywhere (pricing.to_decimal): a float goes through str, so 0.1 stays 0.1.
        return Decimal(str(value)) if isinstance(value, float) else value

    def plan_key(self) -> tuple[object, ...]:
        """What the plan depends on: requests alike in these share one plan."""
        return (self.gpu, self.count, self.provider, self.region, self.disk_gb,
                str(self.auto_shutdown), str(self.until), str(self.max_cost), self.spot)


Status = Literal["created", "adopted", "failed", "not_launched", "terminated"]


class BatchItem(BaseModel):
    """One requested machine and what became of it.

    ``created``: made by this call. ``adopted``: made by an earlier run of the
    same ``batch`` key (found by its launch id). ``failed``: nothing runs for
    it; ``error_code``/``error``/``hint``/``exit_code`` say why and
    ``attempts`` lists every offer tried. ``not_launched``: never sent (an
    all-or-nothing batch stopped launching). ``terminated``: made, then
    terminated because the all-or-nothing batch could not complete."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    index: int
    name: str | None = None
    launch_id: str | None = None
    status: Status
    instance: Instance | None = None
    error_code: str | None = None
    error: str | None = None
    hint: str | None = None
    exit_code: int | None = None
    attempts: tuple[Attempt, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status in ("created", "adopted")


class BatchResult(BaseModel):
    """One item per request, in request order; ``batch`` is the key that resumes it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    batch: str
    items: tuple[BatchItem, ...]
    plans: tuple[Plan, ...] = ()

    @property
    def instances(self) -> list[Instance]:
        """The machines that exist for this batch (made now or by an earlier run)."""
        return [i.instance for i in self.items if i.ok and i.instance is not None]

    @property
    def failures(self) -> list[BatchItem]:
        return [i for i in self.items if not i.ok]

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.items)


class BatchIncompleteError(GpuCloudError):
    """An all-or-nothing batch that could not complete: launching stopped,
    launches in flight settled, and every machine it made was terminated
    (``result.items``: status ``terminated``; any that could not be confirmed
    gone are named in the hint). ``code`` and ``exit_code`` are those of the
    first failure."""

    code = "batch_incomplete"

    def __init__(self, message: str, *, result: BatchResult, code: str | None = None,
                 exit_code: int = 1, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.result = result
        self.exit_code = exit_code
        if code:
            self.code = code
