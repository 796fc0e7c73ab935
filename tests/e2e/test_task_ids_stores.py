"""A queue task's id in both stores, the local file and a real PostgreSQL
server (tests/support/postgres.py): a launch journals it, a machine's ledger
rows carry it forward, a machine first seen by a listing takes it from its
journaled launch, and the month's report sums each task's machines."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from gpucloud.models import Instance, InstanceStatus
from gpucloud.safety import costs
from gpucloud.safety.journal import Journal
from gpucloud.safety.ledger import Ledger, Row
from gpucloud.safety.store_postgres import PostgresStore
from tests.support.postgres import pg_url, postgres_server  # noqa: F401

T = datetime(2027, 3, 10, 12, tzinfo=timezone.utc)
PRICE = Decimal("2.49")


@pytest.fixture(params=["sqlite", "postgresql"])
def journal(request, tmp_path: Path):
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    yield Journal(tmp_path / "state.sqlite", PostgresStore(url) if url else None)
    if url is not None:
        PostgresStore(url).release()


def test_a_tasks_launches_and_rows_carry_its_id(journal):
    journal.record_intent(launch_id="gc-task1", provider="sandbox", instance_type="t",
                          region="r", name=None, price_per_hour=str(PRICE), shutdown_at=None,
                          task_id="sweep-00000001")
    journal.record_intent(launch_id="gc-hand1", provider="sandbox", instance_type="t",
                          region="r", name=None, price_per_hour=str(PRICE), shutdown_at=None)
    journal.record_intent(launch_id="gc-lost1", provider="sandbox", instance_type="t",
                          region="r", name=None, price_per_hour=str(PRICE), shutdown_at=None,
                          task_id="sweep-00000002")
    journal.mark("gc-lost1", "ambiguous", error="timed out")
    assert {r.launch_id: r.task_id for r in journal.all()} == {
        "gc-task1": "sweep-00000001", "gc-hand1": None, "gc-lost1": "sweep-00000002"}

    ledger = Ledger(journal)
    start = T - timedelta(hours=4)
    ledger.append([Row(at=start, provider="sandbox", instance_id="i-task", event="started",
                       source="launch", state="running", price_per_hour=PRICE,
                       launch_id="gc-task1", task_id="sweep-00000001"),
                   Row(at=start, provider="sandbox", instance_id="i-hand", event="started",
                       source="launch", state="running", price_per_hour=PRICE,
                       launch_id="gc-hand1")])
    # Ended by a delete from outside the task: the row carries the task on.
    ledger.append([Row(at=start + timedelta(hours=2), provider="sandbox",
                       instance_id="i-task", event="terminated", source="delete",
                       state="ended")])
    # The unanswered launch's machine, first seen by a listing.
    ledger.observe([Instance(provider="sandbox", id="i-lost", status=InstanceStatus.RUNNING,
                             created_at=start + timedelta(hours=3), launch_id="gc-lost1",
                             price_per_hour=PRICE),
                    Instance(provider="sandbox", id="i-hand", status=InstanceStatus.RUNNING,
                             price_per_hour=PRICE)], T)
    tasks = {(r.instance_id, r.event): r.task_id for r in ledger.rows()}
    assert tasks == {("i-task", "started"): "sweep-00000001",
                     ("i-task", "terminated"): "sweep-00000001",
                     ("i-hand", "started"): None,
                     ("i-lost", "first_seen"): "sweep-00000002"}

    _, first, end = costs.month_bounds("2027-03", T)
    report = costs.compute(ledger.month_rows(first, end), "2027-03", "task", now=T)
    lines = {line.key: line for line in report.lines}
    assert lines["sweep-00000001"].spent == Decimal("4.98")  # 2 h at $2.49
    assert lines["sweep-00000002"].spent == Decimal("2.49")  # 1 h so far
    assert lines["sweep-00000001"].instances == ("sandbox/i-task",)
    assert lines[costs.NO_TASK].instances == ("sandbox/i-hand",)
