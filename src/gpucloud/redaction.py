"""Credentials out of what an error keeps: an exception is logged, pickled and
sent to error trackers, so the request it carries is a copy without the
Authorization header, key-like query parameters or a token request's secrets."""

from __future__ import annotations

import re
from typing import Any

import httpx

# Header, query and body field names whose values are credentials.
_SECRET_HEADER = re.compile(r"auth|token|secret|key|cookie|password|signature|session", re.I)
_SECRET_FIELD = re.compile(r"secret|token|password|api[-_]?key|authorization|assertion|"
                           r"credential", re.I)
REDACTED = "[redacted]"
# Set on a request whose body holds secrets in fields no name gives away (a
# Kubernetes Job's env values): an error keeps none of its body.
SECRET_BODY_EXTENSION = "gpucloud_secret_body"


def redact_request(request: object) -> httpx.Request | None:
    """A copy of an httpx.Request without credentials in headers, query or body;
    None for anything else (what cannot be cleaned is not kept)."""
    if request is None:
        return None
    if not isinstance(request, httpx.Request):
        return None
    headers = [(k, REDACTED if _SECRET_HEADER.search(k) else v)
               for k, v in request.headers.multi_items()
               if k.lower() not in ("content-length", "transfer-encoding")]
    url = request.url
    if url.query:
        url = url.copy_with(params=[(k, REDACTED if _SECRET_FIELD.search(k) else v)
                                    for k, v in url.params.multi_items()])
    return httpx.Request(request.method, url, headers=headers, content=_redact_body(request),
                         extensions=dict(request.extensions))


def _redact_body(request: httpx.Request) -> bytes:
    import json
    from urllib.parse import parse_qsl, urlencode

    if request.extensions.get(SECRET_BODY_EXTENSION):
        return b"[body not kept: it holds secrets]"
    try:
        content: bytes = request.content
    except Exception:  # noqa: BLE001 - a streamed body was never read: keep none
        return b""
    if not content:
        return b""
    kind = request.headers.get("content-type", "")
    try:
        if "form-urlencoded" in kind:
            pairs = parse_qsl(content.decode(), keep_blank_values=True, strict_parsing=True)
            return urlencode([(k, REDACTED if _SECRET_FIELD.search(k) else v)
                              for k, v in pairs]).encode()
        return json.dumps(_redact_json(json.loads(content))).encode()
    except (ValueError, UnicodeDecodeError, RecursionError):
        return b"[body not kept]"  # not a shape we can clean


def _redact_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: REDACTED if isinstance(k, str) and _SECRET_FIELD.search(k)
                else _redact_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v) for v in value]
    return value
