"""One state test suite, two stores: every test here runs on the local SQLite
file and on a real PostgreSQL server (tests/support/postgres.py), through the
same Journal, Ledger and VolumeLedger calls the client makes. What the
journal, the ledger and the budget's admission promise must hold on both."""

from __future__ import annotations

import multiprocessing
import sqlite3
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from gpucloud.errors import StateError, exit_code_for
from gpucloud.models import Volume
from gpucloud.safety import schema_version
from gpucloud.safety.journal import Journal
from gpucloud.safety.ledger import SCHEMA as LEDGER_SCHEMA, Ledger, Row
from gpucloud.safety.ledger_volumes import VolumeLedger
from gpucloud.safety.store_postgres import PostgresStore
from tests.support.postgres import pg_url, postgres_server  # noqa: F401

T = datetime(2027, 3, 10, 12, tzinfo=timezone.utc)


def _journal(kind: str, home: Path, url: str | None) -> Journal:
    return Journal(home / "state.sqlite", PostgresStore(url) if kind == "postgresql" else None)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    """(kind, home, url): a fresh store of each kind."""
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    yield request.param, tmp_path, url
    if url is not None:
        PostgresStore(url).release()


@pytest.fixture
def journal(store):
    return _journal(*store)


def _intent(journal: Journal, launch_id: str, **more) -> None:
    journal.record_intent(launch_id=launch_id, provider="sandbox", instance_type="sim.1xH100",
                          region="sim-east-1", name=more.pop("name", None),
                          price_per_hour="2.49", shutdown_at=more.pop("shutdown_at", None),
                          **more)


def test_an_intent_is_unresolved_until_marked_and_found_by_its_machine(journal):
    _intent(journal, "gc-1", shutdown_at=T)
    _intent(journal, "gc-2")
    assert [r.launch_id for r in journal.unresolved()] == ["gc-1", "gc-2"]
    journal.mark("gc-1", "delivered", instance_id="i-1")
    journal.mark("gc-2", "ambiguous", error="timed out")
    assert [r.launch_id for r in journal.unresolved()] == ["gc-2"]
    record = journal.by_instance("sandbox", "i-1")
    assert record is not None and record.status == "delivered" and record.shutdown_at == T
    assert journal.deadline("sandbox", "i-1") == T
    journal.set_deadline("sandbox", "i-1", T + timedelta(hours=2))
    assert journal.deadline("sandbox", "i-1") == T + timedelta(hours=2)
    assert journal.get("gc-2").error == "timed out"
    journal.mark_all_deleted([("sandbox", "i-1")])
    assert journal.get("gc-1").status == "deleted"


def test_lookups_of_many_machines_chunk_and_the_latest_launch_wins(journal):
    # More ids than one statement may carry in SQLite (CHUNK), on both stores.
    for n in range(1000):
        _intent(journal, f"gc-{n}")
        journal.mark(f"gc-{n}", "delivered", instance_id=f"i-{n}")
    _intent(journal, "gc-again")
    journal.mark("gc-again", "delivered", instance_id="i-7")  # a later launch of i-7
    found = journal.by_instances("sandbox", [f"i-{n}" for n in range(1000)])
    assert len(found) == 1000 and found["i-7"].launch_id == "gc-again"
    assert len(journal.by_launch_ids(f"gc-{n}" for n in range(1000))) == 1000


def test_a_batch_is_read_back_by_key_with_its_slots(journal):
    for slot in (1, 0):
        _intent(journal, f"gc-b{slot}", batch_key="sweep-7", slot=slot,
                committed=Decimal("12.45"))
    assert sorted(r.slot for r in journal.batch("sweep-7")) == [0, 1]
    assert journal.batch("other") == []


def test_a_decision_that_fails_leaves_no_record(journal):
    with pytest.raises(RuntimeError):
        with journal.exclusive(LEDGER_SCHEMA) as db:
            db.execute("INSERT INTO launches (launch_id, provider, instance_type, region,"
                       " status, created_at, updated_at) VALUES (?, ?, ?, ?, 'intent', ?, ?)",
                       ("gc-x", "sandbox", "t", "r", T.isoformat(), T.isoformat()))
            raise RuntimeError("the budget said no")
    assert journal.get("gc-x") is None
    _intent(journal, "gc-y")  # the store is usable after the rollback
    assert journal.get("gc-y") is not None


def _admit(kind: str, home: str, url: str | None, fits: int, barrier, results) -> None:
    """One process's admission: read how many launches the month holds and
    journal one more only if it fits, in one decision."""
    journal = _journal(kind, Path(home), url)
    barrier.wait()
    with journal.exclusive(LEDGER_SCHEMA) as db:
        (held,) = db.execute("SELECT count(*) FROM launches").fetchone()
        admitted = held < fits
        if admitted:
            import os
            import time

            time.sleep(0.02)  # a slow decision: a race would show here
            db.execute("INSERT INTO launches (launch_id, provider, instance_type, region,"
                       " status, created_at, updated_at) VALUES (?, ?, ?, ?, 'intent', ?, ?)",
                       (f"gc-{os.getpid()}", "sandbox", "t", "r", T.isoformat(),
                        T.isoformat()))
    results.put(admitted)


def test_decisions_from_many_processes_are_taken_one_at_a_time(store):
    """The budget's admission rests on this: 12 processes at once, room for 5."""
    kind, home, url = store
    _journal(kind, home, url).all()  # the store exists before the race
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(12), spawn.Queue()
    procs = [spawn.Process(target=_admit, args=(kind, str(home), url, 5, barrier, results))
             for _ in range(12)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    answers = [results.get(timeout=5) for _ in procs]
    assert sorted(answers) == [False] * 7 + [True] * 5
    assert len(_journal(kind, home, url).all()) == 5


def _row(instance: str, at: datetime, state: str = "running", **more) -> Row:
    return Row(at=at, provider="sandbox", instance_id=instance, event=more.pop("event", "started"),
               source=more.pop("source", "launch"), state=state, **more)


def test_ledger_rows_carry_forward_and_the_latest_row_is_the_state(journal):
    ledger = Ledger(journal)
    ledger.append([_row("i-1", T, price_per_hour=Decimal("2.49"), name="a", simulated=True,
                        launch_id="gc-1")])
    ledger.append([_row("i-1", T + timedelta(hours=1), "stopped", event="stopped",
                        source="power", stopped_price_per_hour=Decimal("0"))])
    ledger.append([_row("i-2", T, price_per_hour=Decimal("1.10"))])
    ledger.append([_row("i-2", T + timedelta(hours=3), "ended", event="terminated",
                        source="delete")])
    latest = ledger.latest([("sandbox", "i-1"), ("sandbox", "i-2")])
    one = latest[("sandbox", "i-1")]
    assert one.state == "stopped" and one.price_per_hour == Decimal("2.49")
    assert one.name == "a" and one.launch_id == "gc-1" and one.simulated is True
    assert latest[("sandbox", "i-2")].state == "ended"
    history = ledger.history([("sandbox", "i-2")])[("sandbox", "i-2")]
    assert [r.state for r in history] == ["running", "ended"]
    month = ledger.month_rows(T - timedelta(days=9), T + timedelta(days=20))
    assert {r.instance_id for r in month} == {"i-1", "i-2"}
    # The live set (kept by a trigger in each store) holds only what has not ended.
    with journal._db(LEDGER_SCHEMA) as db:
        live = set(db.execute("SELECT provider, instance_id FROM ledger_live"))
    assert live == {("sandbox", "i-1")}


def test_launches_in_flight_count_until_their_machine_is_in_the_ledger(journal):
    ledger = Ledger(journal)
    _intent(journal, "gc-1", committed=Decimal("10.00"))
    _intent(journal, "gc-2", committed=Decimal("2.50"))
    assert sorted(ledger.in_flight(T - timedelta(days=400))) == [Decimal("2.50"),
                                                                  Decimal("10.00")]
    ledger.append([_row("i-1", T, price_per_hour=Decimal("2.49"), launch_id="gc-1")])
    assert ledger.in_flight(T - timedelta(days=400)) == [Decimal("2.50")]


def test_a_volume_is_recorded_once_and_billed_until_deleted(journal):
    volumes = VolumeLedger(journal)
    volume = Volume(provider="sandbox", id="vol-1", name="data", size_gb=500,
                    region="sim-east-1", price_per_gb_month=Decimal("0.07"), status="available",
                    attached_to=(), created_at=T, simulated=True)
    volumes.add(volume, 730, "create", at=T)
    volumes.add(volume, 730, "create", at=T + timedelta(days=1))  # seen again: kept as is
    (record,) = volumes.records()
    assert record.created_at == T and record.price_per_gb_month == Decimal("0.07")
    volumes.deleted("sandbox", "vol-1", at=T + timedelta(days=2))
    (record,) = volumes.records()
    assert record.deleted_at == T + timedelta(days=2)


def test_a_store_of_a_newer_schema_is_refused_with_both_versions(store):
    kind, home, url = store
    journal = _journal(kind, home, url)
    _intent(journal, "gc-1")
    newer = schema_version.VERSION + 1
    if kind == "sqlite":
        from gpucloud.safety.journal import release

        release()
        with sqlite3.connect(home / "state.sqlite") as db:
            db.execute(f"PRAGMA user_version = {newer}")
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as db:
            db.execute("INSERT INTO gpucloud_schema (version, applied_at) VALUES (%s, 'x')",
                       (newer,))
        PostgresStore(url).release()
        from gpucloud.safety import store_postgres

        store_postgres._CHECKED.clear()  # as a new process would: checked on start
    with pytest.raises(StateError) as caught:
        _journal(kind, home, url).all()
    assert f"schema version {newer}" in caught.value.message
    assert f"({schema_version.VERSION})" in caught.value.message
    assert exit_code_for(caught.value) == 3


def test_both_stores_have_the_same_tables_and_columns(pg_url, tmp_path):
    local = _journal("sqlite", tmp_path, None)
    team = _journal("postgresql", tmp_path, pg_url)
    for journal in (local, team):
        Ledger(journal).append([_row("i-1", T)])
        VolumeLedger(journal).records()
    with sqlite3.connect(tmp_path / "state.sqlite") as db:
        tables = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%'")]
        sqlite_columns = {(t, r[1]) for t in tables
                          for r in db.execute(f"PRAGMA table_info({t})")}
    import psycopg

    with psycopg.connect(pg_url) as db:
        pg_columns = set(db.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name <> 'gpucloud_schema'").fetchall())
    assert sqlite_columns == pg_columns
    PostgresStore(pg_url).release()


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="POSIX fork")
def test_a_forked_child_never_ends_its_parents_team_sessions(pg_url, tmp_path):
    """The queue worker forks, and the child forgets the parent's connections:
    dropping them must not end the parent's session (a PQfinish from the child
    would), or the parent's batch key and its next statement are lost."""
    import gc
    import os

    from gpucloud.batch.lock import held

    journal = _journal("postgresql", tmp_path, pg_url)
    _intent(journal, "gc-1")
    with held(journal, "sweep"):
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's path
            gc.collect()
            os._exit(0)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        other = PostgresStore(pg_url).try_advisory("batch:sweep")
        assert other is None  # still the parent's
    assert journal.get("gc-1") is not None  # the parent's connection still works
    again = PostgresStore(pg_url).try_advisory("batch:sweep")
    assert again is not None  # released by the parent, not before
    again.release()


def test_the_team_database_orders_text_byte_by_byte_as_sqlite_does(pg_url, tmp_path):
    """Times are ISO-8601 text, compared and ordered as text: a database whose
    default collation is a language's (en_US.UTF-8 on many managed servers)
    must still order them as SQLite does, so every text column is "C"."""
    import psycopg

    Ledger(_journal("postgresql", tmp_path, pg_url)).append([_row("i-1", T)])
    with psycopg.connect(pg_url) as db:
        found = db.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND data_type = 'text'"
            " AND table_name <> 'gpucloud_schema'").fetchall()
    assert found and {c for _, _, c in found} == {"C"}, found
    PostgresStore(pg_url).release()


def test_a_failed_write_in_a_group_commit_is_a_state_error_on_both_stores(journal):
    """A driver error (here a launch id journaled twice) leaves the transaction
    not to be trusted: the group fails whole, as one StateError (exit 3 with
    the store's hint), never a raw driver exception."""
    from gpucloud.safety.group_commit import for_journal

    _intent(journal, "gc-1")
    with pytest.raises(StateError):
        for_journal(journal).run(lambda: _intent(journal, "gc-1"))
    _intent(journal, "gc-2")  # the store is usable after it
    assert journal.get("gc-2") is not None


def test_a_statement_without_parameters_is_sent_as_written(pg_url, tmp_path):
    journal = _journal("postgresql", tmp_path, pg_url)
    with journal._db() as db:
        assert db.execute("SELECT '50%'").fetchone()[0] == "50%"
        assert db.execute("SELECT ?::text || '%'", ("50",)).fetchone()[0] == "50%"
    PostgresStore(pg_url).release()


def test_a_batch_whose_team_lock_was_lost_launches_no_more(pg_url, tmp_path):
    """The server frees a session's advisory lock when the session ends (a
    restart, a dropped connection): another computer may take the key, so this
    batch's next launch must not go."""
    import psycopg

    from gpucloud.batch import lock

    journal = _journal("postgresql", tmp_path, pg_url)
    with lock.held(journal, "sweep"):
        with lock.pinned(journal, "sweep") as kept:
            assert kept is True
        [lease] = [v for k, v in lock._HELD.items() if k.endswith("#batch:sweep")]
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)",
                          (lease.team.conn.raw.info.backend_pid,))
        with lock.pinned(journal, "sweep") as kept:
            assert kept is False
        taken = PostgresStore(pg_url).try_advisory("batch:sweep")
        assert taken is not None  # the key is free: another computer could run it
        taken.release()
    PostgresStore(pg_url).release()
