"""The journal scales: one connection per process and file,
its schema made once, WAL, and one query for all the ids of a listing — while
two processes, or two Journal objects, still see each other's writes, and a
forked child (the queue worker) opens its own connection."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpucloud import Client
from gpucloud.safety import state_file as state
from gpucloud.config.settings import state_db_path
from gpucloud.safety.ledger import Ledger, Row
from gpucloud.safety.journal import Journal, release

T = datetime(2027, 1, 15, tzinfo=timezone.utc)


@pytest.fixture
def traced(monkeypatch):
    """Every connection the journal opens from now on, and the SQL each runs."""
    release()  # connections opened before are not traced
    opened: list[sqlite3.Connection] = []
    statements: list[str] = []
    real = sqlite3.connect

    def connect(*args, **kwargs):
        conn = real(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        opened.append(conn)
        return conn

    monkeypatch.setattr(state.sqlite3, "connect", connect)
    yield opened, statements
    release()


def record(journal: Journal, n: int, provider: str = "sandbox", shutdown: datetime | None = None):
    journal.record_intent(launch_id=f"L-{n}", provider=provider, instance_type="t",
                          region="r", name=f"m-{n}", price_per_hour="1.00", shutdown_at=shutdown)
    journal.mark(f"L-{n}", "delivered", instance_id=f"i-{n}")


def test_one_connection_and_one_schema_for_many_records(traced):
    opened, statements = traced
    for n in range(20):
        record(Journal(state_db_path()), n)  # a new Journal object each time, as contexts do
    assert len(opened) == 1
    assert sum("CREATE TABLE" in s for s in statements) == 1
    assert len(Journal(state_db_path()).all()) == 20


def test_the_journal_is_in_wal_mode():
    record(Journal(state_db_path()), 1)
    with Journal(state_db_path())._db() as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_by_instances_is_one_query_and_the_latest_launch_wins():
    journal = Journal(state_db_path())
    for n in range(3):
        record(journal, n, shutdown=T)
    journal.record_intent(launch_id="L-again", provider="sandbox", instance_type="t",
                          region="r", name="again", price_per_hour="1", shutdown_at=None)
    journal.mark("L-again", "delivered", instance_id="i-1")  # the same id, launched later
    record(journal, 9, provider="lambda")
    found = journal.by_instances("sandbox", ["i-0", "i-1", "i-9", "i-unknown"])
    assert set(found) == {"i-0", "i-1"}
    assert found["i-0"].shutdown_at == T
    assert found["i-1"].launch_id == "L-again"


def test_by_instances_chunks_past_sqlites_variable_limit(traced):
    _, statements = traced
    journal = Journal(state_db_path())
    with journal._db() as db:
        db.executemany("INSERT INTO launches (launch_id, provider, instance_type, region,"
                       " status, instance_id, created_at, updated_at)"
                       " VALUES (?, 'sandbox', 't', 'r', 'delivered', ?, ?, ?)",
                       [(f"L-{n}", f"i-{n}", T.isoformat(), T.isoformat())
                        for n in range(2000)])
    statements.clear()
    found = journal.by_instances("sandbox", [f"i-{n}" for n in range(2000)])
    assert len(found) == 2000
    assert len([s for s in statements if s.startswith("SELECT")]) == 3  # 900 + 900 + 200


def test_reading_never_creates_the_journal():
    journal = Journal(state_db_path())
    assert journal.by_instances("sandbox", ["i-1"]) == {}
    assert journal.by_instance("sandbox", "i-1") is None
    assert not state_db_path().exists()


def test_a_listing_looks_deadlines_up_in_one_query(traced):
    _, statements = traced
    client = Client(["sandbox"])
    for _ in range(6):
        client.create(gpu="h100", count=8, provider="sandbox")
    statements.clear()
    assert len(client.list(provider="sandbox")) == 6
    launch_reads = [s for s in statements if s.startswith("SELECT") and "FROM launches" in s
                    and "instance_id" in s.split("WHERE", 1)[-1]]
    assert len(launch_reads) == 1, launch_reads


def test_two_journal_objects_and_another_process_see_each_others_writes(tmp_path):
    first, second = Journal(state_db_path()), Journal(state_db_path())
    record(first, 1)
    assert second.get("L-1") is not None
    code = ("import sys; from pathlib import Path; from gpucloud.safety.journal import Journal;"
            "j = Journal(Path(sys.argv[1]));"
            "j.record_intent(launch_id='L-other', provider='sandbox', instance_type='t',"
            " region='r', name=None, price_per_hour='1', shutdown_at=None);"
            "assert j.get('L-1') is not None")
    subprocess.run([sys.executable, "-c", code, str(state_db_path())], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert first.get("L-other") is not None and second.get("L-other") is not None
    record(second, 2)  # and the other way round, still on this process's connection
    assert first.get("L-2") is not None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_opens_its_own_connection():
    journal = Journal(state_db_path())
    record(journal, 1)
    parents = [s.conn for s in state._SHARED.values() if s.conn is not None]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        ok = not state._SHARED
        try:
            record(Journal(state_db_path()), 2)
            ok = ok and all(s.conn not in parents for s in state._SHARED.values())
        except BaseException:  # noqa: BLE001 - whatever happens, the child must reach os._exit
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert journal.get("L-2") is not None and journal.get("L-1") is not None


def test_a_journal_moved_away_is_started_afresh_in_a_running_process():
    """The fix the damaged-journal error gives (mv the file away) works without
    restarting a process that holds the journal open."""
    journal = Journal(state_db_path())
    record(journal, 1)
    release()  # its log folded into the file, as the last user leaving does
    state_db_path().rename(state_db_path().with_suffix(".broken"))
    for leftover in ("-wal", "-shm"):
        state_db_path().with_name(state_db_path().name + leftover).unlink(missing_ok=True)
    record(journal, 2)  # the same object: a new file under the same name
    assert [r.launch_id for r in journal.all()] == ["L-2"]
    record(journal, 3)
    state_db_path().rename(state_db_path().with_suffix(".old"))  # while open this time
    assert journal.all() == []


def test_ledger_lookups_read_through_the_index(traced):
    _, statements = traced
    ledger = Ledger(Journal(state_db_path()))
    ledger.append([Row(at=T, provider="sandbox", instance_id=f"i-{n}", event="started",
                       source="launch", state="running") for n in range(50)])
    statements.clear()
    ledger.append([Row(at=T, provider="sandbox", instance_id="i-7", event="terminated",
                       source="delete", state="ended")])
    ledger.latest([("sandbox", "i-8")])
    selects = [s for s in statements if s.startswith("SELECT") and "ledger" in s]
    assert selects
    with Journal(state_db_path())._db() as db:
        for sql in selects:
            plan = " | ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql))
            assert "SCAN" not in plan, (sql, plan)
    assert ledger.latest([("sandbox", "i-7")])[("sandbox", "i-7")].state == "ended"


def test_unresolved_reads_only_the_unsettled_launches(traced):
    """Every listing asks for them: through a partial index, not every launch."""
    _, statements = traced
    journal = Journal(state_db_path())
    for n in range(5):
        record(journal, n)
    journal.record_intent(launch_id="L-open", provider="sandbox", instance_type="t", region="r",
                          name=None, price_per_hour="1", shutdown_at=None)
    statements.clear()
    assert [r.launch_id for r in journal.unresolved()] == ["L-open"]
    [select] = [s for s in statements if s.startswith("SELECT")]
    with journal._db() as db:
        plan = " | ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + select))
    assert "launches_unresolved" in plan, plan


def _record_in_new_journal(path: str, barrier: object, failures: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    try:
        Journal(Path(path)).record_intent(
            launch_id=f"l-{os.getpid()}", provider="sandbox", instance_type="t", region="r",
            name=None, price_per_hour="1", shutdown_at=None)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        failures.put(repr(exc))  # type: ignore[attr-defined]


def test_processes_opening_one_new_home_at_once_all_write_to_it(tmp_path):
    """Commands started together on a new home (a script's burst of creates)
    each switch the new state file to WAL, which SQLite refuses at once, without
    its busy wait, while another process has the file open. Every one must
    still record its launch (before, about one in three of ten failed, exit 3)."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    failures = spawn.Queue()
    for round_ in range(6):
        barrier = spawn.Barrier(8)
        path = str(tmp_path / f"home{round_}" / "state.db")
        procs = [spawn.Process(target=_record_in_new_journal, args=(path, barrier, failures))
                 for _ in range(8)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(60)
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT count(*) FROM launches").fetchone()[0] + \
                failures.qsize() == 8
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert found == []
