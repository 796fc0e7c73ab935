"""The simulated cloud's wire format, for both sides: request validation, times,
error bodies and the adapter's error table."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx

from gpucloud.errors import BadRequestError, ConflictError, InsufficientCapacityError, NotFoundError
from gpucloud.providers.error_table import ErrorFields, ErrorRule
from gpucloud.providers.error_table import json_body as reply_body

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
US = 1_000_000  # times are integer microseconds since the epoch
CREATE_FIELDS = {"instance_type", "region", "name", "labels", "image", "disk_gb",
                 "ssh_public_key", "shutdown_at"}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}


# The server's {"error": {"code", "message"}} codes; others go by the status.
ERRORS = (
    ErrorRule(code="capacity_exhausted", error=InsufficientCapacityError,
              hint="the sandbox has GPUCLOUD_SANDBOX_CAPACITY machines per type and region: "
                   "delete some, try another region, or check GPUCLOUD_SANDBOX_EXHAUST"),
    ErrorRule(code="not_found", error=NotFoundError),
    ErrorRule(code="invalid_request", error=BadRequestError),
    ErrorRule(code="conflict", error=ConflictError),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    body = reply_body(response)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or "code" not in error:
        return ErrorFields()
    return ErrorFields(code=str(error["code"]), message=str(error.get("message") or "") or None)


def json_body(request: httpx.Request) -> Any:
    try:
        return json.loads(request.content or b"null")
    except ValueError:
        raise ApiError(422, "invalid_request", "the body is not JSON") from None


def validate_create(body: Any) -> dict[str, Any]:
    def bad(message: str) -> ApiError:
        return ApiError(422, "invalid_request", message)

    if not isinstance(body, dict):
        raise bad("the body must be a JSON object")
    extra = sorted(set(body) - CREATE_FIELDS)
    if extra:
        raise bad(f"unknown field(s): {', '.join(extra)}")
    for key in ("instance_type", "region", "name"):
        if not isinstance(body.get(key), str) or not body[key].strip():
            raise bad(f"{key} is required and must be a non-empty string")
    if len(body["name"]) > 128:
        raise bad("name must be at most 128 characters")
    labels = body.get("labels") or {}
    if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise bad("labels must be an object of strings")
    for key in ("image", "ssh_public_key"):
        if body.get(key) is not None and not isinstance(body[key], str):
            raise bad(f"{key} must be a string")
    disk = body.get("disk_gb")
    if disk is not None and (isinstance(disk, bool) or not isinstance(disk, int)
                             or not 10 <= disk <= 65536):
        raise bad("disk_gb must be an integer between 10 and 65536")
    out = dict(body, labels=labels)
    if body.get("shutdown_at") is not None:
        out["shutdown_us"] = parse_time(body["shutdown_at"])
    return out


def parse_time(value: Any) -> int:
    try:
        if not isinstance(value, str):
            raise ValueError
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(422, "invalid_request", f"not an ISO-8601 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise ApiError(422, "invalid_request",
                       f"time must be ISO-8601 with a UTC offset: {value!r}")
    return (parsed - EPOCH) // timedelta(microseconds=1)


# JSON as httpx's json= writes it (compact, UTF-8, no NaN), by one encoder made
# once: json.dumps with options builds an encoder per call.
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_reply(status: int, body: Any, headers: list[tuple[str, str]]) -> httpx.Response:
    """An answer with a JSON body, with the headers httpx's json= gives it."""
    return httpx.Response(status, content=_JSON.encode(body).encode(),
                          headers=[*headers, ("Content-Type", "application/json")])


def iso(us: int | None) -> str | None:
    if us is None:
        return None
    return (EPOCH + timedelta(microseconds=us)).isoformat().replace("+00:00", "Z")


def fake_ip(instance_id: str) -> str:
    digest = hashlib.sha256(instance_id.encode()).digest()
    return f"100.64.{digest[0]}.{1 + digest[1] % 254}"


def fake_private_ip(instance_id: str) -> str:
    """A machine's address on the simulated private network (10.0.0.0/8):
    where a multi-node job's nodes reach each other."""
    digest = hashlib.sha256(instance_id.encode()).digest()
    return f"10.{digest[2]}.{digest[3]}.{1 + digest[4] % 254}"


# The most machines one page of GET /v1/instances?limit= holds.
MAX_PAGE = 1000


def wanted_labels(filters: list[str]) -> list[tuple[str, str]]:
    """?label=key=value filters of a listing, as (key, value) pairs."""
    wanted = []
    for f in filters:
        key, sep, value = f.partition("=")
        if not sep:
            raise ApiError(400, "invalid_request", f"label filter must be key=value: {f!r}")
        wanted.append((key, value))
    return wanted
