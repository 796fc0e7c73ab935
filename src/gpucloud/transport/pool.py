"""Connections to a provider's API: one per request in flight, in several pools.

httpx's default pool (100 connections, 20 kept idle) held a batch back once
more than 100 requests were in flight, which a fast API wants (its rate times
its round trip: 500 requests a second at 500 ms is 250): the others waited for
a connection as if the provider were slower, which widened the batch further
(core/concurrency.py follows the observed round trip), and every connection
beyond 20 was closed and opened again between requests. How many requests go
at once is this client's decision (its launch and gather bounds, which keep
to the process's file limit), not the pool's, so the pools here have no limit
and keep every connection while they are used.

One pool cannot hold hundreds of connections at a cost that stays flat:
httpcore's pool looks at each of its connections (a poll of the socket for
an idle one) each time a request is handed one and each time one is given
back. Against a local HTTP server (bench/batch_sweep.py --served), 500
creates a second at 500 ms through one unbounded pool ran at 7.7 times the
rate's bound, and a profile put 60% of the client's CPU in that scan. So
requests are spread over up to ``SHARDS`` pools, each request to the pool with
the fewest requests in flight (the first on a tie), opened when first needed:
a client sending one request at a time uses the first pool alone and reuses
its connection, as before. A pool other than the first that has had nothing
to do for ``IDLE`` seconds is closed (httpcore closes an expired connection
only when its own pool is used again). All pools share one TLS context.

A proxy from the environment (HTTPS_PROXY and the rest) is httpx's to apply:
a session that must use one is left to httpx (session_transport).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Generic, TypeVar

import httpx

from gpucloud.errors import ConfigurationError

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable

# Enough pools that each holds a few connections at the most a batch keeps in
# flight (512). Measured over HTTP at 500 creates/s with 500 ms: AsyncClient
# at 2.40 times the rate's bound with 16 pools, 1.31 with 64 (httpcore's
# asyncio pool pays more per connection it looks at); Client within the noise.
SHARDS = 64
# How often a request looks for pools left idle (it walks them all).
PRUNE_EVERY = 1.0
# No bound of its own: the connections open are those in flight, which the
# client bounds; an idle one expires after httpx's keep-alive expiry.
LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=None)
IDLE = LIMITS.keepalive_expiry or 5.0

P = TypeVar("P", httpx.HTTPTransport, httpx.AsyncHTTPTransport)


class _Pools(Generic[P]):
    """The pools of one transport, the requests in flight on each and when
    each was last handed one."""

    def __init__(self, make: Callable[[ssl.SSLContext], P],
                 verify: ssl.SSLContext | bool, clock: Callable[[], float]) -> None:
        self._make: Callable[[ssl.SSLContext], P] = make
        self._verify = verify
        self._clock = clock
        self._lock = threading.Lock()
        self._pools: list[P | None] = [None] * SHARDS
        self._busy = [0] * SHARDS
        self._used = [0.0] * SHARDS
        self._pruned = float("-inf")
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    def take(self) -> tuple[int, P, list[P]]:
        """A pool for one request (counted in flight until ``give_back``), and
        the pools left idle too long, taken out for the caller to close."""
        now = self._clock()
        with self._lock:
            if self._closed:
                raise RuntimeError("the provider session is closed")
            busy = self._busy
            index = busy.index(min(busy))
            pool = self._pools[index]
            if pool is None:
                pool = self._pools[index] = self._make(self._context())
            busy[index] += 1
            self._used[index] = now
            idle = []
            if now - self._pruned > PRUNE_EVERY:
                self._pruned = now
                for i in range(1, SHARDS):
                    old = self._pools[i]
                    if old is not None and not busy[i] and now - self._used[i] > IDLE:
                        idle.append(old)
                        self._pools[i] = None
            return index, pool, idle

    def give_back(self, index: int) -> None:
        now = self._clock()
        with self._lock:
            self._busy[index] -= 1
            self._used[index] = now

    def close(self) -> list[P]:
        with self._lock:
            self._closed = True
            pools, self._pools = self._pools, [None] * SHARDS
        return [pool for pool in pools if pool is not None]

    def _context(self) -> ssl.SSLContext:
        # Once per transport (the lock held): loading the authorities is the
        # costly part of a pool. SSL_CERT_FILE and SSL_CERT_DIR apply, as in httpx.
        if self._ssl is None:
            verify = self._verify
            if not isinstance(verify, bool):
                self._ssl = verify
            else:
                try:
                    self._ssl = httpx.create_ssl_context(verify=verify, trust_env=True)
                except OSError as exc:  # ssl.SSLError too: a missing or bad bundle
                    raise ConfigurationError(
                        f"cannot load the certificate authorities to check TLS: {exc}",
                        hint="SSL_CERT_FILE or SSL_CERT_DIR names them; unset both to use "
                             "the bundled ones (certifi)") from None
        return self._ssl


class PooledTransport(httpx.BaseTransport):
    """The transport of a provider session that brings none of its own, and
    under one that does (Kubernetes': its cluster's certificate authority and
    proxy)."""

    def __init__(self, verify: ssl.SSLContext | bool = True, proxy: str | None = None,
                 *, clock: Callable[[], float] = time.monotonic) -> None:
        self._pools: _Pools[httpx.HTTPTransport] = _Pools(
            lambda context: httpx.HTTPTransport(verify=context, proxy=proxy, limits=LIMITS),
            verify, clock)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        index, pool, idle = self._pools.take()
        try:
            for old in idle:
                old.close()
            return pool.handle_request(request)
        finally:
            # Counted until the answer's head is in: its body is read at once
            # by the session, so the count is near enough to spread the load.
            self._pools.give_back(index)

    def close(self) -> None:
        for pool in self._pools.close():
            pool.close()


class AsyncPooledTransport(httpx.AsyncBaseTransport):
    """The asyncio twin of PooledTransport."""

    def __init__(self, verify: ssl.SSLContext | bool = True, proxy: str | None = None,
                 *, clock: Callable[[], float] = time.monotonic) -> None:
        self._pools: _Pools[httpx.AsyncHTTPTransport] = _Pools(
            lambda context: httpx.AsyncHTTPTransport(verify=context, proxy=proxy,
                                                     limits=LIMITS),
            verify, clock)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index, pool, idle = self._pools.take()
        try:
            for old in idle:
                await old.aclose()
            return await pool.handle_async_request(request)
        finally:
            self._pools.give_back(index)

    async def aclose(self) -> None:
        failure: BaseException | None = None
        for pool in self._pools.close():
            try:
                await pool.aclose()
            except Exception as exc:  # noqa: BLE001 - the others are closed first
                failure = failure or exc
        if failure is not None:
            raise failure


def _environment_proxy() -> bool:
    """Whether httpx would find a proxy to use: it reads the same
    ``urllib.request.getproxies()`` (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY in
    either case, and the system's settings on macOS and Windows)."""
    import urllib.request

    return any(scheme in ("http", "https", "all") for scheme in urllib.request.getproxies())


def session_transport(own: httpx.BaseTransport | None) -> httpx.BaseTransport | None:
    """What a Session's httpx client sends through: the adapter's own
    transport, else the pools above, else (a proxy in the environment) None,
    for httpx to route each URL by HTTPS_PROXY and NO_PROXY as it documents,
    through one unbounded pool per route (LIMITS, given to the client)."""
    if own is not None:
        return own
    return None if _environment_proxy() else PooledTransport()


def async_session_transport(
        own: httpx.AsyncBaseTransport | None) -> httpx.AsyncBaseTransport | None:
    """session_transport for an AsyncSession."""
    if own is not None:
        return own
    return None if _environment_proxy() else AsyncPooledTransport()


__all__ = ["IDLE", "LIMITS", "SHARDS", "AsyncPooledTransport", "PooledTransport",
           "async_session_transport", "session_transport"]
