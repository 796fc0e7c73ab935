"""The httpx transport that serves requests from a SandboxCloud in-process
(any object with ``knobs`` and ``handle(request)``; typed loosely so that this
module and server.py do not import each other)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx


class SandboxTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Serves requests from a SandboxCloud in-process; nothing touches the network."""

    def __init__(self, cloud: Any, *, sleep: Callable[[float], None] = time.sleep,
                 async_sleep: Callable[[float], Any] = asyncio.sleep) -> None:
        self.cloud = cloud
        self._sleep = sleep
        self._async_sleep = async_sleep

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        if self.cloud.knobs.latency_ms:
            self._sleep(self.cloud.knobs.latency_ms / 1000)
        return self._maybe_drop(request, self.cloud.handle(request))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        if self.cloud.knobs.latency_ms:
            await self._async_sleep(self.cloud.knobs.latency_ms / 1000)
        # SQLite may wait for another process's lock: keep the event loop free.
        return self._maybe_drop(request, await asyncio.to_thread(self.cloud.handle, request))

    def _maybe_drop(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
        """DROP_AFTER_CREATE: the create was committed, its answer never arrives."""
        chance = getattr(self.cloud.knobs, "drop_after_create", 0.0)
        if (chance and request.method == "POST" and request.url.path == "/v1/instances"
                and response.is_success):
            with self.cloud._lock:
                dropped = self.cloud.rng.random() < chance
            if dropped:
                raise httpx.RemoteProtocolError("simulated: connection dropped after the "
                                                "create was committed", request=request)
        return response
