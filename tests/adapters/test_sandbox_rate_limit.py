"""The sandbox's RATE_LIMIT and DROP_AFTER_CREATE knobs (transport.py): the
simulated cloud refuses requests over its rate with 429 + Retry-After, the
sandbox adapter declares the same rate so clients pace to it (shared by every
client in the process), and a create can be committed and then lose its
answer to a dropped connection.

The pacing tests run in real time at small scale (a few seconds): the limit
is the cloud's, on the real clock, as a benchmark would see it."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

from gpucloud import AsyncClient, Client
from gpucloud.providers.sandbox import SandboxProvider
from gpucloud.providers.sandbox.knobs import Knobs
from gpucloud.providers.sandbox.transport import wire_of
from gpucloud.config.settings import sandbox_db_path
from gpucloud.errors import ConfigurationError
from gpucloud.transport.ratelimit import RateLimit
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    Env,
    _no_sandbox_env,
    catalog,
    clock,
)

# -- knobs --------------------------------------------------------------------------------


def test_knobs_parse_and_check():
    knobs = Knobs.load(environ={"GPUCLOUD_SANDBOX_RATE_LIMIT": "50",
                                "GPUCLOUD_SANDBOX_DROP_AFTER_CREATE": "0.25"})
    assert (knobs.rate_limit, knobs.drop_after_create) == (50.0, 0.25)
    assert (Knobs().rate_limit, Knobs().drop_after_create) == (0.0, 0.0)
    with pytest.raises(ConfigurationError, match="probability"):
        Knobs.load({"drop_after_create": 2})
    with pytest.raises(ConfigurationError, match=">= 0"):
        Knobs.load({"rate_limit": -1})


def test_the_adapter_declares_the_clouds_rate(tmp_path, catalog, clock):
    limited = Env(tmp_path / "a.sqlite", catalog, clock, rate_limit=50)
    # A tenth of the second's worth the cloud's bucket holds, at least one.
    assert limited.provider.limits() == {"*": RateLimit(50.0, burst=5)}
    assert Env(tmp_path / "c.sqlite", catalog, clock,
               rate_limit=2).provider.limits() == {"*": RateLimit(2.0)}
    assert Env(tmp_path / "b.sqlite", catalog, clock).provider.limits() == {}
    # Two sandboxes (two databases) are two accounts: two budgets.
    assert limited.provider.rate_scope() != Env(
        tmp_path / "b.sqlite", catalog, clock).provider.rate_scope()


# -- the cloud's side ---------------------------------------------------------------------


def test_over_the_rate_the_cloud_answers_429_with_retry_after(tmp_path, catalog, clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, rate_limit=5)
    statuses = [env.raw("GET", "/v1/instances").status_code for _ in range(5)]
    assert statuses == [200] * 5  # one second's worth passes at once
    refused = env.raw("GET", "/v1/instances")
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    assert refused.json()["error"]["code"] == "rate_limited"
    # A refused create is refused before the server sees it: nothing is made.
    body = {"instance_type": "sim.1xH100", "region": "sim-east-1", "name": "x",
            "labels": {"gpucloud-launch-id": "L-over"}}
    assert env.raw("POST", "/v1/instances", json=body).status_code == 429
    assert env.cloud.handle(httpx.Request(
        "GET", "https://sandbox.gpucloud.invalid/v1/instances")).json() == {"data": []}
    assert wire_of(env.cloud).rate_limited == 2


def test_a_dropped_connection_after_commit_leaves_the_machine(tmp_path, catalog, clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, drop_after_create=1)
    body = {"instance_type": "sim.1xH100", "region": "sim-east-1", "name": "x",
            "labels": {"gpucloud-launch-id": "L-drop"}}
    with pytest.raises(httpx.RemoteProtocolError, match="disconnected"):
        env.raw("POST", "/v1/instances", json=body)
    [made] = env.raw("GET", "/v1/instances").json()["data"]
    assert made["labels"]["gpucloud-launch-id"] == "L-drop"
    assert wire_of(env.cloud).dropped == 1


def test_client_create_resolves_a_dropped_create_by_launch_id(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DROP_AFTER_CREATE", "1")
    client = Client(providers=["sandbox"], sleep=lambda _s: None)
    machine = client.create(gpu="h100", count=1)
    listed = [m for m in client.list() if m.launch_id == machine.launch_id]
    assert [m.id for m in listed] == [machine.id]  # found, not created twice


# -- clients pace to it, together ---------------------------------------------------------

RATE, PER_CLIENT = 20, 25  # 50 requests: 2.45 s at 20/s; one second's burst is 20


def cloud_wire():
    return wire_of(SimpleNamespace(db_path=sandbox_db_path(), knobs=Knobs.load()))


def test_two_clients_in_threads_share_the_clouds_budget(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_RATE_LIMIT", str(RATE))
    clients = [Client(providers=["sandbox"]) for _ in range(2)]
    clients[0].list()  # opens the cloud; its request counts below
    started = time.monotonic()
    threads = [threading.Thread(target=lambda c=c: [c.list() for _ in range(PER_CLIENT)])
               for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    elapsed = time.monotonic() - started
    assert cloud_wire().rate_limited == 0
    # Paced to one budget: each client alone at 20/s would take half as long.
    assert elapsed >= 0.95 * 2 * PER_CLIENT / RATE


def test_async_clients_under_gather_share_the_clouds_budget(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_RATE_LIMIT", str(RATE))

    async def main() -> float:
        clients = [AsyncClient(providers=["sandbox"]) for _ in range(2)]
        await clients[0].list()
        started = time.monotonic()
        await asyncio.gather(*(c.list() for c in clients for _ in range(PER_CLIENT)))
        elapsed = time.monotonic() - started
        for c in clients:
            await c.aclose()
        return elapsed

    elapsed = asyncio.run(main())
    assert cloud_wire().rate_limited == 0
    assert elapsed >= 0.95 * 2 * PER_CLIENT / RATE


def test_a_429_storm_slows_every_client(monkeypatch):
    """The clients believe the cloud allows twice what it does: the first 429s
    pause both clients and cut the shared rate, so the storm stays short."""
    monkeypatch.setenv("GPUCLOUD_SANDBOX_RATE_LIMIT", str(RATE))
    monkeypatch.setattr(SandboxProvider, "limits",
                        lambda self: {"*": RateLimit(2.0 * self.cloud.knobs.rate_limit)})
    clients = [Client(providers=["sandbox"]) for _ in range(2)]
    threads = [threading.Thread(target=lambda c=c: [c.list() for _ in range(PER_CLIENT)])
               for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    refused = cloud_wire().rate_limited
    limiter = clients[0]._runner.session("sandbox").limiter
    assert limiter is clients[1]._runner.session("sandbox").limiter
    assert refused >= 1 and limiter.factor < 1.0
    assert refused <= 2 * PER_CLIENT // 5, f"{refused} 429s for {2 * PER_CLIENT} requests"
