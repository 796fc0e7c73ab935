"""Fluidstack's wire format: states, tags, error rows and field readers.

The pure half of the Fluidstack adapter (adapter.py holds the flows). The
contract is the Atlas Infrastructure API v1alpha1 OpenAPI document
(tests/fixtures/fluidstack/openapi.yaml; SOURCE.txt says from where).
"""

from __future__ import annotations

import base64
import re
from typing import Any

import httpx

from gpucloud.errors import InsufficientCapacityError, RateLimitError
from gpucloud.models import Connection, InstanceStatus
from gpucloud.providers._connection import ssh_endpoint
from gpucloud.providers.error_table import CLIENT_ERROR, ErrorFields, ErrorRule, json_body

# InstanceState, the spec's enum, every value.
STATUS = {
    "creating": InstanceStatus.PENDING,
    "starting": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING,
    "stopping": InstanceStatus.STOPPING,
    "stopped": InstanceStatus.STOPPED,
    "deleting": InstanceStatus.TERMINATING,
    # The order could not be filled: nothing runs, and nothing will.
    "out-of-stock": InstanceStatus.FAILED,
    "error": InstanceStatus.FAILED,
}

# Tags (InstancesPostRequest.tags): keys 1-63 characters, alphanumeric at both
# ends, "-", "_" and "." inside; values any string.
LAUNCH_ID = "gpucloud-launch-id"
SHUTDOWN_AT = "gpucloud-shutdown-at"

# The spec's Error is {"message"} alone and names no codes; its InstanceState
# has "out-of-stock", so a refusal worded that way is a capacity failure. The
# patterns are not from recorded replies (none are published).
_CAPACITY = re.compile(r"out[- ]of[- ]stock|no capacity|insufficient capacity|"
                       r"not enough capacity|capacity (is )?(not available|unavailable)", re.I)

ERRORS = (
    ErrorRule(status=429, error=RateLimitError),
    ErrorRule(status=CLIENT_ERROR, text=_CAPACITY, error=InsufficientCapacityError,
              hint="try another instance type or region"),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    """The spec's Error: {"message"}."""
    body = json_body(response)
    message = text(body.get("message")) if isinstance(body, dict) else None
    return ErrorFields(message=message, text=message)


def user_data(public_key: str) -> str:
    """Base64 cloud-config that authorizes the key (InstancesPostRequest.userData
    is "Base64-encoded cloud-init user data"; the request has no SSH key field)."""
    key = " ".join(public_key.split())
    config = f"#cloud-config\nssh_authorized_keys:\n  - {key}\n"
    return base64.b64encode(config.encode()).decode("ascii")


# ssh ubuntu@ip: the login of Ubuntu cloud images ("ubuntu22.04" is the
# spec's example image), on port 22. Instance.ip is the *private* address
# ("Private IP address of the instance"): reachable from inside the project's
# network only. Both unverified against a live machine.
SSH_USER = "ubuntu"
SSH_PORT = 22


def connection_of(raw: dict[str, Any]) -> Connection | None:
    return ssh_endpoint(raw.get("ip"), SSH_PORT, SSH_USER)


_MEMORY = re.compile(r"(\d+)\s*(Gi|G|GB)$")


def memory_gb(value: Any) -> int | None:
    """InstanceType.memory, "960Gi" in the spec's example."""
    match = _MEMORY.fullmatch(value.strip()) if isinstance(value, str) else None
    return int(match.group(1)) if match else None


def gpu_model(raw: str) -> str:
    """InstanceType.gpuModel, "GH100_H100_SXM5_80GB" in the spec's example: the
    chip code name first, then the product; the product is what names the GPU."""
    parts = raw.strip().split("_")
    if len(parts) > 2 and re.fullmatch(r"[A-Z]{1,2}\d{3}", parts[0]):
        parts = parts[1:]
    return " ".join(parts)


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
