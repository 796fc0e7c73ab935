"""Client.reconcile: adopt by launch id, fail only on proven
absence, keep what could not be checked pending, report orphans and foreign
machines, terminate orphans only when asked and never a foreign machine."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import httpx
import pytest
import respx

from gpucloud import APIError, AsyncClient, Client
from gpucloud.transport.http import DEFAULT_TIMEOUT
from gpucloud.config.settings import state_db_path
from gpucloud.core.launch import RECONCILE_DELAYS
from gpucloud.safety.reconcile import SETTLE_SECONDS
from gpucloud.safety.journal import Journal
from tests.unit._reconcile_support import (
    age, crashed, create, journaled_as, live, phantom, sql, status,
)

LAMBDA_LIST = "https://cloud.lambda.ai/api/v1/instances"


@pytest.fixture(autouse=True)
def shared_cloud(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", str(tmp_path / "cloud" / "cloud.sqlite"))


def no_sleep(_seconds: float) -> None:
    return None


def test_a_machine_whose_launch_was_never_recorded_is_adopted_with_its_deadline():
    machine = crashed(auto_shutdown="4h")
    sql("UPDATE launches SET shutdown_at = NULL WHERE launch_id = ?", machine.launch_id)
    report = Client().reconcile()
    [adopted] = report.adopted
    assert adopted.ref == machine.ref and adopted.launch_id == machine.launch_id
    assert status(machine.launch_id) == ("delivered", machine.id)
    # The provider's deadline, now also in the journal.
    record = Journal(state_db_path()).get(machine.launch_id)
    assert adopted.shutdown_at is not None and record.shutdown_at == adopted.shutdown_at
    assert report.failed == report.pending == report.orphans == report.foreign == ()
    assert Client().reconcile().adopted == ()  # settled for good


def test_async_client_adopts_too():
    machine = crashed()
    journaled_as(machine, "ambiguous")  # an ambiguous reply nobody followed up

    async def run():
        async with AsyncClient() as client:
            return await client.reconcile()

    report = asyncio.run(run())
    assert [i.ref for i in report.adopted] == [machine.ref]
    assert status(machine.launch_id) == ("delivered", machine.id)


def test_an_intent_is_failed_only_once_the_listing_proves_absence_after_the_settle_time():
    launch_id = phantom()
    young = Client().reconcile()
    [pending] = young.pending
    assert pending.launch_id == launch_id and young.failed == ()
    assert "run reconcile again" in pending.reason
    assert status(launch_id) == ("intent", None)  # not declared failed yet
    age(launch_id, SETTLE_SECONDS + 1)
    old = Client().reconcile()
    [failed] = old.failed
    assert failed.launch_id == launch_id and "no machine on sandbox" in failed.reason
    assert old.pending == ()
    assert status(launch_id)[0] == "failed"


def test_the_settle_time_outlasts_a_create_still_waiting_for_its_answer():
    assert SETTLE_SECONDS > DEFAULT_TIMEOUT.read + sum(RECONCILE_DELAYS)


def test_a_provider_that_could_not_be_listed_leaves_its_intents_pending(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "sk-reconcile-0123456789")
    create()  # the sandbox is in use, so it is listed too
    on_lambda = phantom("lambda", SETTLE_SECONDS + 1)
    on_sandbox = phantom("sandbox", SETTLE_SECONDS + 1)
    with respx.mock(assert_all_mocked=True) as router:
        router.get(LAMBDA_LIST).mock(return_value=httpx.Response(
            503, json={"error": {"code": "global/unavailable", "message": "down"}}))
        report = Client(sleep=no_sleep).reconcile()
    assert report.providers == ("sandbox",)
    assert [p.launch_id for p in report.pending] == [on_lambda]
    assert "lambda could not be listed" in report.pending[0].reason
    assert [f.launch_id for f in report.failed] == [on_sandbox]
    assert any(w.startswith("lambda: could not list machines") and "stay unresolved" in w
               for w in report.warnings)
    assert status(on_lambda) == ("intent", None)


def test_an_intent_on_a_provider_without_credentials_stays_pending():
    create()
    launch_id = phantom("lambda", SETTLE_SECONDS + 1)
    report = Client().reconcile()
    [pending] = report.pending
    assert pending.launch_id == launch_id and "no credentials for lambda" in pending.reason
    assert any(launch_id in w for w in report.warnings)
    assert status(launch_id) == ("intent", None)


def test_when_no_provider_can_be_listed_nothing_is_settled(monkeypatch):
    machine = crashed()
    age(machine.launch_id, SETTLE_SECONDS + 1)
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_5XX", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "list")
    with pytest.raises(APIError):
        Client(sleep=no_sleep).reconcile()
    assert status(machine.launch_id) == ("intent", None)


def foreign_machine(tmp_path, monkeypatch):
    """A colleague's machine: same cloud, another journal."""
    mine = str(tmp_path / "gpucloud-home")
    monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path / "colleague"))
    try:
        return create()
    finally:
        monkeypatch.setenv("GPUCLOUD_HOME", mine)


@pytest.fixture
def estate(tmp_path, monkeypatch):
    """Two orphans, a colleague's machine, a tracked one and an ended one."""
    failed_entry = create()
    journaled_as(failed_entry, "failed")
    deleted_entry = create()
    journaled_as(deleted_entry, "deleted")  # deleted, says the journal; it still runs
    colleague = foreign_machine(tmp_path, monkeypatch)
    tracked = create()
    ended = create()
    Client().delete(ended)
    journaled_as(ended, "failed")  # its entry is wrong, but it bills no more
    return {"failed": failed_entry, "deleted": deleted_entry, "foreign": colleague,
            "tracked": tracked, "ended": ended}


def test_orphans_and_foreign_machines_are_reported_not_touched(estate):
    report = Client().reconcile()
    orphans = {o.instance.ref: o.journal_status for o in report.orphans}
    assert orphans == {estate["failed"].ref: "failed", estate["deleted"].ref: "deleted"}
    assert [i.ref for i in report.foreign] == [estate["foreign"].ref]
    assert report.terminated == () and report.adopted == ()
    assert {estate[k].ref for k in ("failed", "deleted", "foreign", "tracked")} <= live()


def test_terminate_orphans_ends_the_orphans_only(estate):
    report = Client().reconcile(terminate_orphans=True)
    gone = {estate["failed"].ref, estate["deleted"].ref}
    assert {i.ref for i in report.terminated} == gone
    alive = live()
    assert not gone & alive
    assert {estate["foreign"].ref, estate["tracked"].ref} <= alive
    assert Client().reconcile().orphans == ()


def test_terminating_chosen_refs_never_reaches_a_foreign_or_unconfirmed_machine(estate):
    chosen = [estate["failed"].ref, estate["foreign"].ref, estate["tracked"].ref]
    report = Client().reconcile(terminate_orphans=chosen)
    assert [i.ref for i in report.terminated] == [estate["failed"].ref]
    alive = live()
    assert estate["failed"].ref not in alive
    assert {estate[k].ref for k in ("deleted", "foreign", "tracked")} <= alive
    one = Client().reconcile(terminate_orphans=estate["deleted"].ref)
    assert [i.ref for i in one.terminated] == [estate["deleted"].ref]


def test_a_second_machine_for_a_delivered_launch_is_an_orphan():
    first = create()
    second = create()
    # The journal delivered `first` for the launch `second` also carries.
    sql("UPDATE launches SET status = 'failed' WHERE launch_id = ?", second.launch_id)
    sql("UPDATE launches SET launch_id = ? WHERE launch_id = ?", "gc-gone", second.launch_id)
    sql("UPDATE launches SET launch_id = ? WHERE launch_id = ?", second.launch_id,
        first.launch_id)
    [orphan] = Client().reconcile().orphans
    assert orphan.instance.ref == second.ref
    assert (orphan.journal_status, orphan.journal_instance_id) == ("delivered", first.id)


def test_the_report_dumps_to_json_with_times_in_utc():
    crashed()
    data = Client().reconcile().model_dump(mode="json")
    assert set(data) == {"at", "providers", "adopted", "failed", "pending", "orphans",
                         "foreign", "terminated", "warnings", "unclaimed", "unclaimed_cost",
                         "not_deleted"}
    assert datetime.fromisoformat(data["at"].replace("Z", "+00:00")).tzinfo == timezone.utc
    assert data["adopted"][0]["price_per_hour"] == "19.92"
    assert timedelta(0) <= datetime.now(timezone.utc) - datetime.fromisoformat(
        data["at"].replace("Z", "+00:00")) < timedelta(minutes=1)


def test_reconcile_reads_the_unsettled_launches_and_those_listed_not_the_whole_history():
    # A long history of settled launches (delivered, then deleted) and one launch
    # never recorded: reconcile asks the journal for the unsettled launches and
    # for the launch ids the listing shows, never for every launch it holds.
    from gpucloud.safety.journal import _shared

    journal = Journal(state_db_path())
    for n in range(50):
        journal.record_intent(launch_id=f"gc-{n:010x}", provider="sandbox",
                              instance_type="sim.1xH100", region="sim-east-1", name=None,
                              price_per_hour="2.00", shutdown_at=None)
        journal.mark(f"gc-{n:010x}", "delivered", instance_id=f"gone-{n}")
        journal.mark_deleted("sandbox", f"gone-{n}")
    machine = crashed()
    statements: list[str] = []
    connection = _shared(state_db_path()).connection()
    assert connection is not None
    connection.set_trace_callback(statements.append)
    try:
        report = Client().reconcile()
    finally:
        connection.set_trace_callback(None)
    assert [i.ref for i in report.adopted] == [machine.ref]
    reads = [s for s in statements if " FROM launches" in s and s.lstrip().startswith("SELECT")]
    assert reads and all(" WHERE " in s for s in reads), reads
