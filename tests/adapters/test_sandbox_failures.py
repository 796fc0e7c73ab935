"""The sandbox: the simulated cloud (server.py) driven through the adapter and the real driver
(errors, injected failures, knobs, the transport, and the async driver).

Nothing here touches the network: every request goes through SandboxTransport
to a SandboxCloud over a tmp_path SQLite file, with an injected clock. Shared
helpers and fixtures live in tests/adapters/_sandbox_support.py.
"""

from __future__ import annotations

import random
import threading
import time

import httpx
import pytest

from gpucloud.transport.http import AsyncSession
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.sandbox import SandboxProvider
from gpucloud.providers.sandbox.adapter import LAUNCH_LABEL
from gpucloud.providers.sandbox.knobs import Knobs
from gpucloud.providers.sandbox.server import SandboxCloud
from gpucloud.providers.sandbox.server import SandboxTransport
from gpucloud.errors import (
    APIStatusError,
    BadRequestError,
    ConfigurationError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
)
from gpucloud.models import InstanceSpec, InstanceStatus
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    BASE,
    Env,
    _no_sandbox_env,
    catalog,
    clock,
    env,
)

# -- errors ---------------------------------------------------------------------------


def test_unknown_id_is_not_found(env):
    with pytest.raises(NotFoundError) as info:
        env.run(env.provider.get("sbx-nope"))
    assert info.value.provider_code == "not_found" and info.value.status_code == 404
    assert info.value.request_id.startswith("req_")
    with pytest.raises(NotFoundError):
        env.run(env.provider.delete("sbx-nope"))


def test_capacity_exhaustion_creates_nothing(tmp_path, catalog, clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=2)
    env.create(launch_id="a")
    env.create(launch_id="b")
    with pytest.raises(InsufficientCapacityError) as info:
        env.create(launch_id="c")
    assert info.value.status_code == 409 and info.value.provider_code == "capacity_exhausted"
    assert "GPUCLOUD_SANDBOX_CAPACITY" in info.value.hint
    assert [i.launch_id for i in env.run(env.provider.list_instances())] == ["a", "b"]
    assert env.create("sim.1xH100", "sim-west-1", launch_id="d")  # other regions unaffected


@pytest.mark.parametrize("exhaust", ["sim.8xH100", "sim.1xL40S,sim.8xH100", "all"])
def test_exhaust_knob(tmp_path, catalog, clock, exhaust):
    env = Env(tmp_path / "c.sqlite", catalog, clock, exhaust=exhaust)
    with pytest.raises(InsufficientCapacityError):
        env.create("sim.8xH100")
    assert env.raw("GET", "/v1/instances").json() == {"data": []}


def test_concurrent_creates_never_oversell(tmp_path, catalog, clock, monkeypatch):
    """Separate cloud objects and connections on one file, as two processes would be."""
    db = tmp_path / "c.sqlite"
    count = SandboxCloud._capacity_left

    def slow_count(self, *args, **kwargs):  # widens the window between counting and inserting
        left = count(self, *args, **kwargs)
        time.sleep(0.003)
        return left

    monkeypatch.setattr(SandboxCloud, "_capacity_left", slow_count)
    clouds = [Env(db, catalog, clock, capacity=3) for _ in range(4)]
    start = threading.Barrier(len(clouds))
    results: list[int] = []

    def worker(env: Env) -> None:
        start.wait()
        for i in range(3):
            body = {"instance_type": "sim.1xH100", "region": "sim-east-1", "name": f"w{i}"}
            results.append(env.raw("POST", "/v1/instances", json=body).status_code)

    threads = [threading.Thread(target=worker, args=(c,)) for c in clouds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [201] * 3 + [409] * 9
    assert len(clouds[0].raw("GET", "/v1/instances").json()["data"]) == 3


def test_invalid_requests(env):
    bad = env.raw("POST", "/v1/instances", json={"instance_type": "sim.1xH100"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    extra = {"instance_type": "sim.1xH100", "region": "sim-east-1", "name": "x", "gpus": 8}
    assert env.raw("POST", "/v1/instances", json=extra).status_code == 422
    naive = {"instance_type": "sim.1xH100", "region": "sim-east-1", "name": "x",
             "shutdown_at": "2030-01-01T00:00:00"}  # no offset: refused, not guessed
    assert env.raw("POST", "/v1/instances", json=naive).status_code == 422
    assert env.raw("POST", "/v1/instances", content=b"{nope").status_code == 422
    unknown = {"instance_type": "sim.1xB200", "region": "sim-east-1", "name": "x"}
    response = env.raw("POST", "/v1/instances", json=unknown)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_request"
    assert env.raw("GET", "/v2/instances").status_code == 404
    assert env.raw("PUT", "/v1/instances").status_code == 405
    assert all(r[2] >= 400 for r in env.cloud.log)
    assert env.raw("GET", "/v1/instances").headers["x-request-id"].startswith("req_")
    offer = env.offer("sim.4xH100", "sim-west-1")
    wrong_region = offer.model_copy(update={"region": "sim-eu-1"})
    with pytest.raises(BadRequestError) as info:
        env.run(env.provider.create(InstanceSpec(offer=wrong_region, launch_id="x", name="x")))
    assert info.value.status_code == 400 and "sim-eu-1" in info.value.message


@pytest.mark.parametrize("status, body, cls, code", [
    (409, {"error": {"code": "capacity_exhausted", "message": "m"}}, InsufficientCapacityError,
     "capacity_exhausted"),
    (404, {"error": {"code": "not_found", "message": "m"}}, NotFoundError, "not_found"),
    (422, {"error": {"code": "invalid_request", "message": "m"}}, BadRequestError,
     "invalid_request"),
    (429, {"error": {"code": "rate_limited", "message": "m"}}, RateLimitError, "rate_limited"),
    (503, {"error": {"code": "unavailable", "message": "m"}}, InternalServerError, "unavailable"),
    (500, None, InternalServerError, None),
    (418, {"error": {"code": "teapot", "message": "m"}}, APIStatusError, "teapot"),
])
def test_map_error(env, status, body, cls, code):
    request = httpx.Request("GET", BASE + "/v1/instances")
    response = httpx.Response(status, json=body, request=request,
                              headers={"X-Request-Id": "req_1", "Retry-After": "1"})
    if body is None:
        response = httpx.Response(status, content=b"<html>oops</html>", request=request)
    err = env.provider.map_error(response)
    assert type(err) is cls and err.provider_code == code and err.status_code == status
    assert err.provider == "sandbox"
    if cls is RateLimitError:
        assert err.retry_after == 1.0


# -- injected failures -------------------------------------------------------------------


def _seed_where(p: float, outcomes: list[bool]) -> int:
    """A seed whose dice fall below p exactly where ``outcomes`` says (one die per request)."""
    for seed in range(10_000):
        rng = random.Random(seed)
        if [rng.random() < p for _ in outcomes] == outcomes:
            return seed
    raise AssertionError("no seed found")


def test_429_is_retried_after_retry_after_and_creates_once(tmp_path, catalog, clock):
    seed = _seed_where(0.5, [True, True, False])
    env = Env(tmp_path / "c.sqlite", catalog, clock, fail_429=0.5, seed=seed, fail_on="create")
    inst = env.create(launch_id="L-r")
    assert env.posts() == [429, 429, 201]
    assert env.sleeps == [1.0, 1.0]  # Retry-After: 1, honoured by the driver
    assert [i.id for i in env.run(env.provider.list_instances())] == [inst.id]


def test_429_forever_surfaces_rate_limit_and_creates_nothing(tmp_path, catalog, clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, fail_429=1, fail_on="create")
    with pytest.raises(RateLimitError):
        env.create()
    assert env.posts() == [429] * 5  # the driver's 4 retries
    assert env.run(env.provider.list_instances()) == []


def test_same_seed_same_failures(tmp_path, catalog, clock):
    def statuses(name: str) -> list[int]:
        env = Env(tmp_path / name, catalog, clock, fail_429=0.3, fail_5xx=0.3, seed=7)
        return [env.raw("GET", "/v1/instances").status_code for _ in range(30)]

    first = statuses("a.sqlite")
    assert first == statuses("b.sqlite")
    assert {200, 429, 503} == set(first)


def test_5xx_on_create_is_not_retried_and_creates_nothing(tmp_path, catalog, clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, fail_5xx=1, fail_on="create")
    with pytest.raises(InternalServerError) as info:
        env.create(launch_id="L-5")
    assert info.value.status_code == 503 and info.value.provider_code == "unavailable"
    assert env.posts() == [503]  # a launch is sent once
    assert env.run(env.provider.list_instances()) == []


def test_5xx_on_reads_is_retried(tmp_path, catalog, clock):
    seed = _seed_where(0.5, [True, False])
    env = Env(tmp_path / "c.sqlite", catalog, clock, fail_5xx=0.5, seed=seed, fail_on="list")
    assert env.run(env.provider.list_instances()) == []
    assert [s for m, p, s in env.cloud.log] == [503, 200]


def test_fail_after_create_leaves_a_machine_to_reconcile(tmp_path, catalog, clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, fail_after_create=1)
    with pytest.raises(InternalServerError):
        env.create(launch_id="L-amb")
    assert env.posts() == [503]
    [inst] = env.run(env.provider.list_instances())
    assert inst.launch_id == "L-amb" and inst.status is InstanceStatus.PENDING
    found = env.raw("GET", "/v1/instances", params={"label": f"{LAUNCH_LABEL}=L-amb"})
    assert [i["id"] for i in found.json()["data"]] == [inst.id]
    other = env.raw("GET", "/v1/instances", params={"label": f"{LAUNCH_LABEL}=L-other"})
    assert other.json()["data"] == []


# -- knobs, transport, async -----------------------------------------------------------------


def test_knobs_env_wins_and_bad_values_are_refused():
    knobs = Knobs.load({"capacity": 2, "BOOT_SECONDS": 0.5, "exhaust": ["a", "b"]},
                       environ={"GPUCLOUD_SANDBOX_CAPACITY": "9", "GPUCLOUD_SANDBOX_SEED": "3"})
    assert (knobs.capacity, knobs.boot_seconds, knobs.seed) == (9, 0.5, 3)
    assert knobs.exhaust == {"a", "b"} and knobs.fail_on == {"types", "list", "list_more", "get",
                                                              "create", "update", "delete"}
    assert Knobs.load({}, environ={}) == Knobs()
    for config, environ in [({"fail_429": 2}, {}), ({}, {"GPUCLOUD_SANDBOX_CAPACITY": "many"}),
                        ({"capacty": 3}, {}), ({"fail_on": "create,boot"}, {}),
                        ({"boot_seconds": -1}, {}), ({"capacity": True}, {})]:
        with pytest.raises(ConfigurationError):
            Knobs.load(config, environ=environ)


def test_latency_is_simulated_by_the_transport(tmp_path, catalog, clock):
    cloud = SandboxCloud(tmp_path / "c.sqlite", {"latency_ms": 250}, catalog=catalog, clock=clock)
    slept: list[float] = []
    with httpx.Client(transport=SandboxTransport(cloud, sleep=slept.append), base_url=BASE) as c:
        assert c.get("/v1/instance-types").status_code == 200
    assert slept == [0.25]


def test_requests_never_leave_the_process(env):
    assert env.provider.base_url.endswith(".invalid")
    assert env.provider.auth() is None
    assert isinstance(env.provider.transport(), SandboxTransport)
    assert env.provider.capabilities.native_shutdown and not env.provider.capabilities.spot


async def test_async_driver_path(tmp_path, catalog, clock):
    cloud = SandboxCloud(tmp_path / "c.sqlite", {"boot_seconds": 0, "terminate_seconds": 0,
                                                 "fail_429": 0.5, "seed": 1}, catalog=catalog,
                         clock=clock)
    provider = SandboxProvider(catalog, cloud=cloud)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    session = AsyncSession(provider, sleep=sleep)
    try:
        [offer] = await session.run(provider.offers(OfferQuery(gpu="RTX4090", region="sim-west-1")))
        inst = await session.run(provider.create(
            InstanceSpec(offer=offer, launch_id="L-async", name="a")))
        assert inst.status is InstanceStatus.RUNNING and inst.launch_id == "L-async"
        assert [i.id for i in await session.run(provider.list_instances())] == [inst.id]
        await session.run(provider.delete(inst.id))
        assert (await session.run(provider.get(inst.id))).status is InstanceStatus.TERMINATED
    finally:
        await session.aclose()
    assert 429 in [s for m, p, s in cloud.log] and slept  # the async driver retried too
    assert [s for m, p, s in cloud.log].count(201) == 1
