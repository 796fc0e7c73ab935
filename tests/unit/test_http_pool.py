"""A provider session's connections, against a real HTTP server on 127.0.0.1.

A batch against a fast API keeps hundreds of requests in flight (its rate
times its round trip). httpx's default pool opens at most 100 connections and
keeps 20 idle: the 101st request waited for a connection. Here the server
answers nothing until WIDE requests are in at once (a barrier), so a session
that cannot carry them all at once fails the test instead of only being slow.
"""

from __future__ import annotations

import asyncio
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from gpucloud.transport import http as _http
from gpucloud.transport.pool import IDLE, SHARDS, PooledTransport

WIDE = 150  # over httpx's default of 100 connections


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def __init__(self, wide: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.barrier = threading.Barrier(wide, timeout=15) if wide > 1 else None
        self.connections = 0  # opened, ever
        self.open = 0  # open now
        self.paths: list[str] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a provider's API
    server: _Server

    def setup(self) -> None:  # once per connection
        super().setup()
        with self.server.lock:
            self.server.connections += 1
            self.server.open += 1

    def finish(self) -> None:  # the connection closed
        with self.server.lock:
            self.server.open -= 1
        super().finish()

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.paths.append(self.path)  # absolute when sent to a proxy
        status, body = 200, b"{}"
        if self.server.barrier is not None:
            try:
                self.server.barrier.wait()
            except threading.BrokenBarrierError:
                status, body = 503, b'{"error": "not all requests were in flight at once"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def serve(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    servers: list[_Server] = []

    def start(wide: int) -> _Server:
        server = _Server(wide)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


class Provider:
    """What a session reads of an adapter; no transport of its own, as every
    REST cloud's adapter."""

    name = "runpod"

    def __init__(self, server: _Server, url: str | None = None) -> None:
        self.url = url or f"http://127.0.0.1:{server.server_address[1]}/v1/pods"

    def limits(self):
        return {}

    def rate_scope(self):
        return (self.name, self.url, "")

    def transport(self):
        return None

    def async_transport(self):
        return None

    def auth(self):
        return None


def _flow(url: str):
    response = yield httpx.Request("GET", url)
    return response.status_code


def test_a_session_carries_more_requests_at_once_than_httpx_pools_by_default(serve):
    server = serve(WIDE)
    provider = Provider(server)
    session = _http.Session(provider)
    statuses: list[int] = []

    def one() -> None:
        statuses.append(session.run(_flow(provider.url)))

    threads = [threading.Thread(target=one) for _ in range(WIDE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    session.close()
    assert statuses == [200] * WIDE


def test_an_async_session_carries_them_too(serve):
    server = serve(WIDE)
    provider = Provider(server)

    async def main() -> list[int]:
        session = _http.AsyncSession(provider)
        try:
            return list(await asyncio.gather(
                *(session.run(_flow(provider.url)) for _ in range(WIDE))))
        finally:
            await session.aclose()

    assert asyncio.run(main()) == [200] * WIDE


def test_one_request_at_a_time_reuses_one_connection(serve):
    server = serve(1)
    provider = Provider(server)
    session = _http.Session(provider)
    assert [session.run(_flow(provider.url)) for _ in range(20)] == [200] * 20
    session.close()
    assert server.connections == 1


def test_the_connections_of_a_wide_burst_are_kept_for_the_next(serve):
    """Every connection opened for a burst is kept: the same burst again opens
    none (the default pool keeps 20 idle and closes the rest)."""
    server = serve(WIDE)
    provider = Provider(server)
    session = _http.Session(provider)

    def burst() -> list[int]:
        statuses: list[int] = []
        threads = [threading.Thread(target=lambda: statuses.append(
            session.run(_flow(provider.url)))) for _ in range(WIDE)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        return statuses

    assert burst() == [200] * WIDE
    opened = server.connections
    assert opened == WIDE
    assert burst() == [200] * WIDE
    session.close()
    assert server.connections == opened


def _burst(send, wide: int) -> list[int]:
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(send())) for _ in range(wide)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return statuses


def test_pools_left_idle_are_closed_once_the_next_request_comes(serve):
    """httpcore closes an expired connection only when its own pool is used
    again; one request at a time uses the first pool alone, so the others'
    connections would stay open for the session's life."""
    wide = 40
    server = serve(wide)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/pods"
    now = [1000.0]
    transport = PooledTransport(clock=lambda: now[0])
    client = httpx.Client(transport=transport)
    assert _burst(lambda: client.get(url).status_code, wide) == [200] * wide
    server.barrier = None  # from here on, answered at once
    assert client.get(url).status_code == 200
    assert server.open == wide  # all kept: nothing has been idle long
    now[0] += IDLE + 1
    assert client.get(url).status_code == 200
    first = -(-wide // SHARDS)  # the first pool's share of the burst
    for _ in range(100):  # the server sees the closes a moment later
        if server.open <= first:
            break
        time.sleep(0.05)
    assert server.open <= first
    client.close()


def test_a_proxy_from_the_environment_is_still_used(serve, monkeypatch):
    """A session whose adapter brings no transport goes through HTTP_PROXY as
    httpx would (the test server stands as the proxy: it sees the whole URL)."""
    proxy = serve(1)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    provider = Provider(proxy, url="http://api.provider.invalid/v1/pods")
    session = _http.Session(provider)
    assert session.run(_flow(provider.url)) == 200
    session.close()

    async def main() -> int:
        session = _http.AsyncSession(provider)
        try:
            return await session.run(_flow(provider.url))
        finally:
            await session.aclose()

    assert asyncio.run(main()) == 200
    assert proxy.paths == ["http://api.provider.invalid/v1/pods"] * 2


def test_a_certificate_bundle_that_cannot_be_read_is_a_configuration_error(monkeypatch):
    from gpucloud.errors import ConfigurationError

    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/ca-bundle.pem")
    with httpx.Client(transport=PooledTransport()) as client:
        with pytest.raises(ConfigurationError) as info:
            client.get("https://api.provider.invalid/v1/pods")
    assert "SSL_CERT_FILE" in (info.value.hint or "")
