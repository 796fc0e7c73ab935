"""The one error hierarchy of gpucloud.

    GpuCloudError
      ConfigurationError, CredentialsError, SpecError (UnknownGPUError),
      BudgetExceededError, ConfirmationRequired, NoOffersError
      APIError(provider, request)
        APIConnectionError -> APITimeoutError
        APIStatusError(status_code, provider_code, request_id)
          BadRequestError, AuthenticationError, PermissionDeniedError, NotFoundError,
          ConflictError, RateLimitError, InternalServerError
        APIResponseValidationError
        InsufficientCapacityError (OfferRefusedError), QuotaExceededError
      WaitError -> InstanceFailedError, WaitTimeoutError

Every error carries a one-line ``message`` and an optional ``hint``. The CLI
maps classes to exit codes in one table (``EXIT_CODES`` below) and callers
catch "no capacity" once, not once per cloud.

This module imports nothing heavy: the CLI loads it on every error path.
"""

from __future__ import annotations

import re
from typing import Any

# Header, query and body field names whose values are credentials.
_SECRET_HEADER = re.compile(r"auth|token|secret|key|cookie|password|signature|session", re.I)
_SECRET_FIELD = re.compile(r"secret|token|password|api[-_]?key|authorization|assertion|"
                           r"credential", re.I)
REDACTED = "[redacted]"


class GpuCloudError(Exception):
    """Base class of every error gpucloud raises on purpose."""

    code = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # Filled by Client.create: every offer tried, and the machines that
        # were created before a batch failed part-way (still running).
        self.attempts: list[Any] = []
        self.instances: list[Any] = []

    def __str__(self) -> str:
        return self.message


class ConfigurationError(GpuCloudError):
    code = "configuration"


class CredentialsError(ConfigurationError):
    code = "credentials"


class SpecError(GpuCloudError):
    """The request itself is invalid: bad GPU name, negative count, bad spec."""

    code = "invalid_spec"


class UnknownGPUError(SpecError):
    code = "unknown_gpu"

    def __init__(self, name: str, suggestions: list[str]) -> None:
        hint = (
            f"did you mean {' or '.join(suggestions)}?"
            if suggestions
            else "run `gpucloud gpus` to list known GPU names"
        )
        super().__init__(f"unknown GPU {name!r}", hint=hint)
        self.name = name
        self.suggestions = suggestions


class BudgetExceededError(GpuCloudError):
    code = "over_budget"


class NoOffersError(GpuCloudError):
    """No provider in scope sells (or has available) what was asked for."""

    code = "no_offers"


class ConfirmationRequired(GpuCloudError):
    """A command that costs money was neither confirmed nor given --yes."""

    code = "confirmation_required"


class APIError(GpuCloudError):
    """Something went wrong talking to a provider."""

    code = "api_error"

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        request: Any = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.provider = provider
        self.request = request
        # The client-generated launch id when the error belongs to a create:
        # the machine may exist and carries this id (reconcile looks for it).
        self.launch_id: str | None = None


    @property
    def request(self) -> Any:
        """The httpx.Request, copied with its credentials redacted (the
        Authorization header, a token request's client secret or refresh token):
        an exception is logged, pickled and sent to error trackers."""
        return self._request

    @request.setter
    def request(self, value: Any) -> None:
        self._request = redact_request(value)


def redact_request(request: Any) -> Any:
    """A copy of an httpx.Request without credentials in headers, query or body;
    None for anything else (what cannot be cleaned is not kept)."""
    if request is None:
        return None
    import httpx  # already loaded by whoever made the request

    if not isinstance(request, httpx.Request):
        return None
    headers = [(k, REDACTED if _SECRET_HEADER.search(k) else v)
               for k, v in request.headers.multi_items()
               if k.lower() not in ("content-length", "transfer-encoding")]
    url = request.url
    if url.query:
        url = url.copy_with(params=[(k, REDACTED if _SECRET_FIELD.search(k) else v)
                                    for k, v in url.params.multi_items()])
    return httpx.Request(request.method, url, headers=headers, content=_redact_body(request),
                         extensions=dict(request.extensions))


def _redact_body(request: Any) -> bytes:
    import json
    from urllib.parse import parse_qsl, urlencode

    try:
        content: bytes = request.content
    except Exception:  # noqa: BLE001 - a streamed body was never read: keep none
        return b""
    if not content:
        return b""
    kind = request.headers.get("content-type", "")
    try:
        if "form-urlencoded" in kind:
            pairs = parse_qsl(content.decode(), keep_blank_values=True, strict_parsing=True)
            return urlencode([(k, REDACTED if _SECRET_FIELD.search(k) else v)
                              for k, v in pairs]).encode()
        return json.dumps(_redact_json(json.loads(content))).encode()
    except (ValueError, UnicodeDecodeError, RecursionError):
        return b"[body not kept]"  # not a shape we can clean


def _redact_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: REDACTED if isinstance(k, str) and _SECRET_FIELD.search(k)
                else _redact_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v) for v in value]
    return value


class APIConnectionError(APIError):
    code = "connection_error"

    def __init__(self, message: str, *, provider: str, request: Any = None,
                 hint: str | None = None, sent: bool = False) -> None:
        super().__init__(message, provider=provider, request=request, hint=hint)
        # True when the request may have reached the server (read timeout,
        # broken connection after writing): the outcome is unknown.
        self.sent = sent


class APITimeoutError(APIConnectionError):
    code = "timeout"


class APIResponseValidationError(APIError):
    code = "invalid_response"


class APIStatusError(APIError):
    """The provider answered with an error status."""

    code = "api_status_error"

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int,
        provider_code: str | None = None,
        request_id: str | None = None,
        request: Any = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, provider=provider, request=request, hint=hint)
        self.status_code = status_code
        self.provider_code = provider_code
        self.request_id = request_id


class BadRequestError(APIStatusError):
    """The provider rejected the request's parameters (bad region, bad name...)."""

    code = "invalid_request"


class AuthenticationError(APIStatusError):
    code = "authentication"


class PermissionDeniedError(APIStatusError):
    code = "permission_denied"


class NotFoundError(APIStatusError):
    code = "not_found"


class ConflictError(APIStatusError):
    code = "conflict"


class RateLimitError(APIStatusError):
    code = "rate_limited"

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class InternalServerError(APIStatusError):
    code = "server_error"


class InsufficientCapacityError(APIStatusError):
    code = "no_capacity"


class OfferRefusedError(InsufficientCapacityError):
    """This one offer cannot be launched by this account (a pool it may not use,
    a host that refused the rental) while other offers may work: failover moves
    on to the next candidate, as for no capacity."""

    code = "offer_refused"


class QuotaExceededError(APIStatusError):
    code = "quota_exceeded"


class WaitError(GpuCloudError):
    code = "wait_failed"


class InstanceFailedError(WaitError):
    code = "instance_failed"


class WaitTimeoutError(WaitError):
    code = "wait_timeout"


# One table: error class -> CLI exit code (DESIGN.md, "CLI contract").
# Looked up along the MRO, so the most specific entry wins.
EXIT_CODES: dict[type[BaseException], int] = {
    GpuCloudError: 10,
    SpecError: 2,
    BadRequestError: 2,
    ConfigurationError: 3,
    CredentialsError: 3,
    AuthenticationError: 4,
    PermissionDeniedError: 4,
    NotFoundError: 5,
    InsufficientCapacityError: 6,
    QuotaExceededError: 6,
    NoOffersError: 6,
    BudgetExceededError: 7,
    ConfirmationRequired: 8,
    WaitError: 9,
    APIError: 10,
    KeyboardInterrupt: 130,
}


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code for an exception; 1 for anything unexpected."""
    for cls in type(exc).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    return 1
