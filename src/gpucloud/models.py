"""Domain types: plain, frozen pydantic data. No I/O lives here.

Money is ``Decimal`` (USD) everywhere; times are timezone-aware UTC.
"""

from __future__ import annotations

import enum
from datetime import datetime
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InstanceStatus(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    FAILED = "failed"
    UNKNOWN = "unknown"


class Offer(_Model):
    """One machine shape a provider sells, in one region, at one price."""

    provider: str
    instance_type: str
    region: str
    gpu: str  # canonical name from gpus.py, or the provider's raw name
    gpu_count: int
    gpu_memory_gb: int | None = None
    vcpus: int | None = None
    memory_gb: int | None = None
    disk_gb: int | None = None
    price_per_hour: Decimal  # USD per hour for the whole machine
    spot: bool = False
    available: bool | None = None  # None: unknown (catalog data)
    source: Literal["live", "catalog"] = "catalog"
    simulated: bool = False  # True only for the sandbox cloud
    # Storage billed on top of price_per_hour, USD per GB-month (marketplaces).
    disk_price_per_gb_month: Decimal | None = None
    as_of: str | None = None  # date of catalog data
    # The provider's id for this very offer, where it sells hosts one by one
    # (a Vast.ai ask id); None where instance_type + region say it all.
    offer_id: str | None = None


class CostLine(_Model):
    component: str  # "GPU instance", "disk", ...
    price_per_hour: Decimal
    total: Decimal


class CostEstimate(_Model):
    offer: Offer
    hours: Decimal
    price_per_hour: Decimal
    total: Decimal
    breakdown: tuple[CostLine, ...]
    currency: Literal["USD"] = "USD"
    notes: tuple[str, ...] = ()


class InstanceSpec(_Model):
    """What Client.create hands an adapter: one concrete offer to launch."""

    offer: Offer
    launch_id: str  # client-generated; goes into the name/labels for reconcile
    name: str
    image: str | None = None
    ssh_key_name: str | None = None
    ssh_public_key: str | None = None
    disk_gb: int | None = None
    shutdown_at: datetime | None = None


class Instance(_Model):
    provider: str
    id: str
    name: str | None = None
    status: InstanceStatus = InstanceStatus.UNKNOWN
    provider_status: str | None = None  # the provider's own word, for debugging
    gpu: str | None = None
    gpu_count: int | None = None
    instance_type: str | None = None
    region: str | None = None
    price_per_hour: Decimal | None = None
    ip: str | None = None
    created_at: datetime | None = None
    shutdown_at: datetime | None = None
    launch_id: str | None = None
    simulated: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.id}"


class Attempt(_Model):
    """One try at launching an offer, as reported by Client.create."""

    provider: str
    instance_type: str
    region: str
    outcome: Literal["launching", "created", "failed", "adopted"]
    error: str | None = None
    error_code: str | None = None
    launch_id: str | None = None  # on the machine if it exists: reconcile looks for it


class ProviderStatus(_Model):
    name: str
    display_name: str
    credentials: bool
    source: str | None = None  # "env:GPUCLOUD_LAMBDA_API_KEY", "keyring", "argument", "none needed"
    hint: str | None = None
    simulated: bool = False
    catalog_as_of: str | None = None


__all__ = [
    "Attempt", "AuthStatus", "CostEstimate", "CostLine", "Instance", "InstanceSpec",
    "InstanceStatus", "Offer", "Plan", "ProviderStatus", "Field",
]


class AuthStatus(_Model):
    """What `gpucloud auth status` reports for one provider."""

    provider: str
    source: str | None = None  # where the credential comes from; None: not configured
    works: bool | None = None  # None: not checked (no credential, or none needed)
    error: str | None = None
    token_expires_at: datetime | None = None
    hint: str | None = None


class Plan(_Model):
    """What create will do, computed before anything is spent."""

    offer: Offer
    alternatives: tuple[Offer, ...] = ()
    estimate: CostEstimate
    hours_basis: Literal["auto_shutdown", "max_cost", "per_hour"]
    shutdown_at: datetime | None = None
    max_cost: Decimal | None = None
    instances: int = 1  # machines to create, each like `offer`
    total: Decimal  # the estimate for all of them
    notes: tuple[str, ...] = ()
