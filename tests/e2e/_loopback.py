"""A small HTTP server on 127.0.0.1 for end-to-end tests of an adapter over a
real socket: the test's ``answer(method, path, query, headers, body)`` gives
(status, JSON or None) for every request. Each request is first rebuilt
against the provider's published host and validated against its OpenAPI
document, so the fake never accepts what the real API would refuse."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests.openapi_check import request_errors

Answer = Callable[[str, str, dict[str, str], dict[str, str], Any], tuple[int, Any]]


@contextmanager
def loopback(answer: Answer, spec: Path, published: str, prefix: str) -> Iterator[Any]:
    """Serve ``answer`` on 127.0.0.1; yields the server (``.url``, ``.sent``,
    ``.violations``). ``published`` is the API's real base (spec servers) and
    ``prefix`` the path part the local base shares with it ("/v1")."""
    sent: list[tuple[str, str]] = []
    violations: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            path, _, query = self.path.partition("?")
            rebuilt = httpx.Request(self.command, published + path[len(prefix):]
                                    + (f"?{query}" if query else ""),
                                    headers=dict(self.headers.items()), content=raw)
            violations.extend(request_errors(spec, rebuilt))
            sent.append((self.command, self.path))
            status, payload = answer(self.command, path, dict(httpx.URL(self.path).params),
                                     dict(self.headers.items()),
                                     json.loads(raw) if raw else None)
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            if payload is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _handle

        def log_message(self, *args: Any) -> None:  # quiet test output
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    server.sent = sent  # type: ignore[attr-defined]
    server.violations = violations  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def point_catalog_at(name: str, base: str) -> None:
    """Write <config dir>/providers/<name>.toml: the bundled file with its
    api_base replaced (a user's catalog file replaces the bundled one whole)."""
    from gpucloud.catalog.bundled import _bundled_dir
    from gpucloud.config.settings import config_dir

    text = (Path(str(_bundled_dir())) / f"{name}.toml").read_text(encoding="utf-8")
    lines = [f"api_base = {json.dumps(base)}" if line.startswith("api_base = ") else line
             for line in text.splitlines()]
    target = config_dir() / "providers" / f"{name}.toml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
