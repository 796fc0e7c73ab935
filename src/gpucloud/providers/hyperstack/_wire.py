"""Hyperstack's wire format: statuses, labels, error rows and field readers.

The pure half of the Hyperstack adapter (adapter.py holds the flows). The
contract is Hyperstack's Infrahub OpenAPI document (tests/fixtures/hyperstack/,
from the official SDK NexGenCloud/hyperstack-sdk-go, api/openapi.yaml).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import httpx

from gpucloud.errors import InsufficientCapacityError, QuotaExceededError, RateLimitError
from gpucloud.models import Connection, InstanceStatus
from gpucloud.providers._connection import ssh_endpoint
from gpucloud.providers.base import parse_utc
from gpucloud.providers.error_table import CLIENT_ERROR, ErrorFields, ErrorRule, json_body

# The statuses Hyperstack documents for a virtual machine ("States and Statuses
# of Virtual Machines", infrahub-doc.nexgencloud.com/docs/virtual-machines/
# vm-states-and-statuses); the OpenAPI document types `status` as a bare string.
STATUS = {
    "CREATING": InstanceStatus.PENDING,
    "BUILD": InstanceStatus.PENDING,
    "STARTING": InstanceStatus.PENDING,
    "REBOOTING": InstanceStatus.PENDING,
    "RESTORING": InstanceStatus.PENDING,
    "ACTIVE": InstanceStatus.RUNNING,
    "STOPPING": InstanceStatus.STOPPING,
    "HIBERNATING": InstanceStatus.STOPPING,
    # Shut off or hibernated, the machine still exists and is not "terminated".
    "SHUTOFF": InstanceStatus.STOPPED,
    "HIBERNATED": InstanceStatus.STOPPED,
    "ERROR": InstanceStatus.FAILED,
}

# Labels are plain strings (Create_Instances_Payload.labels, no constraint
# stated); ours are "<key>=<value>".
LAUNCH_ID = "gpucloud-launch-id"
SHUTDOWN_AT = "gpucloud-shutdown-at"
NAME_MAX = 50  # Create_Instances_Payload.name, Import_Keypair_Payload.name, Create_Environment.name

# ErrorResponseModel is {"status": false, "message", "error_reason"}; the
# document lists no error_reason values, so the rows read the words of the
# message. These patterns are not from recorded replies (none are published):
# a capacity or funds refusal not worded so keeps the class of its status.
_FUNDS = re.compile(r"insufficient (credit|balance|funds)|top.?up|out of credit", re.I)
_CAPACITY = re.compile(r"out of stock|no stock|not enough (stock|capacity|resources)|"
                       r"insufficient (capacity|resources|stock)|capacity", re.I)

ERRORS = (
    ErrorRule(status=429, error=RateLimitError),
    ErrorRule(status=CLIENT_ERROR, text=_FUNDS, error=QuotaExceededError,
              hint="add credit to the Hyperstack account, or choose another provider"),
    ErrorRule(status=CLIENT_ERROR, text=_CAPACITY, error=InsufficientCapacityError,
              hint="try another region or flavor"),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    """ErrorResponseModel: {"status": false, "message", "error_reason"}."""
    body = json_body(response)
    if not isinstance(body, dict):
        return ErrorFields()
    message, reason = text(body.get("message")), text(body.get("error_reason"))
    words = " ".join(w for w in (message, reason) if w) or None
    return ErrorFields(code=reason, message=message or reason, text=words)


def label(key: str, value: str) -> str:
    return f"{key}={value}"


def labels_of(raw: Any) -> dict[str, list[str]]:
    """Our labels, key -> every value (an edit may have added a second deadline)."""
    out: dict[str, list[str]] = {}
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, str) and "=" in item:
            key, _, value = item.partition("=")
            out.setdefault(key, []).append(value)
    return out


def deadline_of(labels: dict[str, list[str]]) -> datetime | None:
    """The latest deadline label: a deadline only ever moves later."""
    moments = [m for m in (parse_utc(v) for v in labels.get(SHUTDOWN_AT, [])) if m is not None]
    return max(moments) if moments else None


# "H100-80G-PCIe-NVLink": an NVLink bridge between PCIe cards, not another GPU.
_NVLINK = re.compile(r"[-_ ]?nvlink$", re.I)


def gpu_name(raw: str) -> str:
    return _NVLINK.sub("", raw.strip())


# SSH on port 22 of the floating (public) IP, as `ubuntu`: the default user of
# Ubuntu cloud images, which Hyperstack's images are built on (unverified: the
# OpenAPI document names no login user). Port randomization is switched off at
# create (adapter.py), so port 22 is the port.
SSH_USER = "ubuntu"
SSH_PORT = 22


def connection_of(raw: dict[str, Any]) -> Connection | None:
    return ssh_endpoint(raw.get("floating_ip") or None, SSH_PORT, SSH_USER)


def created_at(value: Any) -> datetime | None:
    """Instance_Fields.created_at, "2000-01-23 04:56:07+00:00" in the examples."""
    return parse_utc(value.replace(" ", "T", 1)) if isinstance(value, str) else None


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
