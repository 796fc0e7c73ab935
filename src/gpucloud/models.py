"""Domain types: plain, frozen pydantic data. No I/O lives here.

Money is ``Decimal`` (USD) everywhere; times are timezone-aware UTC.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Literal

from pydantic import (
    BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, computed_field, field_validator,
)

from gpucloud.catalog.limits import MAX_PRICE_PER_HOUR


class _Model(BaseModel):
    # defer_build: a model's validator is built when first used, not at import
    # (a CLI command uses a few of these models; building all cost ~100 ms).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class InstanceStatus(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    FAILED = "failed"
    UNKNOWN = "unknown"


class UsagePrice(_Model):
    """A charge by use rather than by time, e.g. USD 0.02 per GB of egress."""

    component: str  # "egress", "ingress"
    price: Decimal  # USD per unit
    unit: str  # "GB"


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
    # Where the provider bills storage apart (marketplaces), its rate in USD per
    # GB-month; price_per_hour then already holds the storage for disk_gb GB.
    disk_price_per_gb_month: Decimal | None = None
    # The provider bills storage apart but its rate is not known here (catalog
    # data): price_per_hour is the machine alone and the disk is an unknown part.
    disk_billed_apart: bool = False
    # Hours in the provider's billing month, for per-month rates (Vast.ai: 720).
    hours_per_month: int | None = None
    # Charges by use, not by the hour (Vast.ai bandwidth): shown, never folded in.
    usage_prices: tuple[UsagePrice, ...] = ()

    @field_validator("price_per_hour", "disk_price_per_gb_month")
    @classmethod
    def _plausible(cls, value: Decimal | None) -> Decimal | None:
        if value is not None and (not value.is_finite() or not 0 <= value < MAX_PRICE_PER_HOUR):
            raise ValueError(f"implausible price {value}")
        return value
    as_of: str | None = None  # date of catalog data
    # The provider's id for this very offer, where it sells hosts one by one
    # (a Vast.ai ask id); None where instance_type + region say it all.
    offer_id: str | None = None
    # What the provider's own figures say that the fields above cannot, e.g. a
    # quoted price that its parts do not add up to. Estimates repeat them.
    notes: tuple[str, ...] = ()


class CostLine(_Model):
    """One part of an estimate. A part billed by the hour has price_per_hour and
    total, None when its price is not known (never 0). A part billed by use has
    unit_price and unit instead ("0.02" per "GB egress") and no total: how much
    will be used is not known in advance."""

    component: str  # "GPU instance", "disk (32 GB)", "egress", ...
    price_per_hour: Decimal | None
    total: Decimal | None
    unit_price: Decimal | None = None
    unit: str | None = None


class CostEstimate(_Model):
    """The cost of one machine over ``hours``. ``unknown`` names the hourly parts
    whose price is not known; when it is not empty, price_per_hour and total are
    None (a partial sum would read as the price). Usage lines are never in them."""

    offer: Offer
    hours: Decimal
    price_per_hour: Decimal | None
    total: Decimal | None
    breakdown: tuple[CostLine, ...]
    currency: Literal["USD"] = "USD"
    notes: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()


class JobStatus(str, enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"  # the provider does not say (never guessed)


class JobRun(_Model):
    """What an adapter needs to run a job's container: InstanceSpec.job.

    ``secret_env`` holds values resolved from the environment or the keyring
    for the names the job file references: they go to the provider in the
    launch request and nowhere else (never logged, never in an exception's
    request, never in the journal)."""

    name: str
    image: str
    command: tuple[str, ...] = ()  # replaces the image's entrypoint when given
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: dict[str, SecretStr] = Field(default_factory=dict)
    max_runtime_seconds: int | None = None
    retries: int = 0
    checkpoint_dir: str | None = None  # exposed to the job as CHECKPOINT_DIR
    checkpoint_url: str | None = None  # object storage the directory is synced to
    gpu_count: int = 1
    # Added by the job core: what the spec asks beyond the offer (None: not asked).
    checkpoint_sync_seconds: int | None = None
    cpu: float | None = None
    memory_gb: float | None = None
    spot: bool = False
    # A multi-node job: every node runs the same container with the rendezvous
    # env of providers/rendezvous.py (MASTER_ADDR, NODE_RANK, ...). ``nodes`` is the
    # whole job's count; ``node_rank`` says which node this launch is, where
    # gpucloud launches the nodes one machine each (VM clouds).
    nodes: int = 1
    node_rank: int = 0
    interconnect: Literal["any", "infiniband"] = "any"
    volumes: tuple[VolumeMount, ...] = ()


class VolumeMount(_Model):
    """A volume a job mounts: an existing one by name, or one the job makes
    (``size_gb`` given) and, with ``delete_with_job``, deletes when it ends."""

    name: str
    mount: str  # absolute path inside the container
    size_gb: int | None = None
    delete_with_job: bool = False
    # The provider's id of the volume, filled in by the job core once it has
    # found (or created) the volume in the chosen offer's region; what an
    # adapter's launch request names.
    volume_id: str | None = None


class Volume(_Model):
    """Network storage a provider bills by the GB-month whether or not a
    machine is attached. ``price_per_gb_month`` is the provider's or the
    catalog's rate, None when neither says (unknown is never 0)."""

    provider: str
    id: str
    name: str
    size_gb: int
    region: str | None = None
    price_per_gb_month: Decimal | None = None
    status: str | None = None  # the provider's own word
    attached_to: tuple[str, ...] = ()  # ids of the machines (or pods) using it
    created_at: datetime | None = None
    simulated: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.id}"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def price_per_month(self) -> Decimal | None:
        """USD per month for the whole volume; None when the rate is unknown."""
        if self.price_per_gb_month is None:
            return None
        return self.price_per_gb_month * self.size_gb


class VolumeSpec(_Model):
    """What Client.create_volume hands an adapter."""

    name: str
    size_gb: int = Field(ge=1)
    region: str


class InstanceSpec(_Model):
    """What Client.create hands an adapter: one concrete offer to launch."""

    offer: Offer
    launch_id: str  # client-generated; goes into the name/labels for reconcile
    name: str
    # The key of the batch (create_many) it belongs to: beside the launch id
    # wherever the provider has room (adapters/_batch_mark.py).
    batch: str | None = None
    image: str | None = None
    ssh_key_name: str | None = None
    ssh_public_key: str | None = None
    disk_gb: int | None = None
    shutdown_at: datetime | None = None
    # This machine's share of the create's spend cap (--max-cost), USD; for a
    # provider that can end a machine at a spend itself (Shadeform's auto_delete).
    max_cost: Decimal | None = None
    job: JobRun | None = None  # run this job's container, and end with it
    # A multi-node job's node, launched without the job (started on it later):
    # the job's volumes, attached at launch where the provider attaches only
    # then. A machine launched with its job attaches ``job.volumes`` instead.
    volumes: tuple[VolumeMount, ...] = ()


class Connection(_Model):
    """How to reach a machine's shell. ``ssh``: OpenSSH to host:port as user
    (VMs and containers with an exposed port); ``api``: the provider's own exec
    API (Kubernetes pods, the sandbox), no SSH daemon involved."""

    method: Literal["ssh", "api"]
    host: str | None = None
    port: int | None = None
    user: str | None = None

    # Field validators, not a model validator: an Instance built around a checked
    # Connection passes it through without running these again (pydantic runs a
    # model's after-validators on every instance it is handed: twice per machine
    # in a listing, which the list overhead bench measures).
    @field_validator("host", "user", "port")
    @classmethod
    def _no_ssh_option(cls, value: object, info: ValidationInfo) -> object:
        # host and user end up on ssh's command line and in ssh_config files: one
        # that could pass for an option (-oProxyCommand=...) or hold a newline
        # would run what it says. Adapters check replies the same way.
        if value is not None and info.data.get("method") == "ssh" \
                and not _SSH_CHECKS[str(info.field_name)](value):
            raise ValueError(f"{info.field_name} is not a usable ssh endpoint part (a hostname "
                             "or IP address, a port 1-65535, a plain user name)")
        return value


# Hostnames, IPv4 and IPv6 literals; nothing an ssh option or a shell could use.
_SSH_HOST = re.compile(r"[A-Za-z0-9_.:\[\]%][A-Za-z0-9_.:\[\]%-]{0,252}")
_SSH_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def _host_ok(host: object) -> bool:
    return isinstance(host, str) and _SSH_HOST.fullmatch(host) is not None


def _user_ok(user: object) -> bool:
    return isinstance(user, str) and _SSH_USER.fullmatch(user) is not None


def _port_ok(port: object) -> bool:
    return isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536


_SSH_CHECKS = {"host": _host_ok, "user": _user_ok, "port": _port_ok}


def ssh_endpoint_ok(host: object, port: object, user: object) -> bool:
    """True when host, port (None: 22) and user can go on an ssh command line."""
    return _host_ok(host) and _user_ok(user) and (port is None or _port_ok(port))


class ExecResult(_Model):
    """What one command run on a machine returned (client.exec)."""

    command: str
    exit_code: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


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
    # The address on the provider's private network, where it gives one: what
    # the nodes of a multi-node job use to reach each other.
    private_ip: str | None = None
    # The batch key the machine carries (providers/_batch_mark.py), where the
    # provider gives it back: the machines of one multi-node job share it.
    batch: str | None = None
    created_at: datetime | None = None
    shutdown_at: datetime | None = None
    launch_id: str | None = None
    simulated: bool = False
    # None while the provider has not assigned an address yet (pending).
    connection: Connection | None = None
    # A terminated machine, from this computer's cost ledger (filled in by
    # Client.list): when it ended and what it cost from start to end. None when
    # the machine is still up or the ledger never saw it run.
    terminated_at: datetime | None = None
    final_cost: Decimal | None = None

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
    # While launching: the id the create reply named, not yet read back (an
    # interrupt then says the machine may exist under it).
    instance_id: str | None = None


class ProviderStatus(_Model):
    name: str
    display_name: str
    credentials: bool
    source: str | None = None  # "env:GPUCLOUD_LAMBDA_API_KEY", "keyring", "argument", "none needed"
    hint: str | None = None
    simulated: bool = False
    catalog_as_of: str | None = None
    # What the adapter can do (spot, stop_start, custom_disk, needs_ssh_key,
    # native_shutdown: the provider itself ends a machine at its deadline,
    # self_guard: a guard on the machine does, volumes; multi_node: "none",
    # "native" or "batch"). None: no adapter, catalog only.
    capabilities: dict[str, bool | str] | None = None


__all__ = [
    "Job", "JobRun", "JobStatus", "Attempt", "AuthStatus", "ReapAction", "ReapReport",
    "CostEstimate", "CostLine", "Instance", "InstanceSpec", "UnclaimedMachine",
    "InstanceStatus", "Offer", "Plan", "ProviderStatus", "UsagePrice", "Volume", "VolumeMount",
    "VolumeSpec", "Field",
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
    # All the machines together: per hour, and over the window (auto_shutdown or
    # the max_cost deadline). No window, or an unknown part: total is None.
    total_per_hour: Decimal | None
    total: Decimal | None
    notes: tuple[str, ...] = ()
    # The project its launches are journaled and budgeted under (--project).
    project: str | None = None


class ReapAction(_Model):
    """What the reaper did (or, in a dry run, would do) about one machine.

    ``terminated``: past its deadline and deleted; ``would_terminate``: the same
    in a dry run; ``extended``: past the deadline of the listing but a fresh read
    found a later one (an ``extend`` from elsewhere), left alone; ``failed``:
    the delete was refused or failed (``error``); ``gone``: it vanished between
    the listing and the fresh read."""

    instance: Instance
    action: Literal["terminated", "would_terminate", "extended", "failed", "gone"]
    overdue_seconds: int  # how far past its deadline when the reaper looked (>= 0)
    error: str | None = None
    # Why a machine not past its deadline was ended: a node of a multi-node job
    # that lost another node (safety/reap.py).
    reason: str | None = None


class UnclaimedMachine(_Model):
    """A machine carrying a launch id of gpucloud's form that no launch in this
    journal issued: another computer's crash, a deleted home, a colleague's.

    ``age_seconds``: since the provider says it was created (None: it does not
    say). ``price_per_hour``: the machine's own, else the catalog's for its
    type and region (``price_source`` says which; None: neither knows).
    ``cost_so_far``: age x price, rounded to the cent; time it spent stopped
    is counted at the running price, so it is an upper bound for a machine
    that was ever stopped; None when the age or the price is not known."""

    instance: Instance
    age_seconds: int | None = None
    price_per_hour: Decimal | None = None
    price_source: Literal["instance", "catalog"] | None = None
    cost_so_far: Decimal | None = None


class ReapReport(_Model):
    """One pass of the reaper over every provider with credentials.
    ``unclaimed``: filled in only when asked (``reap --watch``), a report:
    the reaper never deletes a machine for being unclaimed."""

    at: datetime
    dry_run: bool
    providers: tuple[str, ...]  # listed successfully
    checked: int  # gpucloud machines seen (with a launch id)
    actions: tuple[ReapAction, ...]
    warnings: tuple[str, ...] = ()
    unclaimed: tuple[UnclaimedMachine, ...] = ()


class Job(_Model):
    """A job as its provider reports it. On a Kubernetes cluster it is a batch/v1
    Job; elsewhere a machine that runs the container and ends with it (``instance``).
    What a provider does not expose (an exit code, logs) is None / unknown."""

    provider: str
    id: str
    name: str | None = None
    status: JobStatus = JobStatus.UNKNOWN
    provider_status: str | None = None
    launch_id: str | None = None
    instance: Instance | None = None  # node 0's machine where the job runs on machines
    # A multi-node job: how many nodes, and every node's machine in rank order
    # where the job runs on machines (VM clouds); empty for a one-node job.
    nodes: int = 1
    instances: tuple[Instance, ...] = ()
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    shutdown_at: datetime | None = None  # the job's deadline (max_runtime)
    exit_code: int | None = None
    message: str | None = None  # e.g. the scheduler's "0/8 nodes are available: ..."
    simulated: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.id}"


@dataclass(frozen=True)
class ServiceAccountToken:
    """A short-lived Kubernetes service-account token from the TokenRequest API
    (``client.provider("kubernetes").service_account_token(...)``); ``token`` is
    a SecretStr (shown as ********** in reprs)."""

    provider: str
    namespace: str
    service_account: str
    token: SecretStr = field(repr=False)
    expires_at: datetime
