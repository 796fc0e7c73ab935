"""The cost ledger from a real sandbox lifecycle, in-process, on one injected
clock shared by the simulated cloud and gpucloud: create, stop, start,
delete are each a row; the report bills running time only (the sandbox bills
nothing stopped); a listing closes what ended elsewhere and counts a machine
first seen from its creation time."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpucloud import Client, CostReport
from gpucloud.providers.sandbox import SandboxProvider
from gpucloud.providers.sandbox.server import SandboxCloud
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.settings import sandbox_db_path, state_db_path
from gpucloud.safety.ledger import Ledger, Observation
from gpucloud.safety.journal import Journal
from tests.adapters._sandbox_support import Clock

HOUR = 3600.0


@pytest.fixture
def clock(monkeypatch):
    """One clock for the simulated cloud and for every module that reads the time."""
    clock = Clock()
    for module in ("safety.ledger", "safety.costs", "core.plan", "safety.budget"):
        monkeypatch.setattr(f"gpucloud.{module}.utcnow", lambda: clock.dt())
    return clock


def client_on(clock: Clock) -> Client:
    client = Client(providers=["sandbox"], sleep=lambda _s: None)
    catalog = load_catalogs()["sandbox"]
    cloud = SandboxCloud(sandbox_db_path(), {"boot_seconds": 0, "terminate_seconds": 0},
                         catalog=catalog, clock=clock)
    client._ctx._adapters["sandbox"] = SandboxProvider(catalog, cloud=cloud)
    return client


def rows_of(ref: str):
    provider, ident = ref.split("/")
    return [r for r in Ledger(Journal(state_db_path())).rows()
            if (r.provider, r.instance_id) == (provider, ident)]


def test_create_stop_start_delete_are_recorded_and_billed_by_running_time(clock):
    client = client_on(clock)
    machine = client.create(gpu="h100", count=8, auto_shutdown="48h", name="ledgered")
    price = machine.price_per_hour
    assert isinstance(price, Decimal) and price > 0
    clock.advance(1 * HOUR)
    client.stop(machine)
    clock.advance(2 * HOUR)
    client.start(machine)
    clock.advance(0.5 * HOUR)
    client.delete(machine)

    rows = rows_of(machine.ref)
    assert [(r.event, r.source, r.state) for r in rows] == [
        ("started", "launch", "running"), ("stopped", "power", "stopped"),
        ("started", "power", "running"), ("terminated", "delete", "ended")]
    assert [r.at for r in rows] == [clock.dt(-3.5 * HOUR), clock.dt(-2.5 * HOUR),
                                    clock.dt(-0.5 * HOUR), clock.dt()]
    assert rows[0].price_per_hour == price and rows[0].stopped_price_per_hour == 0
    assert rows[0].launch_id == machine.launch_id and rows[0].name == "ledgered"
    assert all(r.price_per_hour == price for r in rows)  # carried forward

    clock.advance(5 * HOUR)  # a terminated machine costs nothing more
    report = client.costs(month=clock.dt().strftime("%Y-%m"))
    assert isinstance(report, CostReport)
    (line,) = report.lines
    assert line.key == machine.ref and line.status == "ended" and line.name == "ledgered"
    assert line.running_hours == Decimal("1.50") and line.stopped_hours == Decimal("2.00")
    assert line.spent == (price * Decimal("1.5")).quantize(Decimal("0.01"))
    assert line.projected == 0 and report.total == line.spent
    print(f"\nledger rows: {len(rows)}; ran 1.5 h of 3.5 h at ${price}/h: spent ${line.spent}")


def test_a_running_machine_is_projected_to_its_deadline(clock):
    client = client_on(clock)
    machine = client.create(gpu="h100", count=8, auto_shutdown="10h")
    clock.advance(4 * HOUR)
    report = client.costs()
    (line,) = report.lines
    price = machine.price_per_hour
    assert line.status == "running" and line.running_hours == Decimal("4.00")
    assert line.spent == (price * 4).quantize(Decimal("0.01"))
    assert line.projected == (price * 6).quantize(Decimal("0.01"))
    assert report.total == line.spent + line.projected


@pytest.mark.parametrize("later", [600.0, 3 * HOUR],
                         ids=["listed-terminated", "no-longer-listed"])
def test_a_listing_closes_a_machine_ended_elsewhere_in_one_write(clock, monkeypatch, later):
    client = client_on(clock)
    kept = client.create(gpu="h100", count=8)
    gone = client.create(gpu="h100", count=8)
    clock.advance(2 * HOUR)
    _delete_behind_the_ledgers_back(client, gone)  # as another computer would
    clock.advance(later)  # the sandbox lists a terminated machine for an hour, then drops it
    listed = {m.id: m.status.value for m in client._run(_raw_list(client))}
    assert listed.get(gone.id) == ("terminated" if later < HOUR else None)
    writes = []
    original = Observation.finish

    def counted(self, listed=()):
        writes.append(listed)
        return original(self, listed)

    # Observed page by page, written once: the listing's one write transaction.
    monkeypatch.setattr(Observation, "finish", counted)
    client.list()
    assert len(writes) == 1  # one batched write for the whole listing
    assert [r.state for r in rows_of(gone.ref)] == ["running", "ended"]
    assert rows_of(gone.ref)[-1].at == clock.dt()  # when the listing saw it: an upper bound
    assert [r.state for r in rows_of(kept.ref)] == ["running"]  # unchanged: nothing written


def _raw_list(client: Client):
    from gpucloud.core.instructions import Call

    result = yield Call("sandbox", client._ctx._adapters["sandbox"].list_instances())
    return result


def _delete_behind_the_ledgers_back(client: Client, machine) -> None:
    """The provider's DELETE alone, as another computer (or the console) sends it."""
    from gpucloud.core.instructions import Call

    def op():
        yield Call("sandbox", client._ctx._adapters["sandbox"].delete(machine.id))
    client._run(op())


def test_a_machine_first_seen_in_a_listing_counts_from_its_creation(clock, tmp_path,
                                                                    monkeypatch):
    client = client_on(clock)
    machine = client.create(gpu="h100", count=8)
    # A second home (another computer, same cloud) has never seen this machine.
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", str(sandbox_db_path()))
    monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path / "second-home"))
    clock.advance(3 * HOUR)
    second = client_on(clock)
    report = second.costs()
    (line,) = report.lines
    assert line.key == machine.ref and line.running_hours == Decimal("3.00")
    assert rows_of(machine.ref)[0].event == "first_seen"


def test_a_broken_ledger_never_hides_a_machine(clock):
    client = client_on(clock)
    machine = client.create(gpu="h100", count=8)
    with Journal(state_db_path())._db() as db:
        db.execute("DROP TABLE ledger")
        db.execute("CREATE TABLE ledger (nonsense TEXT)")  # wrong shape: every write fails
    assert [m.ref for m in client.list()] == [machine.ref]
    assert any("cost ledger" in w for w in client.warnings)
    client.stop(machine)
    client.delete(machine)
    assert client.get(machine).status.value in ("terminating", "terminated")


def test_the_async_client_reports_the_same(clock):
    import asyncio

    from gpucloud import AsyncClient

    client = client_on(clock)
    machine = client.create(gpu="h100", count=8, auto_shutdown="2h")
    clock.advance(1 * HOUR)

    async def report():
        async with AsyncClient(providers=["sandbox"]) as other:
            other._ctx._adapters["sandbox"] = client._ctx._adapters["sandbox"]
            return await other.costs(by="provider")

    sync, concurrent = client.costs(by="provider"), asyncio.run(report())
    assert concurrent.lines == sync.lines and sync.lines[0].instances == (machine.ref,)
