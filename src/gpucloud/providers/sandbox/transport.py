"""The httpx transport that serves requests from a SandboxCloud in-process
(any object with ``knobs``, ``db_path``, ``log`` and ``handle(request)``; typed
loosely so that this module and server.py do not import each other).

What happens "on the wire" is simulated here, around the server: the latency
(LATENCY_MS), the cloud's rate limit (RATE_LIMIT: a 429 before the server
sees the request) and a connection dropped after a create was committed
(DROP_AFTER_CREATE). The rate budget and the drop die belong to the simulated
cloud, one per database file, so every client of it in the process shares
them, as every client of a real account shares its provider's budget.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import httpx

if TYPE_CHECKING:
    from gpucloud.providers.sandbox.knobs import Knobs


class Served(Protocol):
    """What the transport needs of the SandboxCloud it serves."""

    knobs: Knobs
    log: deque[tuple[str, str, int]]

    def handle(self, request: httpx.Request) -> httpx.Response: ...


class TokenBucket:
    """The simulated cloud's limit: ``rate`` per second, holding one second's
    worth (at least one), the burst a real API lets through."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.clock = clock
        self._tokens = self.capacity
        self._stamp = clock()

    def take(self) -> float:
        """0 if a request may pass (and takes its token), else seconds until one can."""
        now = self.clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.rate


class Wire:
    """One simulated cloud's side of the wire: its rate budget, the drop die and
    counts of what they did (for fault-injection reports)."""

    def __init__(self, rate: float, seed: int | None) -> None:
        self.bucket = TokenBucket(rate) if rate > 0 else None
        self.rng = random.Random(seed)
        self.rate_limited = 0
        self.dropped = 0
        self.requests = 0  # every request that reached the wire, refused or not
        self.lock = threading.Lock()


_WIRES: dict[tuple[str, float, float, int | None], Wire] = {}
_WIRES_LOCK = threading.Lock()


def wire_of(cloud: Served) -> Wire:
    """The wire of the cloud's database (new knobs, new wire)."""
    knobs = cloud.knobs
    key = (str(getattr(cloud, "db_path", id(cloud))), knobs.rate_limit,
           knobs.drop_after_create, knobs.seed)
    with _WIRES_LOCK:
        wire = _WIRES.get(key)
        if wire is None:
            wire = _WIRES[key] = Wire(knobs.rate_limit, knobs.seed)
        return wire


def _is_create(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.rstrip("/") == "/v1/instances"


class SandboxTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Serves requests from a SandboxCloud in-process; nothing touches the network."""

    def __init__(self, cloud: Served, *, sleep: Callable[[float], None] = time.sleep,
                 async_sleep: Callable[[float], Any] | None = None) -> None:
        self.cloud = cloud
        self.wire = wire_of(cloud)
        self._sleep = sleep
        self._async_sleep = async_sleep

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        if self.cloud.knobs.latency_ms:
            self._sleep(self.cloud.knobs.latency_ms / 1000)
        refused = self._limited(request)
        if refused is not None:
            return refused
        return self._after(request, self.cloud.handle(request))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import asyncio  # the async path only: a sync client never loads asyncio

        await request.aread()
        if self.cloud.knobs.latency_ms:
            await (self._async_sleep or asyncio.sleep)(self.cloud.knobs.latency_ms / 1000)
        refused = self._limited(request)
        if refused is not None:
            return refused
        # SQLite may wait for another process's lock: keep the event loop free.
        response: httpx.Response = await asyncio.to_thread(self.cloud.handle, request)
        return self._after(request, response)

    def _limited(self, request: httpx.Request) -> httpx.Response | None:
        """RATE_LIMIT: a 429 with Retry-After (whole seconds, as HTTP has them)
        when the request is over the cloud's budget; nothing is recorded."""
        wire = self.wire
        with wire.lock:
            wire.requests += 1
        if wire.bucket is None:
            return None
        with wire.lock:
            wait = wire.bucket.take()
            if not wait:
                return None
            wire.rate_limited += 1
        self.cloud.log.append((request.method, request.url.path, 429))
        rate = self.cloud.knobs.rate_limit
        return httpx.Response(
            429, headers={"Retry-After": str(max(1, math.ceil(wait)))},
            json={"error": {"code": "rate_limited",
                            "message": f"too many requests (over {rate:g} per second)"}})

    def _after(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
        """DROP_AFTER_CREATE: the server committed the create, then the
        connection dropped before its answer: an ambiguous create."""
        p = self.cloud.knobs.drop_after_create
        if p and response.status_code == 201 and _is_create(request):
            with self.wire.lock:
                drop = self.wire.rng.random() < p
                self.wire.dropped += drop
            if drop:
                raise httpx.RemoteProtocolError(
                    "Server disconnected without sending a response.", request=request)
        return response
