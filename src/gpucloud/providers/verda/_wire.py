"""Verda's wire format: the token endpoint, statuses, error codes and field readers.

Everything here is taken from the official SDKs (verda-cloud/sdk-python
164e09ac, verdacloud-sdk-go ca1aa5cd; see tests/fixtures/verda/SOURCE.txt);
no OpenAPI document exists for this provider.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx
from pydantic import SecretStr

from gpucloud.errors import (
    APIError,
    APIResponseValidationError,
    AuthenticationError,
    BadRequestError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
)
from gpucloud.models import Connection, InstanceStatus
from gpucloud.transport.tokens import TOKEN_REQUEST_EXTENSION, Token, TokenSource
from gpucloud.providers._connection import ssh_endpoint
from gpucloud.providers.error_table import (
    CLIENT_ERROR, SERVER_ERROR, ErrorFields, ErrorRule, json_body,
)
from gpucloud.providers.base import KIND_EXTENSION, format_utc, parse_utc  # re-exported as well

TOKEN_PATH = "/oauth2/token"

# verda/constants.py InstanceStatus, plus the Go SDK's longer list.
STATUS: dict[str, InstanceStatus] = {
    "new": InstanceStatus.PENDING,
    "ordered": InstanceStatus.PENDING,
    "validating": InstanceStatus.PENDING,
    "pending": InstanceStatus.PENDING,
    "provisioning": InstanceStatus.PENDING,
    "restoring": InstanceStatus.PENDING,  # coming back from hibernation
    "running": InstanceStatus.RUNNING,
    "starting_hibernation": InstanceStatus.STOPPING,
    "hibernating": InstanceStatus.STOPPED,
    # Shut down but not deleted: the machine (and, unverified, its bill) is
    # still there, so never "terminated".
    "offline": InstanceStatus.STOPPED,
    "deleting": InstanceStatus.TERMINATING,
    "discontinued": InstanceStatus.TERMINATED,
    "notfound": InstanceStatus.TERMINATED,
    "error": InstanceStatus.FAILED,
    "no_capacity": InstanceStatus.FAILED,  # Go SDK: the order could not be placed
    "unknown": InstanceStatus.UNKNOWN,
}

# Neither SDK documents a "no capacity" code: Verda answers invalid_request
# with a message. Availability is checked (offers) before a launch; a 4xx whose
# message says the instance type (or its GPUs) cannot be had is a capacity
# failure. "Not available" alone is not enough: "Image not available for this
# instance type" or "Operating system is not valid ..." are a wrong request,
# the same on every candidate (exit 2), never a reason to try the next offer.
_CAPACITY = re.compile(
    r"capacity|no longer available|sold out|out of stock"
    r"|not enough (?:resources|instances|gpus)|no (?:available )?(?:instances|resources|gpus) "
    r"(?:left|available)"
    r"|instance(?: type)?\s+\S+\s+is\s+(?:currently\s+)?(?:not available|unavailable)"
    r"|^(?:instance type )?(?:not available|unavailable)(?: in| at|$)",
    re.IGNORECASE)
# What a request names that no capacity can fix.
_NOT_CAPACITY = re.compile(r"\b(?:image|operating system|os|ssh key|startup script|volume)\b",
                           re.IGNORECASE)
# Instance ids are UUIDs (every instance in the SDK fixtures, and Verda's own
# "Input should be a valid UUID" error for a malformed id).
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
# dstack's list: how Verda says an id does not (or no longer) exist(s).
_GONE = re.compile(r"invalid instance id|can't discontinue a discontinued instance",
                   re.IGNORECASE)


# verda/constants.py ErrorCodes, after the rows that read the message.
# insufficient_funds is a spending limit of this account at this provider:
# QuotaExceededError lets a cross-provider create move on to another cloud
# (PermissionDeniedError would stop it), and the CLI exits 6 with a hint to top
# up the balance. A code not here falls back to the status (401/403/404/409 by
# status, 5xx server error, else APIStatusError).
ERRORS = (
    ErrorRule(status=429, error=RateLimitError),
    ErrorRule(status=CLIENT_ERROR, code=(None, "invalid_request", "not_found"), text=_GONE,
              error=NotFoundError),
    ErrorRule(status=CLIENT_ERROR, code=(None, "invalid_request"), text=_CAPACITY,
              unless=_NOT_CAPACITY, error=InsufficientCapacityError),
    ErrorRule(code="unauthorized_request", error=AuthenticationError),
    ErrorRule(code="forbidden_action", error=PermissionDeniedError),
    ErrorRule(code="not_found", error=NotFoundError),
    ErrorRule(code="insufficient_funds", error=QuotaExceededError,
              hint="top up the Verda account balance (console.verda.com), "
                   "or choose another provider"),
    # A request Verda calls invalid, answered with a 5xx, is its own failure.
    ErrorRule(code="invalid_request", status=SERVER_ERROR, error=InternalServerError),
    ErrorRule(code="invalid_request", error=BadRequestError),
    ErrorRule(code=("server_error", "service_unavailable"), error=InternalServerError),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    """{"code", "message"}; a short plain-text reply is its message."""
    body = json_body(response)
    code = message = None
    if isinstance(body, dict):
        code, message = text(body.get("code")), text(body.get("message"))
    elif body is None and response.text.strip() and len(response.text) < 300 \
            and "<" not in response.text:
        message = response.text.strip()  # a plain-text error line
    return ErrorFields(code=code, message=message, text=message)


class VerdaTokenSource(TokenSource):
    """OAuth2 at ``POST {base}/oauth2/token`` with JSON bodies, exactly as sdk-python sends them."""

    def __init__(self, base_url: str, client_id: str, client_secret: SecretStr,
                 map_error: Callable[[httpx.Response], APIError],
                 headers: dict[str, str] | None = None) -> None:
        self.url = base_url.rstrip("/") + TOKEN_PATH
        self.client_id = client_id
        self._client_secret = client_secret
        self._map_error = map_error
        self._headers = {"Accept": "application/json", **(headers or {})}

    def __repr__(self) -> str:
        return f"VerdaTokenSource(url={self.url!r}, client_id={self.client_id!r}, secret=[secure])"

    def _post(self, body: dict[str, str]) -> httpx.Request:
        return httpx.Request("POST", self.url, json=body, headers=self._headers,
                             extensions={KIND_EXTENSION: "unsafe", TOKEN_REQUEST_EXTENSION: True})

    def initial_request(self) -> httpx.Request:
        return self._post({"grant_type": "client_credentials", "client_id": self.client_id,
                           "client_secret": self._client_secret.get_secret_value()})

    def refresh_request(self, token: Token) -> httpx.Request | None:
        if token.refresh_token is None:
            return None
        # sdk-python sends just these two fields (the Go SDK adds the client pair).
        return self._post({"grant_type": "refresh_token",
                           "refresh_token": token.refresh_token.get_secret_value()})

    def parse(self, response: httpx.Response, now: float) -> Token:
        if response.is_error:
            raise self._map_error(response)
        try:
            body = response.json()
        except (ValueError, RecursionError):
            body = None
        access = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(access, str) or not access:
            # Never echo the body: it may hold a token.
            raise APIResponseValidationError(
                "verda: the token endpoint answered without an access_token",
                provider="verda", request=response.request)
        refresh = body.get("refresh_token")
        lifetime = body.get("expires_in")
        if isinstance(lifetime, str) and lifetime.strip().isdigit():
            lifetime = int(lifetime)
        valid = isinstance(lifetime, (int, float)) and not isinstance(lifetime, bool)
        return Token(
            access_token=SecretStr(access),
            refresh_token=SecretStr(refresh) if isinstance(refresh, str) and refresh else None,
            expires_at=now + float(lifetime) if valid else None,
        )


# -- field readers ----------------------------------------------------------------


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# Verda's OS images log in as root on port 22: dstack's DataCrunch backend
# (src/dstack/_internal/core/backends/datacrunch/compute.py, commit 0479099,
# `username="root", ssh_port=22`). Not in an official Verda document seen here.
SSH_USER = "root"
SSH_PORT = 22


def connection_of(raw: dict[str, Any]) -> Connection | None:
    """ssh root@ip; None while `ip` is null (until provisioned, per the SDK)."""
    return ssh_endpoint(raw.get("ip"), SSH_PORT, SSH_USER)


def integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def size_gb(part: Any) -> int | None:
    """``size_in_gigabytes`` of a {description, size_in_gigabytes} block."""
    return integer(part.get("size_in_gigabytes")) if isinstance(part, dict) else None


def money(value: Any) -> Decimal | None:
    """A price: Verda sends JSON strings ("3.95"); a number is read by its literal text."""
    if isinstance(value, bool) or value is None or value == "":
        return None
    if not isinstance(value, (str, int, float)):
        raise TypeError(f"a price is not a number: {value!r}")
    try:
        price = Decimal(str(value).strip())
    except InvalidOperation as exc:
        raise ValueError(f"a price is not a number: {value!r}") from exc
    if not price.is_finite() or price < 0:
        raise ValueError(f"a price is not a number: {value!r}")
    return price


# The launch id and deadline travel in the description (Verda has no labels
# in the create body sdk-python sends); list() reads them back from there.
_LAUNCH_ID = re.compile(r"\blaunch_id=([A-Za-z0-9._-]+)")
_SHUTDOWN_AT = re.compile(r"\bshutdown_at=([0-9T:+.Z-]+)")
_BATCH = re.compile(r"\bbatch=([A-Za-z0-9._-]+)")


def describe(launch_id: str, shutdown_at: datetime | None, batch: str | None = None) -> str:
    parts = [f"launch_id={launch_id}"]
    if shutdown_at is not None:
        parts.append(f"shutdown_at={format_utc(shutdown_at)}")
    if batch:  # only characters the readers above stop at: no key can forge a deadline
        parts.append("batch=" + re.sub(r"[^A-Za-z0-9._-]", "_", batch))
    return "gpucloud " + "; ".join(parts)


def read_description(value: Any) -> tuple[str | None, datetime | None]:
    if not isinstance(value, str):
        return None, None
    launch = _LAUNCH_ID.search(value)
    deadline = _SHUTDOWN_AT.search(value)
    return (launch.group(1) if launch else None,
            parse_utc(deadline.group(1)) if deadline else None)


def read_batch(value: Any) -> str | None:
    """The batch key ``describe`` wrote, as written."""
    found = _BATCH.search(value) if isinstance(value, str) else None
    return found.group(1) if found else None


_HOST_INVALID = re.compile(r"[^a-z0-9-]+")
HOSTNAME_MAX = 60  # dstack's MAX_INSTANCE_NAME_LEN for Verda


def hostname(name: str, launch_id: str) -> str:
    """A DNS-label-like hostname (a-z, 0-9, '-'; letter or digit at both ends)."""
    host = _HOST_INVALID.sub("-", name.lower())
    host = re.sub(r"-{2,}", "-", host).strip("-")[:HOSTNAME_MAX].rstrip("-")
    if not host:
        host = _HOST_INVALID.sub("-", f"gpucloud-{launch_id}".lower()).strip("-")
    return host


def instance_id(response: httpx.Response) -> str | None:
    """The new instance's id in a create reply, only if it looks like one (a UUID):
    anything else is an unreadable reply to a launch, hence ambiguous."""
    raw = plain_id(response)
    return raw if raw is not None and UUID.fullmatch(raw) else None


def plain_id(response: httpx.Response) -> str | None:
    """The id in a plain-text reply (POST /instances, POST /sshkeys); a JSON string too."""
    raw = response.text.strip()
    if raw.startswith('"'):
        try:
            import json

            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not isinstance(raw, str):
            return None
        raw = raw.strip()
    elif raw.startswith("{"):
        try:
            import json

            data = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        raw = data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else ""
    if not raw or any(c.isspace() for c in raw) or len(raw) > 128:
        return None
    return raw
