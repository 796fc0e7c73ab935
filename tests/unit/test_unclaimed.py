"""Unclaimed machines: gpucloud's launch id on them, no launch of this journal
behind them (another computer's crash, a deleted home). `reconcile` lists them
with their age and cost so far when asked and deletes them only when asked;
`reap` reports them and never ends one for that; a machine without the mark,
or with a look-alike of it, is never among them.

"Another computer" is another GPUCLOUD_HOME (its own journal) on the same
simulated cloud, as two laptops share one provider account."""

from __future__ import annotations

import asyncio
import copy
import json
import sqlite3
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import respx

from gpucloud import AsyncClient, Client, Instance
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.settings import sandbox_db_path
from gpucloud.providers.sandbox.adapter import LAUNCH_LABEL
from gpucloud.providers.sandbox.server import SandboxCloud, SandboxTransport
from gpucloud.safety import unclaimed as unclaimed_mod
from tests.unit._reconcile_support import crashed, create, live

US = 1_000_000


@pytest.fixture(autouse=True)
def shared_cloud(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", str(tmp_path / "cloud" / "cloud.sqlite"))
    monkeypatch.setenv("GPUCLOUD_SANDBOX_NATIVE_TIMER", "0")


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """Launch from another computer's home, then come back to this one."""
    here = tmp_path / "gpucloud-home"

    def launch(**kwargs: object) -> Instance:
        monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path / "other-laptop"))
        try:
            return create(**kwargs)
        finally:
            monkeypatch.setenv("GPUCLOUD_HOME", str(here))
    return launch


def made_hours_ago(machine: Instance, hours: float) -> None:
    db = sqlite3.connect(sandbox_db_path())
    with db:
        db.execute("UPDATE instances SET created_us = created_us - ?, ready_us = ready_us - ? "
                   "WHERE id = ?", (int(hours * 3600 * US), int(hours * 3600 * US), machine.id))
    db.close()


def labelled(label: str | None) -> str:
    """A machine made through the simulated cloud's API, as anyone with the
    account could make one: this launch-id label, or none at all."""
    cloud = SandboxCloud(sandbox_db_path(), {}, catalog=load_catalogs()["sandbox"])
    labels = {} if label is None else {LAUNCH_LABEL: label}
    with httpx.Client(transport=SandboxTransport(cloud),
                      base_url="https://sandbox.gpucloud.invalid") as http:
        response = http.post("/v1/instances", json={
            "instance_type": "sim.8xH100", "region": "sim-east-1", "name": "someone-else",
            "labels": labels})
    assert response.status_code == 201, response.text
    return f"sandbox/{response.json()['id']}"


def test_another_computers_machine_is_unclaimed_with_its_age_and_cost_so_far(elsewhere):
    theirs = elsewhere()
    made_hours_ago(theirs, 2)
    ours = create()
    report = Client().reconcile(unclaimed=True)
    [found] = report.unclaimed
    assert found.instance.ref == theirs.ref and found.instance.launch_id == theirs.launch_id
    assert 2 * 3600 <= found.age_seconds < 2 * 3600 + 60
    assert found.price_per_hour == theirs.price_per_hour and found.price_source == "instance"
    # Two hours at the machine's own price, to the cent (a minute's slack for the run).
    assert isinstance(found.cost_so_far, Decimal)
    assert theirs.price_per_hour * 2 <= found.cost_so_far <= theirs.price_per_hour * Decimal(
        "2.02")
    assert report.unclaimed_cost == found.cost_so_far
    # Still reported as foreign too (the existing key keeps its meaning); never adopted.
    assert theirs.ref in {i.ref for i in report.foreign}
    assert ours.ref not in {u.instance.ref for u in report.unclaimed}
    assert report.adopted == report.terminated == ()
    assert {theirs.ref, ours.ref} <= live()  # listing deletes nothing


def test_without_asking_the_report_is_as_before(elsewhere):
    theirs = elsewhere()
    report = Client().reconcile()
    assert report.unclaimed == () and report.unclaimed_cost is None
    assert [i.ref for i in report.foreign] == [theirs.ref]


def test_a_launch_of_this_journal_is_adopted_never_unclaimed():
    machine = crashed()  # journaled as an intent only, as after a crash
    report = Client().reconcile(unclaimed=True)
    assert [i.ref for i in report.adopted] == [machine.ref]
    assert report.unclaimed == ()


def test_deleting_ends_unclaimed_machines_and_never_a_foreign_one(elsewhere):
    theirs = elsewhere()
    unmarked = labelled(None)
    blank = labelled("")
    look_alike = labelled("gc-1")
    ours = create()
    report = Client().reconcile(unclaimed=True, delete_unclaimed=True)
    assert [i.ref for i in report.terminated] == [theirs.ref]
    assert {u.instance.ref for u in report.unclaimed} == {theirs.ref}
    assert report.not_deleted == ()
    assert theirs.ref not in live()
    assert {unmarked, blank, look_alike, ours.ref} <= live()


def test_deleting_refs_ends_only_those_still_unclaimed(elsewhere):
    first, second = elsewhere(), elsewhere()
    ours = create()
    report = Client().reconcile(delete_unclaimed=[second.ref, ours.ref])
    assert [i.ref for i in report.terminated] == [second.ref]
    assert {first.ref, ours.ref} <= live() and second.ref not in live()


def test_every_provider_with_credentials_is_looked_at_whatever_the_default_list(
        elsewhere, tmp_path):
    theirs = elsewhere()
    config = tmp_path / "gpucloud-home" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[defaults]\nproviders = [\"runpod\"]\n")  # no key: nothing listed
    assert Client().reconcile().providers == ()
    report = Client().reconcile(unclaimed=True)
    assert "sandbox" in report.providers
    assert [u.instance.ref for u in report.unclaimed] == [theirs.ref]


def test_a_failed_delete_is_named_and_the_machine_kept(elsewhere, monkeypatch):
    theirs = elsewhere()
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_5XX", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "delete")
    report = Client(sleep=lambda _s: None).reconcile(unclaimed=True, delete_unclaimed=True)
    assert [i.ref for i in report.not_deleted] == [theirs.ref] and report.terminated == ()
    assert any(theirs.ref in w and "still bills" in w for w in report.warnings)


def test_async_client_in_parity(elsewhere):
    theirs = elsewhere()

    async def run():
        async with AsyncClient() as client:
            return (await client.reconcile(unclaimed=True),
                    await client.reap(dry_run=True, unclaimed=True))

    report, reaped = asyncio.run(run())
    assert [u.instance.ref for u in report.unclaimed] == [theirs.ref]
    assert [u.instance.ref for u in reaped.unclaimed] == [theirs.ref]


def test_reap_reports_unclaimed_machines_and_ends_none_for_it(elsewhere):
    theirs = elsewhere()
    ours = create()
    report = Client().reap(unclaimed=True)
    assert [u.instance.ref for u in report.unclaimed] == [theirs.ref]
    assert report.actions == ()
    assert {theirs.ref, ours.ref} <= live()
    assert Client().reap().unclaimed == ()  # only when asked


def test_reap_still_reaps_when_the_journal_cannot_be_read(elsewhere, tmp_path):
    elsewhere()
    journal = tmp_path / "gpucloud-home"
    Client().list()  # the home exists
    for path in journal.rglob("*.sqlite*"):
        path.write_bytes(b"not a database" * 100)
    report = Client().reap(unclaimed=True)
    assert report.unclaimed == ()
    assert any("no machine is reported unclaimed" in w for w in report.warnings)


def _bare(**fields: object) -> Instance:
    base: dict[str, object] = dict(provider="lambda", id="0920582c7ff041399e34823a0be62549",
                                   status="running", launch_id="gc-0123456789")
    return Instance(**(base | fields))  # type: ignore[arg-type]


def test_without_its_own_price_the_catalog_prices_its_type():
    catalogs = load_catalogs()
    [a10] = catalogs["lambda"].types_named("gpu_1x_a10")
    now = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
    found = unclaimed_mod.priced(
        _bare(instance_type="gpu_1x_a10", region=a10.regions[0],
              created_at=now - timedelta(hours=3)), catalogs, now)
    assert found.price_per_hour == a10.price and found.price_source == "catalog"
    assert found.cost_so_far == (a10.price * 3).quantize(Decimal("0.01"))


def test_an_unknown_age_or_price_is_none_never_zero():
    catalogs = load_catalogs()
    now = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
    no_age = unclaimed_mod.priced(_bare(price_per_hour=Decimal("1.29")), catalogs, now)
    assert no_age.age_seconds is None and no_age.cost_so_far is None
    no_price = unclaimed_mod.priced(_bare(instance_type="gpu_9x_unheard_of",
                                          created_at=now - timedelta(hours=1)), catalogs, now)
    assert no_price.price_per_hour is None and no_price.cost_so_far is None
    assert unclaimed_mod.total([no_age, no_price]) is None


LAMBDA = "https://cloud.lambda.ai"
LAMBDA_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lambda"


def test_on_lambda_the_launch_tag_decides_and_only_the_tagged_machine_is_terminated(
        monkeypatch):
    """Lambda's listing (the API reference's example, tests/fixtures/lambda) as
    the wire carries it: the example machine's own tags (key1=value1) are not
    gpucloud's, so it is foreign. A second machine is that example with its id
    changed and gpucloud's launch tag put on it (CONSTRUCTED here: no public
    listing shows a gpucloud tag), as another laptop's launch would leave it."""
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "sk-unclaimed-0123456789")
    listing = json.loads((LAMBDA_FIXTURES / "list_instances_200.json").read_text())
    [example] = listing["data"]
    tagged = copy.deepcopy(example) | {
        "id": "1a2b3c4d5e6f40718293a4b5c6d7e8f9",
        "tags": [{"key": "gpucloud-launch-id", "value": "gc-5be21a9f03"}]}
    listing["data"] = [example, tagged]
    terminated = json.loads((LAMBDA_FIXTURES / "terminate_instance_200.json").read_text())
    with respx.mock(assert_all_called=False) as router:
        router.get(f"{LAMBDA}/api/v1/instances").mock(
            return_value=httpx.Response(200, json=listing))
        ended = router.post(f"{LAMBDA}/api/v1/instance-operations/terminate").mock(
            return_value=httpx.Response(200, json=terminated))
        report = Client(providers=["lambda"]).reconcile(unclaimed=True,
                                                        delete_unclaimed=True)
    [found] = report.unclaimed
    assert found.instance.id == tagged["id"] and found.instance.launch_id == "gc-5be21a9f03"
    # The listing prices the machine (price_cents_per_hour); Lambda gives no creation time.
    assert found.price_per_hour == Decimal("35.92") and found.price_source == "instance"
    assert found.age_seconds is None and found.cost_so_far is None
    assert report.unclaimed_cost is None
    assert [m.id for m in report.foreign] == [tagged["id"]]  # the untagged one has no launch id
    assert ended.call_count == 1
    assert json.loads(ended.calls[0].request.content) == {"instance_ids": [tagged["id"]]}
    assert [m.id for m in report.terminated] == [tagged["id"]]


def test_at_a_terminal_delete_asks_and_a_no_deletes_nothing(elsewhere, monkeypatch):
    from typer.testing import CliRunner

    from gpucloud.cli import app
    from gpucloud.cli.commands import instance as instance_cmds, reconcile as reconcile_cmds

    monkeypatch.setattr(instance_cmds, "_interactive", lambda: True)
    monkeypatch.setattr(reconcile_cmds, "_interactive", lambda: True)
    theirs = elsewhere()
    declined = CliRunner().invoke(app, ["reconcile", "--orphans", "--delete"], input="n\n")
    assert declined.exit_code == 8 and theirs.ref in live()
    assert f"Delete 1 unclaimed machine(s): {theirs.ref}?" in declined.stderr
    assert "colleague" in declined.stderr
    agreed = CliRunner().invoke(app, ["reconcile", "--orphans", "--delete"], input="y\n")
    assert agreed.exit_code == 0, agreed.output
    assert f"deleted {theirs.ref}" in agreed.stdout and theirs.ref not in live()


def test_an_overdue_unclaimed_machine_is_reaped_for_its_deadline_and_not_reported(elsewhere):
    theirs = elsewhere(auto_shutdown="4h")
    db = sqlite3.connect(sandbox_db_path())
    with db:  # its deadline passed an hour ago (the sandbox's own timer is off here)
        db.execute("UPDATE instances SET shutdown_us = ? WHERE id = ?",
                   (int((datetime.now(timezone.utc) - timedelta(hours=1)).timestamp() * US),
                    theirs.id))
    db.close()
    report = Client().reap(unclaimed=True)
    assert [(a.instance.ref, a.action) for a in report.actions] == [(theirs.ref, "terminated")]
    assert report.unclaimed == ()
