"""Short-lived access tokens, refreshed for every provider that needs them.

One ``httpx.Auth`` (``RefreshingTokenAuth``) signs requests with a bearer
token it obtains and renews itself; what differs between providers (Verda's
OAuth2 endpoint now, a Kubernetes TokenRequest later) is a ``TokenSource``
that only *builds* token requests and *parses* token responses. No I/O lives
in either: token requests are yielded through the auth flow, so they travel
through the same ``httpx.Client`` / ``AsyncClient`` and transport as the API
requests they unlock (and respx sees them in tests).

The rules:

* A token is renewed ``leeway`` seconds before ``expires_at``: with the
  refresh token when the source has one, falling back to the initial grant
  when the refresh is refused (400/401, the way Verda's own SDK does it).
* Concurrency: 100 requests that find the token expired cause exactly one
  token request. A ``threading.Lock`` (sync) or an ``asyncio.Lock`` (async,
  one per event loop) is taken, and expiry is checked again inside it.
* A 401 on an API request triggers one renewal and one retry of that
  request (a 401 means it was refused unread, so even a launch is safe to
  re-send), never more: if the retry gets 401 too, that response is returned
  and the adapter maps it to AuthenticationError. If another request renewed
  the token meanwhile, the retry just uses the new one.
* A failing token endpoint raises the source's error (``parse``) out of the
  request. Token requests are not retried here: a connect error surfaces as
  one of the API request that never left (the driver retries it), any later
  failure as an ambiguous one (a launch is then reconciled, never re-sent).
* Tokens are ``SecretStr``; they are never logged and never appear in a
  repr, a str or an exception (``redact`` scrubs them from provider text).
"""

from __future__ import annotations

import abc
import asyncio
import collections
import logging
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Generator
from dataclasses import dataclass, field

import httpx
from pydantic import SecretStr

log = logging.getLogger("gpucloud.tokens")

# Set on every token request a source builds, so transports, tests and log
# filters can tell token traffic (secrets in the body) from API traffic.
TOKEN_REQUEST_EXTENSION = "gpucloud_token_request"
REFUSED_REFRESH = (400, 401)


@dataclass(frozen=True)
class Token:
    """An access token, the refresh token that may renew it, and its expiry (epoch s)."""

    access_token: SecretStr = field(repr=False)
    refresh_token: SecretStr | None = field(default=None, repr=False)
    expires_at: float | None = None  # None: the source gave no lifetime

    def __repr__(self) -> str:
        refresh = "[secure]" if self.refresh_token is not None else "None"
        return (f"Token(access_token=[secure], refresh_token={refresh}, "
                f"expires_at={self.expires_at!r})")

    __str__ = __repr__

    def stale(self, now: float, leeway: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at - leeway


class TokenSource(abc.ABC):
    """Builds token requests and parses token responses; performs no I/O."""

    @abc.abstractmethod
    def initial_request(self) -> httpx.Request:
        """The grant that needs no earlier token (client credentials, TokenRequest...)."""

    def refresh_request(self, token: Token) -> httpx.Request | None:
        """A request renewing ``token``, or None when this source cannot refresh."""
        return None

    @abc.abstractmethod
    def parse(self, response: httpx.Response, now: float) -> Token:
        """The token in a response (``now``: when it was asked for, to date expires_in).

        Raises a gpucloud error (APIStatusError subclass or
        APIResponseValidationError) when the response is not a token; the
        message must not contain any secret.
        """

    def obtain(self, now: float) -> Token | None:
        """A token obtained without HTTP (a kubeconfig exec plugin runs a command
        that prints it), or None: this source's tokens come from initial_request."""
        return None

    def refused(self, response: httpx.Response) -> bool:
        """Whether a refresh response means "refresh token no longer valid"."""
        return response.status_code in REFUSED_REFRESH


class RefreshingTokenAuth(httpx.Auth):
    """``Authorization: Bearer <token>`` with a token that renews itself (see module doc)."""

    requires_request_body = True  # a 401 retry re-sends the body
    requires_response_body = True  # token responses are parsed inside the flow

    def __init__(self, source: TokenSource, *, leeway: float = 60.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.leeway = leeway
        self.clock = clock
        self._token: Token | None = None
        # Tokens just replaced: an error about a request sent with one of them
        # may still quote it, so redact() scrubs these too.
        self._retired: collections.deque[Token] = collections.deque(maxlen=4)
        self._lock = threading.Lock()
        self._async_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary())

    def __repr__(self) -> str:
        return (f"RefreshingTokenAuth(source={type(self.source).__name__}, token=[secure], "
                f"expires_at={self.token_expires_at!r})")

    # -- what callers may look at --------------------------------------------

    @property
    def token_expires_at(self) -> float | None:
        """Expiry (epoch seconds) of the current token; None before the first one."""
        token = self._token
        return token.expires_at if token is not None else None

    @property
    def has_token(self) -> bool:
        return self._token is not None

    def set_token(self, token: Token | None) -> None:
        """Seed (or forget) the token, e.g. from a cache; the next request uses it."""
        self._token = token

    def redact(self, text: str) -> str:
        """``text`` with the current (and recently replaced) tokens replaced by [secure]."""
        for token in (self._token, *self._retired):
            if token is None:
                continue
            for secret in (token.access_token, token.refresh_token):
                value = secret.get_secret_value() if secret is not None else ""
                if value:
                    text = text.replace(value, "[secure]")
        return text

    # -- the flows -------------------------------------------------------------

    def sync_auth_flow(
        self, request: httpx.Request,
    ) -> Generator[httpx.Request, httpx.Response, None]:
        request.read()  # a 401 retry re-sends the body
        token = self._token
        if self._needs_renewal(token):
            with self._lock:
                token = self._token  # another thread may have renewed it meanwhile
                if self._needs_renewal(token):
                    sub = self._renew(token)
                    try:
                        step = next(sub)
                        while True:
                            response = yield step
                            response.read()
                            step = sub.send(response)
                    except StopIteration as stop:
                        token = stop.value
        response = yield self._sign(request, token)
        if response.status_code != 401:
            return
        with self._lock:
            sub = self._after_401(token)
            try:
                step = next(sub)
                while True:
                    response = yield step
                    response.read()
                    step = sub.send(response)
            except StopIteration as stop:
                token = stop.value
        yield self._sign(request, token)  # once; its answer is final

    async def async_auth_flow(
        self, request: httpx.Request,
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        # The twin of sync_auth_flow. An async generator cannot ``yield from``,
        # so both step the same token sub-flows (_renew, _after_401) by hand.
        await request.aread()
        token = self._token
        if self._needs_renewal(token):
            async with self._async_lock():
                token = self._token
                if self._needs_renewal(token):
                    sub = self._renew(token)
                    try:
                        step = next(sub)
                        while True:
                            response = yield step
                            await response.aread()
                            step = sub.send(response)
                    except StopIteration as stop:
                        token = stop.value
        response = yield self._sign(request, token)
        if response.status_code != 401:
            return
        async with self._async_lock():
            sub = self._after_401(token)
            try:
                step = next(sub)
                while True:
                    response = yield step
                    await response.aread()
                    step = sub.send(response)
            except StopIteration as stop:
                token = stop.value
        yield self._sign(request, token)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        # httpx calls sync_auth_flow / async_auth_flow; this is for direct callers.
        return self.sync_auth_flow(request)

    # -- internals -------------------------------------------------------------

    def _needs_renewal(self, token: Token | None) -> bool:
        return token is None or token.stale(self.clock(), self.leeway)

    def _sign(self, request: httpx.Request, token: Token | None) -> httpx.Request:
        assert token is not None
        request.headers["Authorization"] = f"Bearer {token.access_token.get_secret_value()}"
        return request

    def _after_401(self, used: Token | None) -> Generator[httpx.Request, httpx.Response, Token]:
        """The token to retry with: a renewed one, unless someone renewed it already."""
        current = self._token
        if current is not None and current is not used:
            return current
        log.debug("token refused by the API (401): renewing once")
        return (yield from self._renew(used))

    def _renew(self, token: Token | None) -> Generator[httpx.Request, httpx.Response, Token]:
        """Refresh ``token``, or run the initial grant; stores and returns the new token."""
        if token is not None and token.refresh_token is not None:
            refresh = self.source.refresh_request(token)
            if refresh is not None:
                now = self.clock()
                response = yield refresh
                if not self.source.refused(response):
                    return self._store(self.source.parse(response, now), "refresh")
                log.debug("token refresh refused (HTTP %s): using the initial grant",
                          response.status_code)
        now = self.clock()
        local = self.source.obtain(now)
        if local is not None:
            return self._store(local, "the credential plugin")
        response = yield self.source.initial_request()
        return self._store(self.source.parse(response, now), "initial grant")

    def _store(self, token: Token, how: str) -> Token:
        if self._token is not None:
            self._retired.append(self._token)
        self._token = token
        if token.expires_at is None:
            log.debug("token obtained by %s (no expiry given)", how)
        else:
            log.debug("token obtained by %s, valid for %.0f s", how,
                      token.expires_at - self.clock())
        return token

    def _async_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._lock:  # no await inside: a plain lock keeps creation race-free
            lock = self._async_locks.get(loop)
            if lock is None:
                lock = self._async_locks[loop] = asyncio.Lock()
        return lock


__all__ = ["REFUSED_REFRESH", "TOKEN_REQUEST_EXTENSION", "RefreshingTokenAuth", "Token",
           "TokenSource"]
