"""The server side of a WebSocket (RFC 6455), just what the exec subresource
needs: the upgrade handshake, unmasked binary frames out, and reading the
client's masked frames until its close. Written by hand, not with the client
library gpucloud uses, so the tests check gpucloud's handshake against an
independent reading of the RFC."""

from __future__ import annotations

import base64
import hashlib
import struct
from typing import BinaryIO

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
BINARY, CLOSE = 0x2, 0x8


def is_upgrade(headers: dict[str, str]) -> bool:
    return (headers.get("upgrade", "").lower() == "websocket"
            and "upgrade" in headers.get("connection", "").lower())


def handshake_problem(headers: dict[str, str]) -> str | None:
    if headers.get("sec-websocket-version") != "13":
        return "unsupported WebSocket version (13 is needed)"
    key = headers.get("sec-websocket-key", "")
    try:
        if len(base64.b64decode(key, validate=True)) != 16:
            raise ValueError
    except ValueError:
        return "bad Sec-WebSocket-Key"
    return None


def offered(headers: dict[str, str]) -> list[str]:
    return [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p.strip()]


def accept_headers(key: str, protocol: str) -> list[tuple[str, str]]:
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    return [("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Accept", accept), ("Sec-WebSocket-Protocol", protocol)]


def frame(opcode: int, payload: bytes) -> bytes:
    """A final, unmasked frame (a server never masks)."""
    head = bytes([0x80 | opcode])
    size = len(payload)
    if size < 126:
        head += bytes([size])
    elif size < 1 << 16:
        head += bytes([126]) + struct.pack("!H", size)
    else:
        head += bytes([127]) + struct.pack("!Q", size)
    return head + payload


def close_frame(code: int = 1000) -> bytes:
    return frame(CLOSE, struct.pack("!H", code))


def read_frame(stream: BinaryIO) -> tuple[int, bytes] | None:
    """(opcode, payload) of the client's next frame; None at EOF. Client
    frames must be masked (RFC 6455 5.1)."""
    head = stream.read(2)
    if len(head) < 2:
        return None
    opcode, size = head[0] & 0x0F, head[1] & 0x7F
    if not head[1] & 0x80:
        raise ValueError("client frame not masked")
    if size == 126:
        size = struct.unpack("!H", stream.read(2))[0]
    elif size == 127:
        size = struct.unpack("!Q", stream.read(8))[0]
    mask = stream.read(4)
    data = stream.read(size)
    return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(data))
