"""Shadeform's wire format: the key header, statuses, tags, money and the error table.

The pure half of the Shadeform adapter (adapter.py holds the flows); the
contract is tests/fixtures/shadeform/openapi.yaml, Shadeform's OpenAPI 3
document as vendored by brevdev/cloud for its Shadeform provider.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import ROUND_DOWN, Decimal
from typing import Any

import httpx

from gpucloud.errors import (
    AuthenticationError,
    ConflictError,
    InsufficientCapacityError,
    RateLimitError,
)
from gpucloud.models import Connection, InstanceStatus
from gpucloud.providers._connection import ssh_endpoint
from gpucloud.providers._fields import is_int
from gpucloud.providers.base import format_utc, parse_utc
from gpucloud.providers.error_table import CLIENT_ERROR, ErrorFields, ErrorRule, json_body

# The contract's Status enum. "deleting": the account is no longer billed
# (InstancesDelete's description); "error": the launch failed upstream.
STATUS = {
    "creating": InstanceStatus.PENDING,
    "pending_provider": InstanceStatus.PENDING,
    "pending": InstanceStatus.PENDING,
    "active": InstanceStatus.RUNNING,
    "error": InstanceStatus.FAILED,
    "deleting": InstanceStatus.TERMINATING,
    "deleted": InstanceStatus.TERMINATED,
}

# Instance and SSH key ids are UUIDs (the contract's Id schema: format uuid).
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

# Tags are plain strings ("Add custom, searchable tags"): gpucloud writes
# "key=value" and reads back only its own keys.
LAUNCH_ID_TAG = "gpucloud-launch-id"
SHUTDOWN_AT_TAG = "gpucloud-shutdown-at"
BATCH_TAG = "gpucloud-batch"
LAUNCH_ID_ENV = "GPUCLOUD_LAUNCH_ID"

# The contract documents no error body and no error codes (every operation
# lists its 200 only), so the rows go by status and by words. Capacity: the
# words an aggregator's upstream uses when a type has sold out in a region;
# only on a create, where "try the next offer" is the right answer.
CAPACITY = re.compile(r"out of (stock|capacity)|no (available )?capacity|insufficient capacity|"
                      r"not (currently )?available|unavailable|sold out", re.IGNORECASE)
ERRORS = (
    ErrorRule(status=401, error=AuthenticationError,
              hint="check GPUCLOUD_SHADEFORM_API_KEY (Shadeform: Settings -> API)"),
    ErrorRule(status=429, error=RateLimitError),
    # POST /sshkeys/add refuses a name already taken; brevdev/cloud's Shadeform
    # provider (v1/providers/shadeform/instance.go) matches these words.
    ErrorRule(status=CLIENT_ERROR, text=re.compile("name must be unique", re.IGNORECASE),
              error=ConflictError),
    ErrorRule(status=CLIENT_ERROR, text=CAPACITY, error=InsufficientCapacityError,
              request=lambda r: r.url.path.endswith("/instances/create"),
              hint="try another region or cloud (`gpucloud offers --provider shadeform`)"),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    """The error body is undocumented: read {"error": str | {code, message}},
    {"message"} or {"detail"} when the reply is JSON, else its text."""
    body = json_body(response)
    code = message = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            code, message = text(error.get("code")), text(error.get("message"))
        else:
            message = text(error)
        message = message or text(body.get("message")) or text(body.get("detail"))
        code = code or text(body.get("code")) or text(body.get("error_code"))
    elif body is None:
        message = response.text.strip()[:300] or None
    return ErrorFields(code=code, message=message, text=message or "")


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def per_gb_month(price_per_gb_per_hour: Any, hours_per_month: Decimal) -> Decimal | None:
    """VolumeTypes' price_per_gb_per_hour (a decimal string of USD) as USD per
    GB-month; None when it is not a price."""
    if not isinstance(price_per_gb_per_hour, str):
        return None
    try:
        rate = Decimal(price_per_gb_per_hour)
    except ArithmeticError:
        return None
    return rate * hours_per_month if rate.is_finite() and rate >= 0 else None


def cents(value: Any) -> Decimal:
    """hourly_price: an integer of US cents per hour, for the whole machine."""
    if not is_int(value):
        raise TypeError(f"hourly_price is not an integer of cents: {value!r}")
    return Decimal(value) / 100


def spend_threshold(amount: Decimal) -> str:
    """A dollar amount as the contract's SpendThreshold ("3.14"), cut down to the
    cent: Shadeform deletes the machine at or before the cap, never after."""
    return str(amount.quantize(Decimal("0.01"), rounding=ROUND_DOWN))


def tag(key: str, value: str) -> str:
    return f"{key}={value}"


def read_tags(raw: Any) -> dict[str, str]:
    """gpucloud's key=value tags of an instance; other tags are the user's."""
    out: dict[str, str] = {}
    for item in raw if isinstance(raw, list) else ():
        if isinstance(item, str) and "=" in item:
            key, _, value = item.partition("=")
            out.setdefault(key, value)
    return out


def with_deadline(raw_tags: Any, shutdown_at: datetime) -> list[str]:
    """The instance's tags with gpucloud's deadline tag replaced (update sends the
    whole list), the user's own tags kept as they were."""
    kept = [t for t in (raw_tags if isinstance(raw_tags, list) else ())
            if isinstance(t, str) and not t.startswith(SHUTDOWN_AT_TAG + "=")]
    return [*kept, tag(SHUTDOWN_AT_TAG, format_utc(shutdown_at))]


def auto_delete_date(raw: Any) -> datetime | None:
    """auto_delete.date_threshold of an InstanceInfoResponse, the deadline
    Shadeform itself acts on; None without one."""
    return parse_utc(raw.get("date_threshold")) if isinstance(raw, dict) else None


def connection_of(raw: dict[str, Any]) -> Connection | None:
    """ssh ssh_user@ip -p ssh_port, all three from the instance itself (the port
    "may be a different port" on some clouds); None until it has an address."""
    user = text(raw.get("ssh_user")) or ""
    return ssh_endpoint(raw.get("ip"), raw.get("ssh_port"), user)
