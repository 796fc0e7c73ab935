"""HTTP outcomes as gpucloud errors: the generic status -> class mapping every
adapter refines, and transport failures. Below both the driver (http.py) and
the adapters, so neither imports the other for it."""

from __future__ import annotations

import email.utils
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded by the driver that hands these functions a request
    import httpx

from gpucloud.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
)


def retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unreadable: fall back to our own backoff
    return max(0.0, parsed.timestamp() - time.time())


def status_error(
    provider: str,
    response: httpx.Response,
    *,
    message: str,
    provider_code: str | None = None,
    hint: str | None = None,
    cls: type[APIStatusError] | None = None,
) -> APIStatusError:
    """The generic status -> class mapping; adapters refine it with their codes."""
    status = response.status_code
    if cls is None:
        # 400/422 stay generic: only an adapter knows whether its provider's
        # 400 means "bad parameters" or something it has no code for yet.
        cls = {401: AuthenticationError, 403: PermissionDeniedError, 404: NotFoundError,
               409: ConflictError, 429: RateLimitError}.get(status)
        if cls is None:
            cls = InternalServerError if status >= 500 else APIStatusError
    if cls is AuthenticationError:
        ours = f"`gpucloud providers` shows where the {provider} key comes from"
        hint = f"{hint.rstrip('.')}; {ours}" if hint else f"check the API key: {ours}"
    request_id = response.headers.get("x-request-id") or response.headers.get("request-id")
    kwargs: dict[str, Any] = dict(
        provider=provider, status_code=status, provider_code=provider_code,
        request_id=request_id, request=response.request, hint=hint,
    )
    text = f"{provider}: {message} (HTTP {status}{', ' + provider_code if provider_code else ''})"
    if cls is RateLimitError:
        limited = RateLimitError(text, **kwargs)
        limited.retry_after = retry_after(response)
        return limited
    return cls(text, **kwargs)


def transport_error(provider: str, request: httpx.Request, exc: Exception) -> APIConnectionError:
    import httpx

    # Nothing was written: no connection was made, or none came free in the pool.
    sent = not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
    where = f"{request.method} {request.url.host}{request.url.path}"
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(
            f"{provider}: timed out on {where}", provider=provider, request=request, sent=sent,
            hint="the provider may still have acted on it" if sent else "check your network",
        )
    return APIConnectionError(
        f"{provider}: connection failed on {where}: {type(exc).__name__}",
        provider=provider, request=request, sent=sent,
        hint="the provider may still have acted on it" if sent else "check your network",
    )


