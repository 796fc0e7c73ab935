"""The sandbox: the simulated cloud (server.py) driven through the adapter and the real driver
(the catalog, offers, and the instance life cycle).

Nothing here touches the network: every request goes through SandboxTransport
to a SandboxCloud over a tmp_path SQLite file, with an injected clock. Shared
helpers and fixtures live in tests/adapters/_sandbox_support.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal

import pytest

from gpucloud.transport.http import Session
from gpucloud.providers.registry import adapter_class
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.sandbox import SandboxProvider
from gpucloud.providers.sandbox.adapter import LAUNCH_LABEL
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.errors import (
    ConflictError,
    InsufficientCapacityError,
    NotFoundError,
)
from gpucloud.models import InstanceStatus
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    BASE,
    Env,
    _no_sandbox_env,
    catalog,
    clock,
    env,
)

# -- catalog ---------------------------------------------------------------------


def test_catalog_file(catalog):
    assert catalog.simulated and catalog.auth == "none" and catalog.kind == "vm"
    assert catalog.api_base == BASE and catalog.default_image == "sandbox-ubuntu-22.04"
    assert catalog.source_url == "simulated" and catalog.as_of == "2026-11-30"
    shapes = {(t.gpu, t.gpu_count) for t in catalog.instance_types}
    for shape in [("H100", 1), ("H100", 2), ("H100", 4), ("H100", 8), ("A100-80GB", 1),
                  ("A100-80GB", 8), ("L40S", 1), ("RTX4090", 1)]:
        assert shape in shapes
    assert catalog.types_named("sim.8xH100")[0].price == Decimal("19.92")
    assert {"sim-east-1", "sim-west-1"} <= set(catalog.regions)
    assert adapter_class("sandbox") is SandboxProvider


# -- offers ------------------------------------------------------------------------


def test_offers_are_live_filtered_and_priced(env):
    offers = env.run(env.provider.offers(OfferQuery(gpu="H100", count=8, region="sim-east-1")))
    assert [(o.instance_type, o.region) for o in offers] == [("sim.8xH100", "sim-east-1")]
    offer = offers[0]
    assert offer.price_per_hour == Decimal("19.92") and isinstance(offer.price_per_hour, Decimal)
    assert offer.source == "live" and offer.simulated and offer.available is True
    assert offer.provider == "sandbox" and offer.gpu_memory_gb == 80
    everything = env.run(env.provider.offers(OfferQuery()))
    assert len(everything) == sum(len(t.regions) for t in env.provider.catalog.instance_types)
    assert everything == sorted(everything, key=lambda o: o.price_per_hour)


def test_spot_offers_are_empty_without_a_request(env):
    assert env.run(env.provider.offers(OfferQuery(spot=True))) == []
    assert list(env.cloud.log) == []


def test_offer_availability_follows_capacity(tmp_path, catalog, clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=1, exhaust="sim.1xL40S")
    env.create("sim.1xH100", "sim-east-1")
    offers = {(o.instance_type, o.region): o.available
              for o in env.run(env.provider.offers(OfferQuery()))}
    assert offers[("sim.1xH100", "sim-east-1")] is False
    assert offers[("sim.1xH100", "sim-west-1")] is True
    assert not any(v for (t, _), v in offers.items() if t == "sim.1xL40S")
    types = env.raw("GET", "/v1/instance-types").json()["data"]
    h100 = next(t for t in types if t["name"] == "sim.1xH100")
    assert h100["capacity_available"]["sim-east-1"] == 0 and h100["price"] == "2.49"


# -- life cycle ------------------------------------------------------------------------


def test_create_pending_then_running(env, clock):
    deadline = clock.dt(3600)
    inst = env.create(launch_id="L-42", disk_gb=100, shutdown_at=deadline)
    assert inst.status is InstanceStatus.PENDING and inst.ip is None
    assert inst.launch_id == "L-42" and inst.name == "gpucloud-L-42" and inst.simulated
    assert inst.gpu == "H100" and inst.gpu_count == 1 and inst.region == "sim-east-1"
    assert inst.price_per_hour == Decimal("2.49") and inst.created_at == clock.dt()
    assert inst.shutdown_at == deadline
    clock.advance(4.9)
    assert env.run(env.provider.get(inst.id)).status is InstanceStatus.PENDING
    clock.advance(0.2)
    running = env.run(env.provider.get(inst.id))
    assert running.status is InstanceStatus.RUNNING and running.ip.startswith("100.64.")
    body = env.raw("GET", f"/v1/instances/{inst.id}").json()
    assert body["labels"] == {LAUNCH_LABEL: "L-42"} and body["simulated"] is True
    assert body["disk_gb"] == 100 and body["image"] == "sandbox-ubuntu-22.04"
    assert env.posts() == [201]


def test_state_persists_across_two_clouds_on_one_file(tmp_path, catalog, clock):
    db = tmp_path / "shared" / "cloud.sqlite"  # parent dirs are created
    first, second = Env(db, catalog, clock), Env(db, catalog, clock)
    inst = first.create(launch_id="L-a")
    seen = second.run(second.provider.list_instances())
    assert [(i.id, i.launch_id) for i in seen] == [(inst.id, "L-a")]
    second.run(second.provider.delete(inst.id))
    assert first.run(first.provider.get(inst.id)).status is InstanceStatus.TERMINATING
    # The constructor the registry uses: db path and knobs as arguments.
    third = SandboxProvider(catalog, db_path=db, knobs={"boot_seconds": 0})
    assert [i.id for i in Session(third).run(third.list_instances())] == [inst.id]


def test_create_in_one_process_list_in_the_next(tmp_path, monkeypatch):
    """The default wiring: GPUCLOUD_SANDBOX_DB, and knobs from GPUCLOUD_HOME/config.toml."""
    home = tmp_path / "client-home"
    home.mkdir()
    (home / "config.toml").write_text("[sandbox]\nboot_seconds = 0\ncapacity = 1\n")
    db = tmp_path / "elsewhere" / "cloud.sqlite"
    monkeypatch.setenv("GPUCLOUD_HOME", str(home))
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", str(db))
    script = (
        "from gpucloud.transport.http import Session\n"
        "from gpucloud.providers.base import OfferQuery\n"
        "from gpucloud.providers.sandbox import SandboxProvider\n"
        "from gpucloud.catalog.bundled import load_catalogs\n"
        "from gpucloud.models import InstanceSpec\n"
        "p = SandboxProvider(load_catalogs()['sandbox'])\n"
        "s = Session(p)\n"
        "o = s.run(p.offers(OfferQuery(gpu='L40S', region='sim-west-1')))[0]\n"
        "print(s.run(p.create(InstanceSpec(offer=o, launch_id='L-proc', name='n'))).id)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    created = done.stdout.strip()
    assert db.is_file()
    provider = SandboxProvider(load_catalogs()["sandbox"])
    session = Session(provider, sleep=lambda s: None)
    [inst] = session.run(provider.list_instances())
    assert (inst.id, inst.launch_id, inst.status) == (created, "L-proc", InstanceStatus.RUNNING)
    # capacity = 1 from config.toml; the env var wins over it.
    assert provider.cloud.knobs.capacity == 1
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "7")
    assert SandboxProvider(load_catalogs()["sandbox"]).cloud.knobs.capacity == 7


def test_delete_terminating_then_terminated_and_capacity_freed(tmp_path, catalog, clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=1, terminate_seconds=3,
              retain_seconds=60)
    inst = env.create()
    env.run(env.provider.delete(inst.id))
    assert env.run(env.provider.get(inst.id)).status is InstanceStatus.TERMINATING
    with pytest.raises(InsufficientCapacityError):  # a terminating machine still holds its slot
        env.create(launch_id="L-2")
    clock.advance(2)
    env.run(env.provider.delete(inst.id))  # idempotent: does not restart the countdown
    clock.advance(1)
    done = env.run(env.provider.get(inst.id))
    assert done.status is InstanceStatus.TERMINATED and done.ip is None
    assert env.create(launch_id="L-2").status is InstanceStatus.PENDING
    clock.advance(61)
    assert [i.launch_id for i in env.run(env.provider.list_instances())] == ["L-2"]
    with pytest.raises(NotFoundError):
        env.run(env.provider.get(inst.id))


def test_shutdown_at_is_enforced_by_the_cloud(env, clock):
    inst = env.create(shutdown_at=clock.dt(60))
    clock.advance(59)
    assert env.run(env.provider.get(inst.id)).status is InstanceStatus.RUNNING
    clock.advance(1)
    assert env.run(env.provider.get(inst.id)).status is InstanceStatus.TERMINATED
    body = env.raw("GET", f"/v1/instances/{inst.id}").json()
    assert body["terminated_at"] == body["shutdown_at"]
    past = env.create(launch_id="L-past", shutdown_at=clock.dt(-1))
    assert past.status is InstanceStatus.TERMINATED


def test_set_shutdown_moves_the_native_timer(env, clock):
    inst = env.create(shutdown_at=clock.dt(60))
    moved = env.run(env.provider.set_shutdown(inst.id, clock.dt(600)))
    assert moved.shutdown_at == clock.dt(600)
    clock.advance(120)
    assert env.run(env.provider.get(inst.id)).status is InstanceStatus.RUNNING
    env.run(env.provider.set_shutdown(inst.id, None))
    clock.advance(10_000)
    assert env.run(env.provider.get(inst.id)).shutdown_at is None
    env.run(env.provider.delete(inst.id))
    clock.advance(10)
    with pytest.raises(ConflictError):
        env.run(env.provider.set_shutdown(inst.id, clock.dt(60)))

