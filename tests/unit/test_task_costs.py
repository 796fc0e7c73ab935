"""A queue task's id on what it launches: the client reads GPUCLOUD_TASK_ID
once, the journal and the ledger record it (a column added to files made
before it), the ledger carries it forward to the machine's later rows, and
`costs --by task` sums each task's machines."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from gpucloud import SpecError
from gpucloud.config.settings import queue_task_id, state_db_path
from gpucloud.safety import costs
from gpucloud.safety.journal import Journal
from gpucloud.safety.ledger import Ledger, Row

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)


def _row(at, ident, state="running", *, task=None, price=None, event="observed",
         source="list"):
    return Row(at=at, provider="runpod", instance_id=ident, event=event, source=source,
               state=state, price_per_hour=price, task_id=task)


def test_the_task_id_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("GPUCLOUD_TASK_ID", raising=False)
    assert queue_task_id() is None
    monkeypatch.setenv("GPUCLOUD_TASK_ID", "  ")
    assert queue_task_id() is None
    monkeypatch.setenv("GPUCLOUD_TASK_ID", "sweep-1a2b3c4d")
    assert queue_task_id() == "sweep-1a2b3c4d"


def test_a_client_keeps_the_task_id_it_was_made_under(monkeypatch):
    from gpucloud import Client

    monkeypatch.setenv("GPUCLOUD_TASK_ID", "first-00000001")
    client = Client(providers=["sandbox"])
    monkeypatch.setenv("GPUCLOUD_TASK_ID", "second-00000002")
    assert client._ctx.task_id == "first-00000001"
    assert Client(providers=["sandbox"])._ctx.task_id == "second-00000002"
    monkeypatch.delenv("GPUCLOUD_TASK_ID")
    assert Client(providers=["sandbox"])._ctx.task_id is None


def test_the_ledger_carries_a_machines_task_to_its_later_rows():
    ledger = Ledger(Journal(state_db_path()))
    start = NOW - timedelta(hours=3)
    ledger.append([_row(start, "m1", task="sweep-aaaa0001", price=Decimal("2.00"),
                        event="started", source="launch")])
    # A listing (outside any task) sees it stopped; a delete ends it.
    ledger.append([_row(start + timedelta(hours=1), "m1", "stopped")])
    ledger.append([_row(start + timedelta(hours=2), "m1", "ended", event="terminated",
                        source="delete")])
    rows = ledger.rows()
    assert [r.task_id for r in rows] == ["sweep-aaaa0001"] * 3


def test_costs_by_task_sums_each_tasks_machines():
    start = NOW - timedelta(hours=4)
    rows = [
        # Task A: two machines, 4 h and 2 h at $2.50.
        _row(start, "a1", task="a-00000001", price=Decimal("2.50")),
        _row(start, "a2", task="a-00000001", price=Decimal("2.50")),
        _row(start + timedelta(hours=2), "a2", "ended", task="a-00000001",
             price=Decimal("2.50")),
        # Task B: one machine, 1 h at $1.25, ended.
        _row(start, "b1", task="b-00000002", price=Decimal("1.25")),
        _row(start + timedelta(hours=1), "b1", "ended", task="b-00000002",
             price=Decimal("1.25")),
        # Launched by hand: no task.
        _row(start + timedelta(hours=3), "h1", price=Decimal("1.00")),
        _row(start + timedelta(hours=4), "h1", "ended", price=Decimal("1.00")),
    ]
    report = costs.compute(rows, "2026-11", "task", now=NOW)
    assert report.by == "task"
    by_key = {line.key: line for line in report.lines}
    assert set(by_key) == {"a-00000001", "b-00000002", costs.NO_TASK}
    a, b, hand = by_key["a-00000001"], by_key["b-00000002"], by_key[costs.NO_TASK]
    assert a.instances == ("runpod/a1", "runpod/a2") and a.spent == Decimal("15.00")
    assert a.running_hours == Decimal("6.00")
    assert b.instances == ("runpod/b1",) and b.spent == Decimal("1.25") and b.projected == 0
    assert hand.spent == Decimal("1.00")
    # The lines add up to the whole report.
    assert sum(line.spent for line in report.lines) == report.spent


def test_an_unknown_grouping_names_task_among_the_choices():
    with pytest.raises(SpecError) as caught:
        costs.compute([], None, "week", now=NOW)
    assert "task" in (caught.value.hint or "")


def test_an_older_state_file_gets_the_task_columns(tmp_path):
    """A state file made before the columns: its launches and ledger rows open,
    read back without a task, and new ones record theirs."""
    from gpucloud.safety.journal import SCHEMA
    from gpucloud.safety.ledger import _TABLES

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA)
        for statement in _TABLES:  # the ledger's table as first released: no task_id
            db.execute(statement)
        db.execute("INSERT INTO launches (launch_id, provider, instance_type, region, status,"
                   " instance_id, created_at, updated_at) VALUES ('old', 'runpod', 't', 'r',"
                   " 'delivered', 'i-old', '2026-11-01T00:00:00+00:00',"
                   " '2026-11-01T00:00:00+00:00')")
        db.execute("INSERT INTO ledger (at, provider, instance_id, event, source, state,"
                   " price_per_hour) VALUES ('2026-11-01T00:00:00+00:00', 'runpod', 'i-old',"
                   " 'started', 'launch', 'running', '1.00')")
    db.close()
    assert "task_id" not in {r[1] for r in sqlite3.connect(path).execute(
        "PRAGMA table_info(ledger)")}
    journal = Journal(path)
    assert journal.get("old").task_id is None
    journal.record_intent(launch_id="new", provider="runpod", instance_type="t", region="r",
                          name=None, price_per_hour="1", shutdown_at=None,
                          task_id="sweep-0000beef")
    assert journal.get("new").task_id == "sweep-0000beef"
    ledger = Ledger(journal)
    assert [r.task_id for r in ledger.rows()] == [None]
    ledger.append([_row(NOW, "i-new", task="sweep-0000beef", price=Decimal("1"))])
    assert {r.instance_id: r.task_id for r in ledger.rows()} == {
        "i-old": None, "i-new": "sweep-0000beef"}


def test_a_machine_adopted_after_an_unanswered_create_stays_on_its_tasks_bill():
    """The task's launch went unanswered (journaled ambiguous, nothing in the
    ledger); a later listing elsewhere first sees the machine by its launch
    id: its row names the task from the journal, and later rows carry it."""
    from gpucloud.models import Instance, InstanceStatus

    journal = Journal(state_db_path())
    journal.record_intent(launch_id="gc-0000feed01", provider="sandbox", instance_type="t",
                          region="r", name=None, price_per_hour="2", shutdown_at=None,
                          task_id="sweep-0000feed")
    journal.mark("gc-0000feed01", "ambiguous", error="timeout")
    listed = [Instance(provider="sandbox", id="i-adopted", status=InstanceStatus.RUNNING,
                       created_at=NOW - timedelta(minutes=5), launch_id="gc-0000feed01",
                       price_per_hour=Decimal("2")),
              Instance(provider="sandbox", id="i-foreign", status=InstanceStatus.RUNNING,
                       created_at=NOW - timedelta(minutes=5), launch_id="gc-0000other1",
                       price_per_hour=Decimal("2"))]
    ledger = Ledger(journal)
    ledger.observe(listed, NOW, ["sandbox"])
    ledger.observe([listed[0].model_copy(update={"status": InstanceStatus.STOPPED}),
                    listed[1]], NOW + timedelta(minutes=1), ["sandbox"])
    tasks = [(r.instance_id, r.event, r.task_id) for r in ledger.rows()]
    assert tasks == [("i-adopted", "first_seen", "sweep-0000feed"),
                     ("i-adopted", "observed", "sweep-0000feed"),
                     ("i-foreign", "first_seen", None)]
