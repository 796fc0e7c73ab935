"""The few shapes the operations and the adapters share, apart from the Provider
protocol (base.py): a flow, its Sleep instruction, the offers query, and the
job launch-id prefix.

Their own module because every operation needs them, and a
catalog-only `gpucloud offers` (no adapter built, no request sent) should not
load base.py's Provider class with its rate-limit and redaction machinery.
base.py re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
Flow = Generator[Any, Any, T]

# The launch id of a job's machine starts with this: list_jobs finds jobs by it.
JOB_PREFIX = "gj-"


@dataclass(frozen=True)
class Sleep:
    """A flow asks the driver to wait (polling) without sleeping itself."""

    seconds: float


@dataclass(frozen=True)
class OfferQuery:
    """The filter Client.offers hands an adapter. gpu is canonical or None.

    disk_gb is the disk the machine will get: where storage is billed apart and
    priced by the search (Vast.ai), offers are searched and priced for it."""

    gpu: str | None = None
    count: int | None = None
    region: str | None = None
    spot: bool = False
    disk_gb: int | None = None


__all__ = ["Flow", "JOB_PREFIX", "OfferQuery", "Sleep", "T"]
