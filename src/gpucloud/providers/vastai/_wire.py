"""Vast.ai wire format: names, filters, labels and parsing, without I/O.

The pure half of the adapter (see adapter.py for the flows). Everything that
spells a Vast field, a Vast GPU name or the gpucloud label format lives here.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import httpx

from gpucloud.errors import (
    AuthenticationError,
    BadRequestError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    OfferRefusedError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
    SpecError,
)
from gpucloud.catalog.gpus import gpu_info, normalize_gpu
from gpucloud.models import Connection, InstanceStatus
from gpucloud.providers import _fields
from gpucloud.providers._connection import ssh_endpoint
from gpucloud.providers._fields import integer as as_int, is_int, is_number as is_num  # noqa: F401
from gpucloud.providers.error_table import SERVER_ERROR, ErrorFields, ErrorRule
from gpucloud.providers.base import OfferQuery, format_utc, parse_utc  # noqa: F401  (re-exported)

# Disk (GB) an offer is priced with and a machine gets when --disk is not
# given. Vast's own default (8 GB) does not hold the default vastai/pytorch
# image plus a working set; 32 GB costs well under a cent an hour at typical
# storage prices. Searches ask only for hosts with at least this much free.
DEFAULT_DISK_GB = 32
SEARCH_LIMIT = 64  # cheapest asks per search; enough to fail over within one search
PAGE_LIMIT = 25  # the v1 list's maximum page size
MAX_PAGES = 50  # a server that keeps answering next_token cannot loop us forever
LABEL_PREFIX = "gpucloud:"
LABEL_MAX = 1024  # manageInstance's label: maxLength 1024
ENV_LAUNCH_ID = "GPUCLOUD_LAUNCH_ID"
ENV_SHUTDOWN_AT = "GPUCLOUD_SHUTDOWN_AT"
BILLING_HINT = "add credit at https://cloud.vast.ai/billing/"

# Canonical GPU -> the gpu_name values Vast lists it under. The one place these
# names are spelled: SkyPilot's snapshot of Vast listings (providers/vastai.toml,
# spaces for "_") plus names from Vast's docs; an extra name in an "in" filter
# costs nothing. A canonical name missing here is searched under itself.
VAST_GPU_NAMES: dict[str, tuple[str, ...]] = {
    "B200": ("B200",),
    "H200": ("H200", "H200 NVL"),
    "H100": ("H100 SXM", "H100 PCIE", "H100 NVL"),
    "GH200": ("GH200 SXM",),
    "A100-80GB": ("A100 SXM4", "A100 PCIE"),
    "A100-40GB": ("A100 SXM4", "A100 PCIE"),
    "L40S": ("L40S",), "L40": ("L40",), "L4": ("L4",), "A40": ("A40",), "A10": ("A10",),
    "T4": ("Tesla T4",), "V100": ("Tesla V100",), "V100-32GB": ("Tesla V100",),
    "RTX-PRO-6000": ("RTX PRO 6000 S", "RTX PRO 6000 WS"),
    "RTX6000-ADA": ("RTX 6000Ada",), "RTX4000-ADA": ("RTX 4000Ada",),
    "RTX-A6000": ("RTX A6000",), "RTX-A5000": ("RTX A5000",), "RTX-A4000": ("RTX A4000",),
    "RTX-A2000": ("RTX A2000",),
    "RTX5090": ("RTX 5090",), "RTX4090": ("RTX 4090",),
    "RTX4070": ("RTX 4070", "RTX 4070 Ti", "RTX 4070S", "RTX 4070S Ti"),
    "RTX4060": ("RTX 4060", "RTX 4060 Ti"), "RTX3090": ("RTX 3090", "RTX 3090 Ti"),
    "RTX3080": ("RTX 3080", "RTX 3080 Ti"), "RTX3070": ("RTX 3070", "RTX 3070 Ti"),
    "RTX3060": ("RTX 3060", "RTX 3060 Ti"),
}
# Vast names shared by two canonical cards: per-GPU RAM (MB) tells them apart.
VAST_GPU_RAM_MB: dict[str, dict[str, int]] = {
    "A100-40GB": {"lt": 61440}, "A100-80GB": {"gte": 61440},
    "V100": {"lt": 24576}, "V100-32GB": {"gte": 24576},
}

# Vast bills storage by the month of 720 hours: dph_total = dph_base +
# storage_cost * GB / 720 (the spec's instance example: 1.0 + 0.14933 * 10 / 720
# = 1.0020740...). Recorded as hours_per_month in providers/vastai.toml too.
HOURS_PER_MONTH = 720
# vast-cli shows dph_total to four decimals (vast.py's offer display fields,
# "{:0.4f}"): a smaller gap between Vast's quote and the sum of its parts is
# rounding, a larger one is worth saying.
QUOTE_TOLERANCE = Decimal("0.0001")
_SIX_PLACES = Decimal("0.000001")

_PENDING = {None, "created", "loading", "restarting", "rebooting"}
# The spec: once exited, unknown or offline, it "will never reach running".
_FAILED = {"exited", "offline", "unknown"}
# A frozen contract is paused by Vast (host maintenance, or out of credit): the
# machine still exists and keeps its disk; it is stopped, not failed.
_STOPPED = {"stopped", "frozen"}
_LABEL = re.compile(r"gpucloud:(\S+)(?: shutdown:(\S+))?(?: (.*))?", re.DOTALL)


def disk_of(query: OfferQuery) -> int:
    """The disk (GB) a search prices and a machine gets."""
    return query.disk_gb if query.disk_gb is not None else DEFAULT_DISK_GB


def search_body(query: OfferQuery) -> dict[str, Any]:
    """The POST /api/v0/bundles/ filter for a query (on-demand asks, cheapest first).
    The disk asked for is both a filter (the host must have room for it) and the
    allocated_storage the asks' dph_total is priced with."""
    disk = disk_of(query)
    body: dict[str, Any] = {
        "verified": {"eq": True}, "rentable": {"eq": True}, "rented": {"eq": False},
        # Direct SSH (RUNTYPE) needs an open port on the host; the disk must fit.
        "direct_port_count": {"gte": 1}, "disk_space": {"gte": disk},
        # The spec's enum says "ondemand"; its example and vast-cli send "on-demand".
        "type": "on-demand", "limit": SEARCH_LIMIT,
        # Cheapest first, the better host first at equal price. (Two keys also
        # satisfy the spec, which puts minItems/maxItems 2 on the outer list.)
        "order": [["dph_total", "asc"], ["score", "desc"]],
        "allocated_storage": disk,
    }
    if query.gpu is not None:
        body["gpu_name"] = {"in": list(VAST_GPU_NAMES.get(query.gpu, (query.gpu,)))}
        if query.gpu in VAST_GPU_RAM_MB:
            body["gpu_ram"] = dict(VAST_GPU_RAM_MB[query.gpu])
    if query.count is not None:
        body["num_gpus"] = {"eq": query.count}
    if query.region is not None:
        body["geolocation"] = {"in": [query.region]}
    return body


def ask_price(raw: dict[str, Any], disk: int) -> tuple[Decimal, Decimal | None, tuple[str, ...]]:
    """(price per hour, storage USD per GB-month, notes) of an ask found by a
    search with ``allocated_storage`` = `disk`.

    The price is Vast's own quote for that disk, ``dph_total`` (what vast-cli's
    search shows as "$/hr"). ``dph_base`` + ``storage_cost`` x GB / 720 is only
    how an estimate splits it into machine and disk; when the two disagree
    beyond rounding, a note says so, and the quote still stands: a sum Vast
    never quoted is not shown as its price. Without ``dph_total`` the sum is
    the price; without ``storage_cost`` the machine is priced alone (``dph_base``)
    and the disk is an unknown part, as for catalog rows."""
    search = raw.get("search")
    if not isinstance(search, dict):
        search = {}
    base_raw = raw["dph_base"] if raw.get("dph_base") is not None \
        else search.get("gpuCostPerHour")
    base = money(base_raw) if base_raw is not None else None
    storage = money(raw["storage_cost"]) if raw.get("storage_cost") is not None else None
    quote = money(raw["dph_total"]) if raw.get("dph_total") is not None else None
    if storage is None or quote is None:
        if base is None:
            raise KeyError("dph_base")
        if storage is None:
            return base, None, ()
        return base + storage * disk / HOURS_PER_MONTH, storage, ()
    if base is None:
        return quote, storage, ()
    parts = base + storage * disk / HOURS_PER_MONTH
    if abs(quote - parts) <= QUOTE_TOLERANCE:
        return quote, storage, ()
    return quote, storage, (
        f"Vast quotes ${quote}/h (dph_total) for this ask with {disk} GB of disk, but its "
        f"parts add up to ${parts.quantize(_SIX_PLACES)}/h (dph_base ${base}/h + storage_cost "
        f"${storage}/GB-month x {disk} GB / {HOURS_PER_MONTH} h); the price shown is "
        "Vast's quote: an estimate bills the disk at storage_cost and the machine as the rest",)


def instance_type_name(count: Any, gpu_name: Any) -> str:
    """"8x-H100_SXM": the GPU count and Vast's GPU name, as the bundled catalog names rows
    (a host's cores and RAM vary too much to be part of a name that lines up)."""
    return f"{count}x-{re.sub(r'[ ]', '_', str(gpu_name).strip())}"


def gpu_of(gpu_name: str, gpu_ram_mb: Any) -> str:
    """Canonical GPU of a Vast gpu_name; the per-GPU RAM splits A100 40/80 GB and V100s."""
    memory = ram_gb(gpu_ram_mb)
    canonical = normalize_gpu(f"{gpu_name} {memory}GB") if memory else None
    # An unknown card is kept under Vast's own name, without our memory suffix.
    return canonical if canonical and gpu_info(canonical) else normalize_gpu(gpu_name)


def map_status(actual: Any, intended: Any = None, message: Any = None,
               cur_state: Any = None) -> InstanceStatus:
    if actual == "frozen" or cur_state == "frozen":
        return InstanceStatus.STOPPED
    if intended == "stopped":
        if actual in ("exited", "stopped"):
            return InstanceStatus.STOPPED  # stopped on purpose, not crashed
        if actual == "running":
            return InstanceStatus.STOPPING
    if actual in _PENDING:
        # dstack's lesson: a container that cannot be created stays "created".
        failed = isinstance(message, str) and "OCI runtime create failed" in message
        return InstanceStatus.FAILED if failed else InstanceStatus.PENDING
    if actual == "running":
        return InstanceStatus.RUNNING
    if actual in _STOPPED:
        return InstanceStatus.STOPPED
    if actual in _FAILED:
        return InstanceStatus.FAILED
    return InstanceStatus.UNKNOWN


def make_label(launch_id: str, deadline: str | None, name: str) -> str:
    """"gpucloud:<launch id> [shutdown:<ISO UTC>] <name>"; editable later via PUT label."""
    parts = [LABEL_PREFIX + launch_id] + ([f"shutdown:{deadline}"] if deadline else [])
    return " ".join(parts + ([name] if name else []))


def parse_label(label: str | None) -> tuple[str | None, str | None, str | None]:
    """(launch id, deadline text, name) of a label; a foreign label is all name."""
    match = _LABEL.fullmatch(label) if label else None
    if match is None:
        return None, None, label or None
    return match.group(1), match.group(2), match.group(3) or None


def _is_create(request: httpx.Request) -> bool:
    return request.method == "PUT" and request.url.path.startswith("/api/v0/asks/")


_INSUFFICIENT_CREDIT = re.compile(r"insufficient credit|insufficient balance", re.IGNORECASE)

# Vast's error replies: {"error": code, "msg" | "message" | "detail": text};
# its codes are the spec's and vast-cli's. Several rows with one outcome say "or".
ERRORS = (
    ErrorRule(status=429, error=RateLimitError),
    ErrorRule(code="rate_limit_exceeded", error=RateLimitError),
    ErrorRule(status=401, error=AuthenticationError),
    ErrorRule(code="auth_error", error=AuthenticationError),
    # The search answers a bad key with 404 "Invalid user key".
    ErrorRule(text=re.compile("invalid user key", re.IGNORECASE), error=AuthenticationError),
    # The spec: 403 on PUT /asks/{id} is this offer refusing this renter (host
    # rules); another host may well accept.
    ErrorRule(status=403, request=_is_create, error=OfferRefusedError,
              hint="this host refuses the rental; another offer may not"),
    ErrorRule(status=403, error=PermissionDeniedError),
    # 404/410 on create: another renter took the host first.
    ErrorRule(code="no_such_ask", error=InsufficientCapacityError),
    ErrorRule(text=re.compile("no_such_ask", re.IGNORECASE), error=InsufficientCapacityError),
    ErrorRule(status=410, error=InsufficientCapacityError),
    # Like quota: this provider can't take it, another one may (failover goes on).
    ErrorRule(code=("insufficient_credit", "insufficient_balance"), error=QuotaExceededError,
              hint=BILLING_HINT),
    ErrorRule(text=_INSUFFICIENT_CREDIT, error=QuotaExceededError, hint=BILLING_HINT),
    ErrorRule(code=("not_found", "no_such_instance", "no_such_volume"), error=NotFoundError),
    ErrorRule(status=404, error=NotFoundError),
    ErrorRule(status=SERVER_ERROR, error=InternalServerError),
    # invalid_token is the list's bad after_token (400), not a bad key.
    ErrorRule(code=("invalid_args", "invalid_price", "invalid_request", "invalid_token",
                    "no_ssh_key", "no_ssh_key_for_vm"), error=BadRequestError),
    ErrorRule(status=400, error=BadRequestError),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    try:
        body = response.json()
    except (ValueError, RecursionError):  # plain text, an HTML 502, a nesting bomb
        line = response.text.strip()[:300] or None
        return ErrorFields(message=line, text=line)
    if not isinstance(body, dict):
        return ErrorFields()
    message = next((body[k] for k in ("msg", "message", "detail") if as_str(body.get(k))), None)
    return ErrorFields(code=as_str(body.get("error")), message=message, text=message)


def env_of(raw: Any) -> dict[str, str]:
    """extra_env: [[name, value], ...] in the API, a dict in some clients."""
    if isinstance(raw, dict):
        return {k: v for k, v in raw.items() if isinstance(v, str)}
    pairs = [p for p in raw or () if isinstance(p, (list, tuple)) and len(p) == 2]
    return {k: v for k, v in pairs if isinstance(k, str) and isinstance(v, str)}


def country_code(geolocation: Any) -> str | None:
    """"Texas, US" -> "US" (also SkyPilot's "Texas, US, NA"); None without a code."""
    if not isinstance(geolocation, str):
        return None
    parts = [p.strip() for p in geolocation.split(",")]
    for part in parts[1:] if len(parts) > 1 else parts:
        if re.fullmatch(r"[A-Z]{2}", part):
            return part
    return None


def checked_id(instance_id: str) -> str:
    if not instance_id.isdigit():
        raise SpecError(f"not a Vast instance id: {instance_id!r}", hint="Vast ids are numbers")
    return instance_id


SSH_USER = "root"  # the spec's and vast-cli's `root@host -p port`
# The runtype vast-cli sends for `create instance --ssh --direct` (vast.py
# get_runtype): direct SSH with Vast's SSH proxy set up as well, so a host whose
# direct port cannot be reached still has the proxy endpoint connection_of falls
# back to. The spec's createInstance enum lists only single words (ssh_direct
# alone would not ask for the proxy); its own instance example shows this very
# string read back ("image_runtype": "ssh ssh_direc ssh_proxy"). "ssh_direc" is
# vast-cli's spelling, sent as is.
RUNTYPE = "ssh_direc ssh_proxy"


def connection_of(raw: dict[str, Any]) -> Connection | None:
    """Where to ssh, the way vast-cli's `ssh-url` reads an instance: the host
    port mapped to 22/tcp on `public_ipaddr` (direct: create asks for it, see
    RUNTYPE), else the proxy `ssh_host`:`ssh_port` (one more for jupyter
    runtypes, as vast-cli does). `ports` is {"22/tcp": [{"HostPort": "20000"}]}
    in the spec's v1 list; its show example prints a bare list, which maps
    nothing. None while Vast has assigned neither (the spec: wait for
    ssh_port)."""
    ports = raw.get("ports") if isinstance(raw.get("ports"), dict) else {}
    mapped = ports.get("22/tcp")
    if isinstance(mapped, list) and mapped and isinstance(mapped[0], dict):
        direct = ssh_endpoint(raw.get("public_ipaddr"), mapped[0].get("HostPort"), SSH_USER)
        if direct is not None:
            return direct
    port = raw.get("ssh_port")
    runtype = raw.get("image_runtype")
    if is_int(port) and isinstance(runtype, str) and "jupyter" in runtype:
        port += 1
    return ssh_endpoint(raw.get("ssh_host"), port, SSH_USER)


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def money(value: Any) -> Decimal:
    return _fields.money(value, strings=True)


def ram_gb(mb: Any) -> int | None:
    return round(mb / 1024) if is_num(mb) and mb > 0 else None
