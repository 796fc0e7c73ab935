"""The owner of a machine in the cost ledger is its launch's user and project,
whoever writes its later rows; costs group by it and a Scope counts only it,
with the same arithmetic as the whole."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

from gpucloud.config.identity import Identity
from gpucloud.safety.costs import NO_USER, Scope, compute
from gpucloud.safety.journal import Journal
from gpucloud.safety.ledger import ENDED, RUNNING, Ledger, Row
from gpucloud.safety.ledger_volumes import VolumeRecord

NOW = datetime(2026, 11, 20, 12, tzinfo=timezone.utc)


def row(ident: str, user: str | None, project: str | None, hours_ago: int,
        price: str = "2.00", state: str = RUNNING) -> Row:
    return Row(at=NOW - timedelta(hours=hours_ago), provider="sandbox", instance_id=ident,
               event="started", source="launch", state=state, price_per_hour=Decimal(price),
               shutdown_at=NOW + timedelta(hours=3), user_name=user, project=project)


ROWS = [row("a1", "alice", "vision", 5), row("a2", "alice", None, 2),
        row("b1", "bob", "vision", 1), row("x1", None, None, 4)]


def test_costs_by_user_and_project_split_the_total_exactly():
    for by, expected in (("user", {"alice": 2, "bob": 1, NO_USER: 1}),
                         ("project", {"vision": 2, "(no project)": 2})):
        report = compute(ROWS, "2026-11", by, now=NOW)
        assert {line.key: len(line.instances) for line in report.lines} == expected
        assert sum(line.total for line in report.lines if line.total) == report.total


def test_a_scope_counts_only_its_owners_machines_and_volumes():
    volume = VolumeRecord(provider="sandbox", volume_id="v1", name="data", region=None,
                          size_gb=730, price_per_gb_month=Decimal("0.10"), hours_per_month=730,
                          created_at=NOW - timedelta(hours=10), deleted_at=NOW,
                          last_attached_at=None, source="create", job_ref=None,
                          simulated=False, user_name="bob", project="vision")
    everyone = compute(ROWS, "2026-11", now=NOW, volumes=[volume])
    alice = compute(ROWS, "2026-11", now=NOW, volumes=[volume], scope=Scope(user="alice"))
    vision = compute(ROWS, "2026-11", now=NOW, volumes=[volume], scope=Scope(project="vision"))
    # alice: a1 (5 h run + 3 h ahead) and a2 (2 + 3), at $2.00.
    assert alice.total == Decimal("26.00") and not alice.volumes
    # vision: a1 (8 h) and b1 (1 + 3), $2.00/h; bob's volume, 10 h of 730 GB at $0.10/GB-month.
    assert vision.total == Decimal("24.00") + Decimal("1.00")
    assert [v.ref for v in vision.volumes] == ["sandbox/v1"]
    assert everyone.total == Decimal("26.00") + Decimal("8.00") + Decimal("14.00") \
        + Decimal("1.00")


def test_a_machines_rows_keep_its_launchs_owner_whoever_writes_them(tmp_path):
    journal = Journal(tmp_path / "state.sqlite")
    journal.record_intent(launch_id="gl-a", provider="sandbox", instance_type="t", region="r",
                          name="a", price_per_hour="2.00", shutdown_at=None, project="vision",
                          identity=Identity("alice", "laptop"))
    journal.mark("gl-a", "delivered", instance_id="a1")
    ledger = Ledger(journal)
    ledger.append([Row(at=NOW - timedelta(hours=1), provider="sandbox", instance_id="a1",
                       event="started", source="launch", state=RUNNING,
                       price_per_hour=Decimal("2.00"), launch_id="gl-a")])
    # A delete by someone else (its row says nothing of an owner): still alice's.
    ledger.append([Row(at=NOW, provider="sandbox", instance_id="a1", event="terminated",
                       source="delete", state=ENDED)])
    # A machine no launch here made: nobody's.
    ledger.append([Row(at=NOW, provider="sandbox", instance_id="z9", event="first_seen",
                       source="list", state=RUNNING, launch_id="gl-elsewhere")])
    rows = ledger.rows()
    assert [(r.instance_id, r.user_name, r.host, r.project) for r in rows] == [
        ("a1", "alice", "laptop", "vision"), ("a1", "alice", "laptop", "vision"),
        ("z9", None, None, None)]
    assert Ledger(journal).in_flight(NOW - timedelta(days=1)) == []
    record = journal.get("gl-a")
    assert record is not None and (record.user_name, record.host, record.project) == \
        ("alice", "laptop", "vision")


def test_in_flight_counts_per_user_and_per_project(tmp_path):
    journal = Journal(tmp_path / "state.sqlite")
    for launch, user, project, committed in (("gl-1", "alice", "vision", "5"),
                                             ("gl-2", "bob", "vision", "7"),
                                             ("gl-3", "alice", None, "11")):
        journal.record_intent(launch_id=launch, provider="sandbox", instance_type="t",
                              region="r", name=None, price_per_hour="1", shutdown_at=None,
                              committed=Decimal(committed), project=project,
                              identity=Identity(user, "h"))
    ledger = Ledger(journal)
    since = datetime.now(timezone.utc) - timedelta(hours=1)
    assert sorted(ledger.in_flight(since)) == [5, 7, 11]
    assert sorted(ledger.in_flight(since, user="alice")) == [5, 11]
    assert ledger.in_flight(since, project="vision", user="bob") == [7]
