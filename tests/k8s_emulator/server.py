"""The emulator's HTTP face: a threaded server on 127.0.0.1:<free port>
(optionally TLS with a throwaway CA) in front of api.Api."""

from __future__ import annotations

import json
import secrets
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from .api import Api
from .cluster import Cluster, Knobs


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api: Api  # set on the subclass made per server

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply = self.api.handle(self.command, self.path, headers, raw)
        if reply.upgrade is not None:
            self._exec(reply.upgrade)
            return
        if reply.stream is not None:
            self.send_response(reply.code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in reply.stream():
                data = chunk.encode()
                if data:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        if reply.text is not None:
            data, kind = reply.text.encode(), "text/plain"
        else:
            data, kind = json.dumps(reply.body).encode(), "application/json"
        self.send_response(reply.code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Audit-Id", secrets.token_hex(8))
        self.end_headers()
        self.wfile.write(data)

    def _exec(self, upgrade: Any) -> None:
        """101, then the run's output as channel-prefixed binary frames, the
        error channel's Status (v4 and later), a normal close."""
        from . import websocket

        self.close_connection = True
        self.send_response(101, "Switching Protocols")
        for name, value in upgrade.headers:
            self.send_header(name, value)
        self.end_headers()
        status_channel = upgrade.protocol.startswith(("v4.", "v5."))
        try:
            for channel, data in upgrade.run.frames():
                if channel in upgrade.channels or (channel == 3 and status_channel):
                    self.wfile.write(websocket.frame(websocket.BINARY, bytes([channel]) + data))
                    self.wfile.flush()
            self.wfile.write(websocket.close_frame())
            self.wfile.flush()
            self.connection.settimeout(2)
            while (got := websocket.read_frame(self.rfile)) is not None:
                if got[0] == websocket.CLOSE:
                    break
        except (OSError, ValueError):
            pass  # the client went away (its timeout) or spoke nonsense: the run ends here

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve


class _TLSServer(ThreadingHTTPServer):
    """TLS with the handshake in each connection's own thread. Wrapping the
    listening socket instead would run every handshake inside accept(), on the
    one thread that accepts: a client that connects and then stalls (a proxy
    test's half-open tunnel, a starved thread) would hold every later
    connection in the queue until its own timeout."""

    context: ssl.SSLContext

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(HANDSHAKE_SECONDS)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return  # the client gave up or spoke no TLS: this connection only
        tls.settimeout(None)
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()


HANDSHAKE_SECONDS = 30


class KubeEmulator:
    """An in-process API server on 127.0.0.1:<free port>. Use as a context manager.

    ``admin_token`` never expires (a static kubeconfig token); ``issue_token``
    mints more; ``exec_ttl`` is the lifetime of tokens the exec plugin gets."""

    def __init__(self, nodes: list[dict[str, Any]] | None = None, *,
                 namespaces: tuple[str, ...] = ("default",),
                 service_accounts: tuple[str, ...] = ("default",),
                 clock: Callable[[], float] = time.time, knobs: Knobs | None = None,
                 tls: bool = False):
        self.cluster = Cluster(nodes, namespaces=namespaces, service_accounts=service_accounts,
                               clock=clock, knobs=knobs)
        self.api = Api(self.cluster, secrets.token_hex(16))
        self.admin_token, _ = self.cluster.issue_token("admin")
        self.tls = tls
        self.ca_pem: bytes | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def knobs(self) -> Knobs:
        return self.cluster.knobs

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.api.log

    @property
    def admin_key(self) -> str:
        return self.api.admin_key

    @property
    def exec_tokens_issued(self) -> int:
        return self.api.exec_tokens_issued

    def start(self) -> KubeEmulator:
        handler = type("Handler", (_Handler,), {"api": self.api})
        server: ThreadingHTTPServer
        if self.tls:
            from .tls import server_context
            server = _TLSServer(("127.0.0.1", 0), handler)
            server.context, self.ca_pem = server_context()
        else:
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="k8s-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def admin_client(self) -> Any:
        """An httpx.Client on the emulator as its administrator (tests of the
        emulator itself: they talk to it without gpucloud in between)."""
        import httpx

        return httpx.Client(base_url=self.url, timeout=10,
                            headers={"Authorization": f"Bearer {self.admin_token}"})

    def __enter__(self) -> KubeEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start the emulator first"
        port = self._server.server_address[1]
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"

    def write_ca(self, path: Path) -> Path:
        assert self.ca_pem is not None
        path.write_bytes(self.ca_pem)
        return path

    def issue_token(self, ttl: float | None = None, user: str = "tester") -> str:
        return self.cluster.issue_token(user, ttl)[0]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10) -> bool:
        """Poll (ticking the cluster) until predicate() holds; False on timeout."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.cluster.tick()
            with self.cluster.lock:
                if predicate():
                    return True
            time.sleep(0.02)
        return False
