"""Credentials out of what an error keeps: an exception is logged, pickled and
sent to error trackers, so the request it carries is a copy without the
Authorization header, key-like query parameters or a token request's secrets.

A job's secrets (``JobRun.secret_env``) travel in a launch request's body
under names nobody can predict (``HF_TOKEN``, ``WANDB_API_KEY``, or inside a
start-up script). Their *values* are known, though: the launcher registers
them (``register_secrets``) before the request is sent, and an adapter may
also list them in the request's ``SECRETS_EXTENSION``; every copy kept here
has each of them replaced, also inside base64 (cloud-init user data)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:  # httpx is loaded when a request is redacted, not at import
    import httpx

# Header, query and body field names whose values are credentials.
_SECRET_HEADER = re.compile(r"auth|token|secret|key|cookie|password|signature|session", re.I)
_SECRET_FIELD = re.compile(r"secret|token|password|api[-_]?key|authorization|assertion|"
                           r"credential", re.I)
REDACTED = "[redacted]"
# Request extension: a tuple of secret values this request carries (job secrets).
SECRETS_EXTENSION = "gpucloud_secrets"
# Values shorter than this are not scrubbed from text: "1" would mangle everything.
MIN_SECRET = 4
# Shorter values are not looked for inside longer base64 (see secret_forms).
MIN_BASE64_SECRET = 8
_KNOWN: set[str] = set()  # job secret values seen by this process (never written out)


def register_secrets(values: Any) -> None:
    """Remember secret values so that no kept copy of a request or message shows them."""
    for value in values:
        text = value.get_secret_value() if hasattr(value, "get_secret_value") else str(value)
        if len(text) >= MIN_SECRET:
            _KNOWN.add(text)


def scrub(text: str, extra: Any = ()) -> str:
    """`text` with every registered (and `extra`) secret value replaced."""
    for secret in sorted({*_KNOWN, *extra}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def secret_forms(values: Any) -> set[str]:
    """Each secret value (of at least MIN_SECRET characters) as a program may
    print it: itself, its base64 and the base64 of any text that holds it, in
    the standard and the URL-safe alphabets (RFC 4648, sections 4 and 5). A
    task that logs ``Authorization: Basic base64("user:" + token)`` must not
    put the token in the queue's logs in a form anyone can decode.

    base64 turns each 3 bytes into 4 characters, so a secret inside a longer
    text is encoded in one of three ways, by its offset modulo 3. For each,
    the form kept is the part of the encoding made of the secret's bits
    alone: the first characters (mixed with the unknown bytes before it) and
    the last partial one (mixed with those after) are left out, so the form
    is found wherever the secret sits. What remains beside a replaced form
    holds a few bits of the secret, never a whole byte of it.

    A value shorter than MIN_BASE64_SECRET characters has too short an
    encoding to look for inside other text (it would replace parts of
    unrelated base64): it is replaced only as itself and as its own base64,
    with and without the ``=`` padding, not inside longer encodings."""
    import base64

    forms: set[str] = set()
    for value in values:
        text = value.get_secret_value() if hasattr(value, "get_secret_value") else str(value)
        if len(text) < MIN_SECRET:
            continue
        forms.add(text)
        raw = text.encode()
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            whole = encode(raw).decode()
            forms.update((whole, whole.rstrip("=")))
            if len(text) < MIN_BASE64_SECRET:
                continue
            for offset in (0, 1, 2):
                encoded = encode(b"\0" * offset + raw).decode()
                # Character i holds bits 6i..6i+5 of the encoded bytes: the
                # first ones share bits with the `offset` bytes before the
                # secret, the last one may share bits with the byte after it.
                first = -(-8 * offset // 6)
                end = 8 * (offset + len(raw)) // 6
                forms.add(encoded[first:end])
    return forms


def redact_request(request: object) -> httpx.Request | None:
    """A copy of an httpx.Request without credentials in headers, query or body;
    None for anything else (what cannot be cleaned is not kept)."""
    if request is None:
        return None
    import httpx

    if not isinstance(request, httpx.Request):
        return None
    extensions = dict(request.extensions)
    marked = tuple(str(v) for v in extensions.pop(SECRETS_EXTENSION, ()) or ()
                   if len(str(v)) >= MIN_SECRET)
    headers = [(k, REDACTED if _SECRET_HEADER.search(k) else scrub(v, marked))
               for k, v in request.headers.multi_items()
               if k.lower() not in ("content-length", "transfer-encoding")]
    url = request.url
    if url.query:
        url = url.copy_with(params=[(k, REDACTED if _SECRET_FIELD.search(k) else scrub(v, marked))
                                    for k, v in url.params.multi_items()])
    return httpx.Request(request.method, url, headers=headers,
                         content=_redact_body(request, marked), extensions=extensions)


def _redact_body(request: httpx.Request, marked: tuple[str, ...] = ()) -> bytes:
    import json
    from urllib.parse import parse_qsl, urlencode

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
            return urlencode([(k, REDACTED if _SECRET_FIELD.search(k) else _text(v, marked))
                              for k, v in pairs]).encode()
        return json.dumps(_redact_json(json.loads(content), marked)).encode()
    except (ValueError, UnicodeDecodeError, RecursionError):
        return b"[body not kept]"  # not a shape we can clean


def _redact_json(value: Any, marked: tuple[str, ...] = ()) -> Any:
    if isinstance(value, dict):
        return {k: REDACTED if isinstance(k, str) and _SECRET_FIELD.search(k)
                else _redact_json(v, marked) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v, marked) for v in value]
    if isinstance(value, str):
        return _text(value, marked)
    return value


def _text(value: str, marked: tuple[str, ...]) -> str:
    """A string field with secrets replaced; a base64 field (cloud-init user
    data) that decodes to text carrying one is dropped whole."""
    if not _KNOWN and not marked:
        return value
    value = scrub(value, marked)
    if len(value) >= 16 and re.fullmatch(r"[A-Za-z0-9+/=_-]+", value):
        import base64
        import binascii

        try:
            decoded = base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_"
                                       if ("-" in value or "_" in value) else None)
            plain = decoded.decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            return value
        if scrub(plain, marked) != plain:
            return REDACTED
    return value


def redact_url(url: Optional[str]) -> Optional[str]:
    """A URL (Redis, object storage) with its password (and a user-only secret)
    replaced: safe to print."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.password is None and not (parts.username and "@" in parts.netloc
                                       and ":" not in parts.netloc.split("@")[0]):
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    user = parts.username if parts.password is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user or ''}:***@{host}"))
