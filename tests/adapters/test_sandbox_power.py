"""The sandbox stops and starts machines like RunPod and Vast.ai do: a stopped
machine keeps its disk, has no IP, and is not billed in the simulation."""

from __future__ import annotations

import sqlite3
from decimal import Decimal

import pytest

from gpucloud.providers.sandbox.server import SandboxCloud
from gpucloud.errors import ConflictError
from gpucloud.models import InstanceStatus
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    Env,
    _no_sandbox_env,
    catalog,
    clock,
    env,
)


def test_capability_is_declared(env):
    assert env.provider.capabilities.stop_start is True


def test_stop_then_start(env, clock):
    made = env.create()
    clock.advance(10)
    stopped = env.run(env.provider.stop(made.id))
    assert stopped.status == InstanceStatus.STOPPED and stopped.ip is None
    assert env.run(env.provider.stop(made.id)).status == InstanceStatus.STOPPED  # idempotent
    started = env.run(env.provider.start(made.id))
    assert started.status == InstanceStatus.PENDING  # boots again
    clock.advance(5)
    assert env.run(env.provider.get(made.id)).status == InstanceStatus.RUNNING


def test_a_stopped_machine_is_not_billed(env, clock):
    made = env.create()  # sim.1xH100
    price = Decimal(str(env.raw("GET", f"/v1/instances/{made.id}").json()["price_per_hour"]))
    clock.advance(3600)
    env.run(env.provider.stop(made.id))
    clock.advance(7200)  # two hours stopped: nothing billed
    body = env.raw("GET", f"/v1/instances/{made.id}").json()
    assert body["billed_seconds"] == 3600
    assert Decimal(body["cost_so_far"]) == price
    env.run(env.provider.start(made.id))
    clock.advance(1800)
    body = env.raw("GET", f"/v1/instances/{made.id}").json()
    assert body["billed_seconds"] == 5400 and Decimal(body["cost_so_far"]) == price * 3 / 2


def test_stopped_machines_can_be_deleted_but_ended_ones_not_started(env, clock):
    made = env.create()
    env.run(env.provider.stop(made.id))
    env.run(env.provider.delete(made.id))
    clock.advance(10)
    with pytest.raises(ConflictError):
        env.run(env.provider.start(made.id))


def test_a_database_from_before_stop_start_is_upgraded(tmp_path, catalog):
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as conn:  # the first release's table, without stopped_*
        conn.execute(
            "CREATE TABLE instances (id TEXT PRIMARY KEY, name TEXT NOT NULL, instance_type TEXT"
            " NOT NULL, region TEXT NOT NULL, gpu TEXT NOT NULL, gpu_count INTEGER NOT NULL,"
            " price TEXT NOT NULL, image TEXT, disk_gb INTEGER, ssh_public_key TEXT, labels TEXT"
            " NOT NULL, created_us INTEGER NOT NULL, ready_us INTEGER NOT NULL, shutdown_us"
            " INTEGER, deleted_us INTEGER, terminated_us INTEGER)")
    SandboxCloud(db, {}, catalog=catalog)
    with sqlite3.connect(db) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(instances)")}
    assert {"stopped_us", "stopped_total_us"} <= columns
