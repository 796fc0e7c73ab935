"""The emulator's exec subresource, spoken to by hand over a raw socket (no
WebSocket library): the RFC 6455 handshake, channel-prefixed frames, the
Status on the error channel, and the API server's refusals."""

from __future__ import annotations

import json
import socket
import struct
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from tests.k8s_emulator import Knobs, KubeEmulator
from tests.k8s_emulator import websocket as ws

RFC_KEY, RFC_ACCEPT = "dGhlIHNhbXBsZSBub25jZQ==", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 1.3


def gpu_pod(name: str, gpus: int = 2) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{
        "name": "main", "image": "img",
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


@pytest.fixture
def emu():
    with KubeEmulator(knobs=Knobs(pod_start_seconds=0.01)) as emulator:
        emulator.cluster.create_pod("default", gpu_pod("p"))
        assert emulator.wait_for(
            lambda: emulator.cluster.pods[("default", "p")]["status"]["phase"] == "Running")
        yield emulator


def path(pod: str, script: str, **extra: str) -> str:
    query = [("command", "sh"), ("command", "-c"), ("command", script), ("stdout", "true"),
             ("stderr", "true"), *extra.items()]
    return f"/api/v1/namespaces/default/pods/{pod}/exec?{urlencode(query)}"


def upgrade(emu: KubeEmulator, target: str, protocols: str = "v5.channel.k8s.io"
            ) -> tuple[str, socket.socket]:
    url = urlsplit(emu.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=5)
    sock.sendall((f"GET {target} HTTP/1.1\r\nHost: {url.netloc}\r\n"
                  f"Authorization: Bearer {emu.admin_token}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {RFC_KEY}\r\n"
                  f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {protocols}\r\n\r\n"
                  ).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    return head.decode(), sock


def frames(sock: socket.socket) -> list[tuple[int, bytes]]:
    stream = sock.makefile("rb")
    out = []
    while True:
        first, second = stream.read(2)
        size = second & 0x7F
        if size == 126:
            size = struct.unpack("!H", stream.read(2))[0]
        payload = stream.read(size)
        if first & 0x0F == ws.CLOSE:
            # answer the close, masked as a client must
            sock.sendall(bytes([0x88, 0x82, 1, 2, 3, 4, 0x03 ^ 1, 0xE8 ^ 2]))
            return out
        out.append((payload[0], payload[1:]))


def test_the_handshake_and_frames_follow_rfc_6455_and_the_channel_protocol(emu):
    head, sock = upgrade(emu, path("p", "echo out; echo err >&2; nvidia-smi -L; exit 4"),
                         "v5.channel.k8s.io, v4.channel.k8s.io")
    assert head.startswith("HTTP/1.1 101")
    assert f"Sec-WebSocket-Accept: {RFC_ACCEPT}" in head
    assert "Sec-WebSocket-Protocol: v5.channel.k8s.io" in head
    got = frames(sock)
    assert got[0] == (1, b"out\n") and got[1] == (2, b"err\n")
    assert got[2][0] == 1 and got[2][1].count(b"NVIDIA H100 80GB HBM3") == 2
    channel, raw = got[-1]
    status = json.loads(raw)
    assert channel == 3 and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "4"}]


def test_the_server_picks_the_first_protocol_it_speaks_in_the_clients_order(emu):
    emu.knobs.exec_protocols = ("v4.channel.k8s.io",)
    head, sock = upgrade(emu, path("p", "true"), "v5.channel.k8s.io, v4.channel.k8s.io")
    assert "Sec-WebSocket-Protocol: v4.channel.k8s.io" in head
    assert frames(sock) == [(3, b'{"metadata": {}, "status": "Success"}')]


def test_refusals_are_the_api_servers(emu):
    with httpx.Client(base_url=emu.url,
                      headers={"Authorization": f"Bearer {emu.admin_token}"}) as client:
        plain = client.get(path("p", "true"))
    assert (plain.status_code, plain.json()["message"]) == (400, "Upgrade request required")
    emu.cluster.create_pod("default", gpu_pod("big", gpus=64))  # never schedulable
    head, body = refused(emu, path("big", "true"))
    assert head.startswith("HTTP/1.1 400") and "does not have a host assigned" in body
    head, _ = refused(emu, path("gone", "true"))
    assert head.startswith("HTTP/1.1 404")
    emu.cluster.denied.add(("get", "pods/exec"))  # before 1.35 get was enough: both checked
    head, body = refused(emu, path("p", "true"))
    assert head.startswith("HTTP/1.1 403")
    assert 'cannot get resource "pods/exec"' in json.loads(body)["message"]


def refused(emu: KubeEmulator, target: str) -> tuple[str, str]:
    head, sock = upgrade(emu, target)
    with sock:
        return head, _body(sock)


def _body(sock: socket.socket) -> str:
    sock.settimeout(2)
    data = b""
    try:
        while b"}" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data.decode("utf-8", "replace")
