"""Lambda Cloud's wire format: statuses, error codes, image specs and field readers.

The pure half of the Lambda adapter (adapter.py holds the flows); the
contract is tests/fixtures/lambda/openapi.json (Lambda's OpenAPI 1.8.3).
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from gpucloud.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
)
from gpucloud.models import Connection, InstanceStatus
from gpucloud.providers._connection import ssh_endpoint
from gpucloud.providers.error_table import ErrorFields, ErrorRule, json_body
from gpucloud.providers._fields import integer, is_int  # noqa: F401  (used by the adapter)

STATUS = {
    "booting": InstanceStatus.PENDING,
    "active": InstanceStatus.RUNNING,
    "unhealthy": InstanceStatus.UNKNOWN,
    "terminating": InstanceStatus.TERMINATING,
    "terminated": InstanceStatus.TERMINATED,
    # A preempted machine is gone and no longer billed; nothing to wait for.
    "preempted": InstanceStatus.TERMINATED,
}

# Lambda's error codes (the contract's ErrorCode enum); an unknown code falls
# back to the status: 5xx -> InternalServerError, 404 -> NotFoundError, other
# 4xx -> APIStatusError.
ERRORS = (
    ErrorRule(status=429, error=RateLimitError),
    ErrorRule(code="global/invalid-api-key", error=AuthenticationError),
    ErrorRule(code="global/account-inactive", error=PermissionDeniedError),
    ErrorRule(code="global/invalid-address", error=PermissionDeniedError),
    # Also sent as a 400 on launch when the key name or image does not exist.
    ErrorRule(code="global/object-does-not-exist", error=NotFoundError),
    ErrorRule(code="instance-operations/launch/insufficient-capacity",
              error=InsufficientCapacityError),
    ErrorRule(code="global/quota-exceeded", error=QuotaExceededError),
    ErrorRule(code="global/invalid-parameters", error=BadRequestError),
    ErrorRule(code="global/duplicate", error=ConflictError),
    # DELETE /api/v1/filesystems/{id} of a filesystem a machine still mounts.
    ErrorRule(code="filesystems/filesystem-in-use", error=ConflictError,
              hint="terminate the machines that mount it (`gpucloud list`), then delete it"),
    # A launch naming a filesystem of another region.
    ErrorRule(code="instance-operations/launch/file-system-in-wrong-region",
              error=BadRequestError,
              hint="a filesystem mounts only on machines of its own region"),
    ErrorRule(code="global/internal-error", error=InternalServerError),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    """The contract's ErrorResponse: {"error": {code, message, suggestion}}."""
    body = json_body(response)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return ErrorFields()
    return ErrorFields(code=text(error.get("code")), message=text(error.get("message")),
                       hint=text(error.get("suggestion")))


IMAGE_ID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)

# "H100 (80 GB SXM5)" -> 80
GPU_MEMORY = re.compile(r"\(\s*(\d+)\s*GB\b", re.IGNORECASE)


def image_spec(image: str) -> dict[str, str]:
    """InstanceLaunchRequest.image is oneOf {id} / {family}. Image ids are UUIDs
    (GET /api/v1/images); anything else is a family ("lambda-stack-22-04").
    "id:..." or "family:..." says which, for an id that does not look like one."""
    kind, sep, rest = image.partition(":")
    if sep and kind in ("id", "family") and rest.strip():
        return {kind: rest.strip()}
    if IMAGE_ID.fullmatch(image.strip()):
        return {"id": image.strip()}
    return {"family": image.strip()}


# FilesystemCreateRequest.name: 1-60 characters, a letter first, then letters,
# digits and '-'.
FILESYSTEM_NAME = re.compile(r"[a-zA-Z]+[0-9a-zA-Z-]*")
FILESYSTEM_NAME_MAX = 60
# Lambda mounts a filesystem named in a launch's file_system_names at its
# default mount point, /lambda/nfs/<name> (the Filesystem schema's mount_point).
NFS_ROOT = "/lambda/nfs"
GIB = 1024 ** 3  # Lambda bills filesystems per GiB used (docs.lambda.ai/public-cloud/billing)


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# Lambda's images log in as `ubuntu` on port 22 (dstack's Lambda backend,
# src/dstack/_internal/core/backends/lambdalabs); the spec's Instance has `ip` only, absent
# until the machine has booted.
SSH_USER = "ubuntu"
SSH_PORT = 22


def connection_of(raw: dict[str, Any]) -> Connection | None:
    """ssh ubuntu@ip; None while the instance has no public address."""
    return ssh_endpoint(raw.get("ip"), SSH_PORT, SSH_USER)
