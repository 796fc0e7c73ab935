"""The SDK end to end against the simulated cloud: the real operations, driver,
journal and transport; nothing of ours is mocked."""

from datetime import timedelta
from decimal import Decimal

import pytest

from gpucloud import (
    AsyncClient, BudgetExceededError, Client, InsufficientCapacityError, InternalServerError,
    InstanceStatus, WaitTimeoutError,
)
from gpucloud.config.settings import state_db_path
from gpucloud.safety.journal import Journal


def no_sleep(_seconds):
    return None


@pytest.fixture
def client():
    with Client(providers=["sandbox"], sleep=no_sleep) as c:
        yield c


def test_lifecycle_persists_across_clients(client):
    offers = client.offers(gpu="h100", count=8)
    assert offers and all(o.simulated and o.source == "live" for o in offers)
    assert offers == sorted(offers, key=lambda o: o.price_per_hour)

    machine = client.create(gpu="h100", count=8)
    assert machine.ref == f"sandbox/{machine.id}" and machine.simulated
    assert machine.gpu == "H100" and machine.gpu_count == 8
    assert isinstance(machine.price_per_hour, Decimal)

    with Client(providers=["sandbox"], sleep=no_sleep) as other:  # "the next process"
        assert machine.id in {m.id for m in other.list()}
        assert other.wait(machine.ref, until="running", timeout=30).status == InstanceStatus.RUNNING
        other.delete(machine.ref)
    assert client.get(machine).status in (InstanceStatus.TERMINATING, InstanceStatus.TERMINATED)
    record = Journal(state_db_path()).by_instance("sandbox", machine.id)
    assert record.status == "deleted" and record.launch_id == machine.launch_id


def test_auto_shutdown_and_budget(client):
    plan = client.plan(gpu="h100", count=8, auto_shutdown="2h", max_cost=100)
    assert plan.estimate.total == plan.offer.price_per_hour * 2
    assert plan.hours_basis == "auto_shutdown"
    machine = client.create(gpu="h100", count=8, auto_shutdown="2h", max_cost=100)
    assert machine.shutdown_at is not None
    remaining = machine.shutdown_at - machine.created_at
    assert timedelta(hours=1, minutes=59) < remaining <= timedelta(hours=2, seconds=5)


def test_over_budget_creates_nothing(client):
    with pytest.raises(BudgetExceededError) as info:
        client.create(gpu="h100", count=8, auto_shutdown="10h", max_cost=50)
    assert "exceeds --max-cost" in str(info.value)
    assert client.list() == []


def test_max_cost_alone_sets_the_deadline(client):
    plan = client.plan(gpu="h100", count=8, max_cost="39.84")
    assert plan.hours_basis == "max_cost"
    assert plan.estimate.total == Decimal("39.84")
    assert any("spend reaches" in n for n in plan.notes)
    machine = client.create(gpu="h100", count=8, max_cost="39.84")
    hours = Decimal("39.84") / plan.offer.price_per_hour
    expected = timedelta(seconds=int(hours * 3600))
    assert abs((machine.shutdown_at - machine.created_at) - expected) < timedelta(seconds=5)


def test_no_capacity_anywhere(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_EXHAUST", "sim.8xH100")
    with Client(providers=["sandbox"], sleep=no_sleep) as c:
        assert all(o.available is False for o in c.offers(gpu="h100", count=8))
        with pytest.raises(InsufficientCapacityError):
            c.create(gpu="h100", count=8)
        assert c.list() == []


def test_capacity_lost_after_planning_moves_to_the_next_offer(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "1")
    with Client(providers=["sandbox"], sleep=no_sleep) as c:
        plan = c.plan(gpu="h100", count=8)
        rival = c.create(gpu="h100", count=8, region=plan.offer.region)  # takes the last slot
        machine = c.create(gpu="h100", count=8, plan=plan)
        attempts = c.last_attempts
    assert [a.outcome for a in attempts] == ["failed", "created"]
    assert attempts[0].error_code == "no_capacity" and attempts[0].region == plan.offer.region
    assert machine.region != rival.region


def test_ambiguous_failure_is_reconciled_not_retried(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_AFTER_CREATE", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "create")
    with Client(providers=["sandbox"], sleep=no_sleep) as c:
        machine = c.create(gpu="h100", count=8)
        assert [a.outcome for a in c.last_attempts] == ["adopted"]
        machines = c.list()
    assert [m.id for m in machines] == [machine.id]  # exactly one machine, adopted
    assert Journal(state_db_path()).by_instance("sandbox", machine.id).status == "delivered"


def test_5xx_on_create_is_never_resent(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_5XX", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "create")
    with Client(providers=["sandbox"], sleep=no_sleep) as c:
        with pytest.raises(InternalServerError) as info:
            c.create(gpu="h100", count=8)
        assert c.list() == []
    assert len(info.value.attempts) == 1 and info.value.attempts[0].outcome == "failed"
    assert "nothing was retried" in info.value.hint
    [record] = Journal(state_db_path()).all()
    assert record.status == "ambiguous" and record.launch_id in info.value.hint


def test_wait_has_a_deadline(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_BOOT_SECONDS", "3600")
    with Client(providers=["sandbox"], sleep=no_sleep) as c:
        machine = c.create(gpu="h100", count=1)
        with pytest.raises(WaitTimeoutError) as info:
            c.wait(machine, until="running", timeout=30)
    assert "still pending" in str(info.value)


async def test_async_client_lifecycle():
    async with AsyncClient(providers=["sandbox"], sleep=lambda s: _noop()) as c:
        offers = await c.offers(gpu="h100", count=8)
        assert offers[0].simulated
        machine = await c.create(gpu="h100", count=8, auto_shutdown="1h")
        assert (await c.wait(machine, until="running", timeout=30)).status == InstanceStatus.RUNNING
        assert machine.id in {m.id for m in await c.list()}
        await c.delete(machine)
        assert (await c.get(machine)).status in (InstanceStatus.TERMINATING,
                                                 InstanceStatus.TERMINATED)


async def _noop():
    return None


def test_sandbox_is_not_mixed_into_real_price_comparisons():
    with Client(sleep=no_sleep) as c:
        offers = c.offers(gpu="h100", count=8)
    assert offers and not any(o.provider == "sandbox" for o in offers)
    assert {o.source for o in offers} == {"catalog"}


def test_failover_is_bounded(monkeypatch):
    from gpucloud.core import launch as launcher

    monkeypatch.setattr(launcher, "MAX_ATTEMPTS", 2)  # the sandbox has 3 regions
    with Client(providers=["sandbox"], sleep=no_sleep) as c:
        plan = c.plan(gpu="h100", count=1)
    assert len(plan.alternatives) == 2
    monkeypatch.setenv("GPUCLOUD_SANDBOX_EXHAUST", "all")  # capacity gone after planning
    seen = []
    with Client(providers=["sandbox"], sleep=no_sleep, on_attempt=seen.append) as c:
        with pytest.raises(InsufficientCapacityError) as info:
            c.create(gpu="h100", count=1, plan=plan)
        assert c.list() == []
    assert [a.outcome for a in info.value.attempts] == ["failed"] * 2
    assert "gave up after 2 attempts; 1 more offers remain" in info.value.hint
    assert [a.outcome for a in seen] == ["launching", "failed"] * 2
    records = Journal(state_db_path()).all()
    assert len(records) == 2 and {r.status for r in records} == {"failed"}


# -- errors are complete where they are raised ---------------------------------------


def test_a_failed_launch_raises_a_complete_new_error_and_leaves_the_providers_alone(
        monkeypatch):
    """What a create knows (attempts, launch id, hint) is in an error made where
    it is raised, chained to the adapter's, which is not written into."""
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_5XX", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "create")
    with Client(providers=["sandbox"], sleep=no_sleep) as c, \
            pytest.raises(InternalServerError) as info:
        c.create(gpu="h100", count=8)
    raised, cause = info.value, _root_cause(info.value)
    assert isinstance(cause, InternalServerError) and cause is not raised
    assert raised.message == cause.message and raised.status_code == cause.status_code
    assert raised.launch_id and raised.attempts and "nothing was retried" in raised.hint
    assert cause.attempts == [] and cause.launch_id is None and cause.hint != raised.hint


def _root_cause(exc):
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def test_failover_gives_up_with_a_new_error_naming_every_attempt(monkeypatch):
    with Client(providers=["sandbox"], sleep=no_sleep) as c:
        plan = c.plan(gpu="h100", count=1)
    monkeypatch.setenv("GPUCLOUD_SANDBOX_EXHAUST", "all")  # capacity gone after planning
    with Client(providers=["sandbox"], sleep=no_sleep) as c, \
            pytest.raises(InsufficientCapacityError) as info:
        c.create(gpu="h100", count=1, plan=plan)
    cause = _root_cause(info.value)
    assert isinstance(cause, InsufficientCapacityError) and cause.attempts == []
    assert len(info.value.attempts) == 3 and info.value.launch_id == \
        info.value.attempts[-1].launch_id


def test_a_missing_machine_gets_its_hint_on_a_new_error(client):
    from gpucloud import NotFoundError

    with pytest.raises(NotFoundError) as info:
        client.get("sandbox/i-0000000000000000")
    assert "`gpucloud list` shows the machines that exist" in info.value.hint
    assert isinstance(_root_cause(info.value), NotFoundError)
    assert _root_cause(info.value).hint != info.value.hint
