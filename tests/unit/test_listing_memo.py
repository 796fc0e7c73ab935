"""Listing again is cheap (little per-call overhead): the cost ledger
remembers the rows its last listing read or wrote, and reads them back only
when another connection committed since; the waiting line of every request
is kept by one watchdog thread, not a thread per request."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import httpx

from gpucloud.transport import http as _http
from gpucloud.config.settings import state_db_path
from gpucloud.safety.ledger import Ledger, Row
from gpucloud.models import Instance, InstanceStatus
from gpucloud.safety.journal import Journal, release

from tests.unit.test_journal_store import traced  # noqa: F401 - a fixture

T = datetime(2027, 1, 15, tzinfo=timezone.utc)


def machines(n: int, status: InstanceStatus = InstanceStatus.RUNNING) -> list[Instance]:
    return [Instance(provider="sandbox", id=f"i-{k}", status=status, created_at=T)
            for k in range(n)]


def ledger_reads(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith("SELECT") and "FROM ledger" in s]


def test_a_second_listing_reads_no_ledger_row(traced):
    _, statements = traced
    book = Ledger(Journal(state_db_path()))
    book.observe(machines(20), T, ["sandbox"])
    statements.clear()
    book.observe(machines(20), T + timedelta(seconds=5), ["sandbox"])
    assert ledger_reads(statements) == []


def test_another_connections_commit_is_read_back(traced):
    _, statements = traced
    book = Ledger(Journal(state_db_path()))
    book.observe(machines(3), T, ["sandbox"])
    # Another process (its own connection) records the machine's stop.
    other = sqlite3.connect(state_db_path())
    with other:
        other.execute("INSERT INTO ledger (at, provider, instance_id, event, source, state,"
                      " simulated) VALUES (?, 'sandbox', 'i-1', 'stopped', 'power',"
                      " 'stopped', 1)", ((T + timedelta(seconds=1)).isoformat(),))
    other.close()
    statements.clear()
    book.observe(machines(3), T + timedelta(seconds=2), ["sandbox"])
    assert ledger_reads(statements), "a commit elsewhere must be read, not assumed away"
    # Running again after the stop recorded elsewhere: a row says so.
    rows = [r for r in book.rows() if r.instance_id == "i-1"]
    assert [r.state for r in rows][-2:] == ["stopped", "running"]


def test_this_processs_own_append_forgets_the_memo(traced):
    _, statements = traced
    book = Ledger(Journal(state_db_path()))
    book.observe(machines(2), T, ["sandbox"])
    book.append([Row(at=T + timedelta(seconds=1), provider="sandbox", instance_id="i-0",
                     event="terminated", source="delete", state="ended")])
    statements.clear()
    book.observe(machines(2)[1:], T + timedelta(seconds=2), ["sandbox"])
    assert ledger_reads(statements)
    latest = book.latest([("sandbox", "i-0")])[("sandbox", "i-0")]
    assert latest.state == "ended" and latest.event == "terminated"  # no second end row
    release()


def test_one_watchdog_thread_for_many_requests():
    before = {t.ident for t in threading.enumerate()}

    def send(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, request=request)

    watched = _http.watched("sandbox", send, after=30.0)
    for _ in range(50):
        watched(httpx.Request("GET", "https://example.invalid/x"))
    new = [t for t in threading.enumerate() if t.ident not in before]
    assert len(new) <= 1 and all(t.name == "gpucloud-watchdog" for t in new)


def test_the_watchdog_still_says_when_a_request_hangs(caplog):
    gate = threading.Event()

    def send(request: httpx.Request) -> httpx.Response:
        gate.wait(5)
        return httpx.Response(200, request=request)

    watched = _http.watched("sandbox", send, after=0.1)
    with caplog.at_level("INFO", logger="gpucloud.http"):
        worker = threading.Thread(target=watched,
                                  args=(httpx.Request("GET", "https://example.invalid/slow"),))
        worker.start()
        deadline = time.monotonic() + 5
        while "waiting for sandbox" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)
        gate.set()
        worker.join()
    assert "waiting for sandbox (GET /slow): no answer after 0.1 s" in caplog.text


def launched(book: Ledger, k: int) -> None:
    """A machine as a launch records it: everything a later row carries forward."""
    book.append([Row(at=T, provider="sandbox", instance_id=f"i-{k}", event="started",
                     source="launch", state="running", price_per_hour=Decimal("2.50"),
                     stopped_price_per_hour=Decimal("0"), name=f"m-{k}",
                     instance_type="sim.8xH100", region="sim-east-1", launch_id=f"L-{k}",
                     simulated=True)])


def test_a_change_the_memo_sees_carries_the_rest_of_the_latest_row(traced):
    """The memo keeps what a listing compares, not the row: a machine whose
    state changed gets its row completed from the latest one read back from
    the ledger (its name, type, prices, launch id), as if the row were kept."""
    _, statements = traced
    book = Ledger(Journal(state_db_path()))
    for k in range(3):
        launched(book, k)
    book.observe(machines(3), T + timedelta(seconds=1), ["sandbox"])
    statements.clear()
    listed = machines(3)
    listed[1] = listed[1].model_copy(update={"status": InstanceStatus.STOPPED})
    book.observe(listed, T + timedelta(seconds=2), ["sandbox"])
    assert len(ledger_reads(statements)) <= 2  # the stopped machine's row, by seq
    last = book.history([("sandbox", "i-1")])[("sandbox", "i-1")][-1]
    assert (last.event, last.source, last.state) == ("observed", "list", "stopped")
    assert (last.name, last.instance_type, last.region, last.launch_id) == \
        ("m-1", "sim.8xH100", "sim-east-1", "L-1")
    assert (last.price_per_hour, last.stopped_price_per_hour) == (Decimal("2.50"), Decimal("0"))
    assert [len(rows) for rows in book.history(
        [("sandbox", f"i-{k}") for k in range(3)]).values()] == [1, 2, 1]


def test_a_machine_gone_since_the_last_listing_ends_with_its_latest_row(traced):
    """Shown by the last listing, missing from this one past the grace period:
    its end carries its latest row, read back for it alone; a listing after
    that, with nothing committed elsewhere, reads no ledger row."""
    _, statements = traced
    book = Ledger(Journal(state_db_path()))
    for k in range(3):
        launched(book, k)
    book.observe(machines(3), T + timedelta(seconds=1), ["sandbox"])
    later = T + timedelta(minutes=30)
    statements.clear()
    book.observe(machines(2), later, ["sandbox"])
    assert len(ledger_reads(statements)) <= 2
    rows = book.history([("sandbox", "i-2")])[("sandbox", "i-2")]
    assert [r.state for r in rows] == ["running", "ended"]
    assert (rows[-1].at, rows[-1].event, rows[-1].name, rows[-1].launch_id) == \
        (later, "observed", "m-2", "L-2")
    statements.clear()
    book.observe(machines(2), later + timedelta(seconds=5), ["sandbox"])
    assert ledger_reads(statements) == []
    assert len(book.rows()) == 4  # three launches and one end


def test_a_connection_opened_afresh_never_takes_the_last_ones_memo():
    """Another process's commit, checkpointed into the file, makes this process
    open the file afresh (its stamp changed). SQLite's data_version of a new
    connection starts over, and a new connection may well sit where the last
    one did (the same id()): the memo must not take it for the connection it
    was made on, or the stop recorded elsewhere is never read."""
    book = Ledger(Journal(state_db_path()))
    book.observe(machines(3), T, ["sandbox"])
    other = sqlite3.connect(state_db_path())
    with other:
        other.execute("INSERT INTO ledger (at, provider, instance_id, event, source, state,"
                      " simulated) VALUES (?, 'sandbox', 'i-1', 'stopped', 'power',"
                      " 'stopped', 1)", ((T + timedelta(seconds=1)).isoformat(),))
    other.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # into the file: its stamp moves
    other.close()
    book.observe(machines(3), T + timedelta(seconds=2), ["sandbox"])
    rows = [r for r in book.rows() if r.instance_id == "i-1"]
    assert [r.state for r in rows][-2:] == ["stopped", "running"]
