"""The sandbox cloud served over HTTP from its own process, for benches that
measure the client's real HTTP path (httpx's sockets, connection pools) and
keep the simulated cloud's CPU off the client's interpreter.

    python bench/_sandbox_http.py   # prints its port, serves until SIGTERM

The cloud is the one the environment names (GPUCLOUD_SANDBOX_DB and the
GPUCLOUD_SANDBOX_* knobs), behind the same simulated wire as in-process
(latency, rate limit: providers/sandbox/transport.py). HTTP/1.1 with
keep-alive, a thread per connection. On SIGTERM it prints, as one JSON line,
the requests that reached the wire and the 429s it sent.

A bench points the client at it with `point_client_at(url)`, which replaces
the sandbox adapter's in-process transport and base URL in that process:
a bench device, not a way to use the sandbox.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def point_client_at(url: str) -> None:
    from gpucloud.providers.sandbox.adapter import SandboxProvider

    SandboxProvider.transport = lambda self: None  # type: ignore[method-assign,assignment,return-value]
    SandboxProvider.async_transport = lambda self: None  # type: ignore[method-assign,assignment,return-value]
    SandboxProvider.base_url = property(lambda self: url)  # type: ignore[assignment,method-assign]


def main() -> int:
    import httpx

    from gpucloud.config import settings as config
    from gpucloud.providers.sandbox.server import SandboxCloud, SandboxTransport

    cloud = SandboxCloud(config.sandbox_db_path(), config.load_config().sandbox)
    wire = SandboxTransport(cloud)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def handle(self) -> None:
            try:
                super().handle()
            except OSError:
                pass  # the client closed the connection

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = httpx.Request(self.command, "http://sandbox" + self.path,
                                    headers=list(self.headers.items()),
                                    content=self.rfile.read(length) if length else b"")
            try:
                response = wire.handle_request(request)
            except httpx.RemoteProtocolError:  # DROP_AFTER_CREATE: no answer
                self.close_connection = True
                return
            body = response.read()
            self.send_response(response.status_code)
            for name, value in response.headers.items():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024

    server = Server(("127.0.0.1", 0), Handler)

    def stop(*_: object) -> None:
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    print(json.dumps({"requests": wire.wire.requests, "refused": wire.wire.rate_limited}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
