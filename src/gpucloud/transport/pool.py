"""Connections to a provider's API: one per request in flight, in several pools.

httpx's default pool (100 connections, 20 kept idle) held a batch back once
more than 100 requests were in flight, which a fast API wants (its rate times
its round trip: 500 requests a second at 500 ms is 250): the others waited for
a connection as if the provider were slower, which widened the batch further
(core/concurrency.py follows the observed round trip), and every connection
beyond 20 was closed and opened again between requests. How many requests go
at once is this client's decision (its launch and gather bounds), not the
pool's, so the pools here have no limit and keep every connection.

One pool cannot hold hundreds of connections at a cost that stays flat:
httpcore's pool looks at each of its connections (a poll of the socket for
an idle one) each time a request is handed one and each time one is given
back. Against a local HTTP server (bench/batch_sweep.py --served), 500
creates a second at 500 ms through one unbounded pool ran at 7.7 times the
rate's bound, and a profile put 60% of the client's CPU in that scan. So
requests are spread over up to ``SHARDS`` pools, each request to the pool with
the fewest requests in flight (the first on a tie), opened when first needed:
a client sending one request at a time uses the first pool alone and reuses
its connection, as before. All pools share one TLS context (loading the
certificate authorities once).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import ssl

# Enough pools that each holds a few tens of connections at the most a batch
# keeps in flight.
SHARDS = 16
# No bound of its own: the connections open are those in flight, which the
# client bounds; an idle one is closed after httpx's keep-alive expiry (5 s).
LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=None)


class _Shards:
    """The pools of one session and the requests in flight on each."""

    def __init__(self, verify: ssl.SSLContext | str | bool, proxy: str | None) -> None:
        self._lock = threading.Lock()
        self._busy = [0] * SHARDS
        self._verify = verify
        self.proxy = proxy
        self._ssl: ssl.SSLContext | None = None

    def pick(self) -> int:
        with self._lock:
            busy = self._busy
            index = busy.index(min(busy))
            busy[index] += 1
            return index

    def done(self, index: int) -> None:
        with self._lock:
            self._busy[index] -= 1

    def ssl_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._ssl is None:
                verify = self._verify
                self._ssl = verify if not isinstance(verify, (str, bool)) else \
                    httpx.create_ssl_context(verify=verify, trust_env=True)
            return self._ssl


class PooledTransport(httpx.BaseTransport):
    """The transport of a provider session that brings none of its own, and
    under one that does (Kubernetes': its cluster's certificate authority and
    proxy). `verify` and `proxy` as httpx.HTTPTransport takes them."""

    def __init__(self, verify: ssl.SSLContext | str | bool = True,
                 proxy: str | None = None) -> None:
        self._shards = _Shards(verify, proxy)
        self._pools: list[httpx.HTTPTransport | None] = [None] * SHARDS
        self._opening = threading.Lock()

    def _pool(self, index: int) -> httpx.HTTPTransport:
        pool = self._pools[index]
        if pool is None:
            with self._opening:
                pool = self._pools[index]
                if pool is None:
                    pool = self._pools[index] = httpx.HTTPTransport(
                        verify=self._shards.ssl_context(), proxy=self._shards.proxy,
                        limits=LIMITS)
        return pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        index = self._shards.pick()
        try:
            return self._pool(index).handle_request(request)
        finally:
            # Counted until the answer's head is in: its body is read at once
            # by the session, so the count is near enough to spread the load.
            self._shards.done(index)

    def close(self) -> None:
        with self._opening:
            pools, self._pools = self._pools, [None] * SHARDS
        for pool in pools:
            if pool is not None:
                pool.close()


class AsyncPooledTransport(httpx.AsyncBaseTransport):
    """The asyncio twin of PooledTransport (its tasks share one thread, so the
    count is only ever changed by one at a time; the lock costs nothing)."""

    def __init__(self, verify: ssl.SSLContext | str | bool = True,
                 proxy: str | None = None) -> None:
        self._shards = _Shards(verify, proxy)
        self._pools: list[httpx.AsyncHTTPTransport | None] = [None] * SHARDS

    def _pool(self, index: int) -> httpx.AsyncHTTPTransport:
        pool = self._pools[index]
        if pool is None:
            pool = self._pools[index] = httpx.AsyncHTTPTransport(
                verify=self._shards.ssl_context(), proxy=self._shards.proxy, limits=LIMITS)
        return pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = self._shards.pick()
        try:
            return await self._pool(index).handle_async_request(request)
        finally:
            self._shards.done(index)

    async def aclose(self) -> None:
        pools, self._pools = self._pools, [None] * SHARDS
        for pool in pools:
            if pool is not None:
                await pool.aclose()


__all__ = ["LIMITS", "SHARDS", "AsyncPooledTransport", "PooledTransport"]
