"""The sandbox counts capacity off an index over machines not yet ended:
no request reads every machine of a type, region or cloud, and
machines still end by time exactly as before (termination, native timer)."""

from __future__ import annotations

import sqlite3

import httpx
import pytest

from gpucloud.providers.sandbox.server import SandboxCloud
from gpucloud.providers.sandbox.server import SandboxTransport
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    BASE,
    Env,
    _no_sandbox_env,
    catalog,
    clock,
)


@pytest.fixture
def statements(monkeypatch):
    seen: list[str] = []
    real = SandboxCloud._connect

    def connect(self):
        db = real(self)
        db.set_trace_callback(seen.append)
        return db

    monkeypatch.setattr(SandboxCloud, "_connect", connect)
    return seen


def plans(cloud: SandboxCloud, sql: list[str]) -> list[str]:
    db = sqlite3.connect(cloud.db_path)
    try:
        return [" | ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + s))
                for s in sql if s.lstrip().upper().startswith("SELECT")]
    finally:
        db.close()


def raw(cloud: SandboxCloud, method: str, path: str, **kw) -> httpx.Response:
    with httpx.Client(transport=SandboxTransport(cloud), base_url=BASE) as http:
        return http.request(method, path, **kw)


def test_creates_types_and_lists_never_scan_the_machines(tmp_path, catalog, clock, statements):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)
    for n in range(5):
        env.create(launch_id=f"L-{n}")
    statements.clear()
    env.create(launch_id="L-last")
    assert raw(env.cloud, "GET", "/v1/instance-types").status_code == 200
    assert len(raw(env.cloud, "GET", "/v1/instances").json()["data"]) == 6
    read = plans(env.cloud, [s for s in statements if "FROM instances" in s])
    assert len(read) >= 3  # the create's count, the types' counts, the listing
    for plan in read:
        assert "SCAN instances" not in plan, plan


def body(name: str, **extra) -> dict:
    return {"instance_type": "sim.1xH100", "region": "sim-east-1", "name": name, **extra}


def left(cloud: SandboxCloud) -> int:
    types = raw(cloud, "GET", "/v1/instance-types").json()["data"]
    return next(t for t in types if t["name"] == "sim.1xH100")["capacity_available"]["sim-east-1"]


@pytest.mark.parametrize("native_timer", [True, False])
def test_capacity_frees_at_the_exact_moment_a_machine_ends(tmp_path, catalog, clock,
                                                           native_timer):
    cloud = SandboxCloud(tmp_path / "c.sqlite", {"capacity": 3, "native_timer": native_timer,
                                                 "terminate_seconds": 10},
                         catalog=catalog, clock=clock)
    t0 = clock.now
    deadline = clock.dt(60).strftime("%Y-%m-%dT%H:%M:%SZ")
    timed = raw(cloud, "POST", "/v1/instances", json=body("timed", shutdown_at=deadline)).json()
    deleted = raw(cloud, "POST", "/v1/instances", json=body("deleted")).json()
    assert left(cloud) == 1
    raw(cloud, "DELETE", f"/v1/instances/{deleted['id']}")
    clock.now = t0 + 10 - 1e-6
    assert left(cloud) == 1  # terminating still holds its slot
    clock.now = t0 + 10
    assert left(cloud) == 2  # terminated at delete + terminate_seconds, not later
    clock.now = t0 + 60 - 1e-6
    assert left(cloud) == 2
    clock.now = t0 + 60
    status = raw(cloud, "GET", f"/v1/instances/{timed['id']}").json()["status"]
    if native_timer:  # the cloud's own timer ended it: its slot is free
        assert status == "terminated" and left(cloud) == 3
    else:  # deadline kept, never acted on
        assert status == "running" and left(cloud) == 2
    clock.now = t0 + 60 + 3600 + 1  # past retention: gone from the list, as before
    listed = {m["id"] for m in raw(cloud, "GET", "/v1/instances").json()["data"]}
    assert deleted["id"] not in listed
    assert (timed["id"] in listed) is not native_timer
