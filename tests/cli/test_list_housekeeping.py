"""Housekeeping: `list` leaves out machines terminated over 10 minutes ago
(--all, --status bring them back) and shows what a terminated one cost, from
the cost ledger; `delete --all` deletes every gpucloud machine still up in
scope after one confirmation, never a machine gpucloud did not make. The SDK
(Client and AsyncClient) has the same: list(all=, status=), delete_all()."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import datetime, timedelta
from decimal import Decimal

import httpx
import pytest

from gpucloud import AsyncClient, Client
from gpucloud.providers.sandbox import SandboxProvider
from gpucloud.providers.sandbox.server import SandboxCloud
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.cli.commands import instance as instance_cmds
from gpucloud.config.settings import sandbox_db_path, state_db_path
from gpucloud.errors import SpecError
from tests.adapters._sandbox_support import Clock
from tests.cli.test_display import create, invoke
from tests.cli.test_narrow_tables import columns, gpucloud

HOUR = 3600.0
VALID = "pending, running, stopping, stopped, terminating, terminated, failed, unknown"


def refs(*args):
    result = invoke("list", "--json", *args)
    assert result.exit_code == 0, result.output
    return {i["ref"] for i in json.loads(result.stdout)["instances"]}


@pytest.fixture
def clock(monkeypatch):
    """One clock for the simulated cloud and for what reads the time here."""
    clock = Clock()
    for module in ("safety.ledger", "core.housekeeping", "core.plan", "safety.budget"):
        monkeypatch.setattr(f"gpucloud.{module}.utcnow", lambda: clock.dt())
    return clock


def on_sandbox(client, clock):
    catalog = load_catalogs()["sandbox"]
    cloud = SandboxCloud(sandbox_db_path(), {"boot_seconds": 0, "terminate_seconds": 0},
                         catalog=catalog, clock=clock)
    client._ctx._adapters["sandbox"] = SandboxProvider(catalog, cloud=cloud)
    return client, cloud


def made_in_a_console(cloud, name):
    """A machine gpucloud did not make: created on the cloud's API without a launch id."""
    answer = cloud.handle(httpx.Request("POST", "https://sandbox.invalid/v1/instances", json={
        "instance_type": "sim.1xH100", "region": "sim-east-1", "name": name}))
    assert answer.status_code == 201, answer.text
    return f"sandbox/{answer.json()['id']}"


def backdate(ref, event, by):
    """Move a ledger row of `ref` back in time, as if that had happened `by` ago."""
    provider, ident = ref.split("/")
    with sqlite3.connect(state_db_path()) as db:
        (at,) = db.execute("SELECT at FROM ledger WHERE provider = ? AND instance_id = ? AND"
                           " event = ?", (provider, ident, event)).fetchone()
        moved = (datetime.fromisoformat(at) - by).isoformat()
        db.execute("UPDATE ledger SET at = ? WHERE provider = ? AND instance_id = ? AND"
                   " event = ?", (moved, provider, ident, event))


# -- the SDK ---------------------------------------------------------------------

def test_list_hides_long_terminated_machines_and_says_what_they_cost(clock):
    client, _ = on_sandbox(Client(providers=["sandbox"], sleep=lambda _s: None), clock)
    kept = client.create(gpu="h100", count=1, name="kept")
    gone = client.create(gpu="h100", count=8, name="gone")
    clock.advance(2 * HOUR)
    client.delete(gone)
    clock.advance(5 * 60)
    listed = {m.ref: m for m in client.list()}
    assert set(listed) == {kept.ref, gone.ref}  # ended 5 minutes ago: still shown
    ended = listed[gone.ref]
    assert ended.status.value == "terminated" and ended.terminated_at == clock.dt(-5 * 60)
    assert gone.price_per_hour is not None
    assert ended.final_cost == (gone.price_per_hour * 2).quantize(Decimal("0.01"))
    assert listed[kept.ref].final_cost is None and listed[kept.ref].terminated_at is None
    clock.advance(6 * 60)  # 11 minutes since it ended
    assert [m.ref for m in client.list()] == [kept.ref]
    assert {m.ref for m in client.list(all=True)} == {kept.ref, gone.ref}
    assert [m.ref for m in client.list(status="terminated")] == [gone.ref]
    for both in ("running,terminated", ["running", "terminated"], [" Running", "terminated"]):
        assert {m.ref for m in client.list(status=both)} == {kept.ref, gone.ref}
    assert client.list(all=True, status="stopped") == []
    with pytest.raises(SpecError) as bad:
        client.list(status="runing")
    assert "'runing'" in bad.value.message and VALID in (bad.value.hint or "")


def test_delete_all_deletes_gpucloud_machines_in_scope_and_never_a_foreign_one(clock):
    client, cloud = on_sandbox(Client(providers=["sandbox"], sleep=lambda _s: None), clock)
    first = client.create(gpu="h100", count=1, name="exp-1")
    second = client.create(gpu="h100", count=1, name="exp-2")
    other = client.create(gpu="h100", count=1, name="keep")
    foreign = made_in_a_console(cloud, "exp-console")
    assert {m.ref for m in client.delete_all(dry_run=True)} == {first.ref, second.ref, other.ref}
    planned = client.delete_all(name_prefix="exp-", dry_run=True)
    assert {m.ref for m in planned} == {first.ref, second.ref}
    assert {m.status.value for m in client.list()} == {"running"}  # a dry run deletes nothing
    deleted = client.delete_all(provider="sandbox", name_prefix="exp-")
    assert {m.ref for m in deleted} == {first.ref, second.ref}
    status = {m.ref: m.status.value for m in client.list()}
    assert status == {first.ref: "terminated", second.ref: "terminated", other.ref: "running",
                      foreign: "running"}
    assert client.delete_all(name_prefix="exp-") == []  # nothing left in scope


def test_the_async_client_has_the_same_methods_and_shapes(clock):
    async def run():
        async with AsyncClient(providers=["sandbox"]) as client:
            on_sandbox(client, clock)
            gone = await client.create(gpu="h100", count=1, name="tmp-a")
            kept = await client.create(gpu="h100", count=1, name="kept")
            clock.advance(HOUR)
            assert [m.ref for m in await client.delete_all(name_prefix="tmp-", dry_run=True)] \
                == [gone.ref]
            assert [m.ref for m in await client.delete_all(name_prefix="tmp-")] == [gone.ref]
            clock.advance(11 * 60)
            shown = [m.ref for m in await client.list()]
            every = {m.ref: m for m in await client.list(all=True)}
            only = [m.ref for m in await client.list(status=["terminated"])]
            return shown, every, only, gone, kept

    shown, every, only, gone, kept = asyncio.run(run())
    assert shown == [kept.ref] and only == [gone.ref] and set(every) == {gone.ref, kept.ref}
    assert every[gone.ref].final_cost == gone.price_per_hour.quantize(Decimal("0.01"))


# -- the CLI -----------------------------------------------------------------------

def test_list_in_a_process_leaves_out_what_ended_long_ago_and_shows_its_cost(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_TERMINATE_SECONDS", "0")
    up = create("--name", "up")
    old = create("--name", "old")  # 1x H100 in the sandbox: $2.49/h
    recent = create("--name", "recent")
    for ref in (old["ref"], recent["ref"]):
        assert invoke("delete", ref, "--yes").exit_code == 0
    backdate(old["ref"], "started", timedelta(hours=2, minutes=11))
    backdate(old["ref"], "terminated", timedelta(minutes=11))
    for width in (80, 120):
        _, rows = columns(gpucloud("list", columns=width).stdout)
        assert {r["REF"].split(" ")[0] for r in rows} == {up["ref"], recent["ref"]}
        _, rows = columns(gpucloud("list", "--all", columns=width).stdout)
        row = {r["REF"].split(" ")[0]: r for r in rows}[old["ref"]]
        assert (row["STATUS"], row["$/HOUR"], row["COST"]) == ("terminated", "-", "$4.98")
    data = json.loads(invoke("list", "--status", "terminated", "--json").stdout)["instances"]
    assert {i["ref"]: i["final_cost"] for i in data} == {old["ref"]: "4.98",
                                                        recent["ref"]: "0.00"}
    assert all(i["terminated_at"].endswith("Z") for i in data)


def test_list_filters_by_status_one_or_a_comma_separated_list():
    running, stopped = create(), create()
    assert invoke("stop", stopped["ref"]).exit_code == 0
    assert refs("--status", "stopped") == {stopped["ref"]}
    assert refs("--status", "running") == {running["ref"]}
    assert refs("--status", "running,stopped") == {running["ref"], stopped["ref"]}
    assert refs("--status", "Running, stopped") == {running["ref"], stopped["ref"]}
    assert refs("--status", "terminated") == set()


def test_an_unknown_status_is_exit_2_with_the_valid_list():
    create()
    result = invoke("list", "--status", "running,bogus")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "unknown status 'bogus'" in result.stderr and VALID in result.stderr
    data = json.loads(invoke("list", "--status", "bogus", "--json").stdout)
    assert data["error"]["exit_code"] == 2 and VALID in data["error"]["hint"]


def test_delete_all_asks_once_listing_every_machine_then_deletes_those(monkeypatch):
    monkeypatch.setattr(instance_cmds, "_interactive", lambda: True)
    a, b = create("--name", "exp-a"), create("--name", "exp-b")
    other = create("--name", "other")
    declined = invoke("delete", "--all", "--name-prefix", "exp-", input="n\n")
    assert declined.exit_code == 8 and refs("--status", "running") >= {a["ref"], b["ref"]}
    result = invoke("delete", "--all", "--name-prefix", "exp-", input="y\n")
    assert result.exit_code == 0, result.output
    assert a["ref"] in result.stderr and b["ref"] in result.stderr
    assert other["ref"] not in result.output
    assert result.stderr.count("Delete these 2 machine(s)?") == 1
    assert sorted(line for line in result.stdout.split("\n") if "deleting" in line) == sorted(
        [f"deleting {a['ref']}", f"deleting {b['ref']}"])
    assert refs("--status", "running") == {other["ref"]}


def test_delete_all_under_json_needs_yes_and_deletes_nothing_without():
    made = create()
    result = invoke("delete", "--all", "--json")
    assert result.exit_code == 8
    assert json.loads(result.stdout)["error"]["code"] == "confirmation_required"
    assert refs("--status", "running") == {made["ref"]}
    done = invoke("delete", "--all", "--provider", "sandbox", "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"deleted": [made["ref"]], "failed": [], "warnings": []}


def test_delete_all_with_nothing_in_scope_says_so_and_exits_0():
    create("--name", "kept")
    result = invoke("delete", "--all", "--name-prefix", "nothing-")
    assert result.exit_code == 0 and "no machines to delete" in result.stderr
    data = invoke("delete", "--all", "--name-prefix", "nothing-", "--json")
    assert data.exit_code == 0 and json.loads(data.stdout)["deleted"] == []


@pytest.mark.parametrize("args", [["delete"], ["delete", "sandbox/sbx-1", "--all"],
                                  ["delete", "sandbox/sbx-1", "--name-prefix", "x"],
                                  ["delete", "sandbox/sbx-1", "--provider", "sandbox"]])
def test_delete_all_and_refs_do_not_mix(args):
    result = invoke(*args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.startswith("error: ") and "hint: " in result.stderr
