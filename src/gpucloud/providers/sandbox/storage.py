"""The sandbox's SQLite file: schema, connections, and the live-machine counts.

A request borrows a connection (``timeout=30``) from the cloud's pool and
gives it back, as a web service's database pool does; writes take the lock up
front (``BEGIN IMMEDIATE``), so two processes sharing one file never both take
the last unit of capacity. Opening a connection per request would make every
request pay for parsing the schema and, closing the file's last connection,
folding the write-ahead log back into it: costs of the simulation's storage,
not of any cloud's API, that a client's measurements would otherwise carry.

A machine ends by time (its termination or, with the native timer, its
deadline passing), so "live" cannot be a stored flag. It is a range instead:
a machine is live at ``now`` while its end — the earliest of those times, or
never — is after ``now``. The end is an indexed expression, so counting the
capacity in use reads the live machines of one type and region only, and a
listing reads only the machines still visible, however many have ended.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpucloud.config.sqlite_wal import use_wal
from gpucloud.providers.sandbox.job_sim import JOB_SCHEMA
from gpucloud.providers.sandbox.volume_sim import VOLUME_SCHEMA

NEVER = 2**63 - 1
# When a machine ends, with and without the native timer (the knob may differ
# between processes sharing a file, so both are indexed). SQLite uses an index
# on an expression only for a query spelling the same expression.
END_BY_TIMER = (f"min(coalesce(terminated_us, {NEVER}), coalesce(shutdown_us, {NEVER}))")
END_NO_TIMER = f"coalesce(terminated_us, {NEVER})"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS instances (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, instance_type TEXT NOT NULL,
    region TEXT NOT NULL, gpu TEXT NOT NULL, gpu_count INTEGER NOT NULL,
    price TEXT NOT NULL, image TEXT, disk_gb INTEGER, ssh_public_key TEXT,
    labels TEXT NOT NULL, created_us INTEGER NOT NULL, ready_us INTEGER NOT NULL,
    shutdown_us INTEGER, deleted_us INTEGER, terminated_us INTEGER,
    stopped_us INTEGER, stopped_total_us INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS instances_live_timer ON instances
    (instance_type, region, {END_BY_TIMER});
CREATE INDEX IF NOT EXISTS instances_live ON instances (instance_type, region, {END_NO_TIMER});
CREATE INDEX IF NOT EXISTS instances_end_timer ON instances ({END_BY_TIMER});
CREATE INDEX IF NOT EXISTS instances_end ON instances ({END_NO_TIMER});
"""
# Idle connections a cloud keeps for the next requests (one per thread at once
# is what a client's concurrency needs; more are opened and closed as asked).
KEPT_IDLE = 16
# The page cache of a listing's read (a negative cache_size is KiB).
LISTING_CACHE_KIB = -128
# Columns added after the first release: databases made before get them on open.
_ADDED_COLUMNS = {"stopped_us": "INTEGER",
                  "stopped_total_us": "INTEGER NOT NULL DEFAULT 0"}


# Clouds of one process open their files one at a time: two clients making the
# same new file at once raced its switch to WAL ("database is locked").
_OPENING = threading.Lock()


class Storage:
    """Mixed into SandboxCloud: its file and the queries that must stay indexed."""

    db_path: Path
    _pool: tuple[int, list[tuple[sqlite3.Connection, tuple[int, int] | None]]]

    def _open_storage(self) -> None:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with _OPENING, self._read() as db:
            use_wal(db)
            table = _SCHEMA[:_SCHEMA.index("CREATE INDEX")]
            db.executescript(table + JOB_SCHEMA + VOLUME_SCHEMA)
            have = {row["name"] for row in db.execute("PRAGMA table_info(instances)")}
            for column, kind in _ADDED_COLUMNS.items():
                if column not in have:
                    db.execute(f"ALTER TABLE instances ADD COLUMN {column} {kind}")
            db.executescript(_SCHEMA)  # the indexes, once the columns exist

    def _connect(self) -> sqlite3.Connection:
        # Used by one thread at a time (the pool hands it out), by any thread.
        db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None,
                             check_same_thread=False)
        db.row_factory = sqlite3.Row
        # A simulated cloud's file: write-ahead log, and no sync per commit (a
        # power cut may lose the last moments of a simulation, never corrupt it),
        # so that its own disk writes do not stand in for a real cloud's latency
        # (GPUCLOUD_SANDBOX_LATENCY_MS says that) in what a client measures.
        db.execute("PRAGMA synchronous = NORMAL")
        return db

    def _page_rows(self, after: int, limit: int, since: int,
                   native_timer: bool) -> list[sqlite3.Row]:
        """rows_after, through a kept connection of the pool (opening the file
        for each page of a long listing cost more than its reads)."""
        with self._read() as db:
            # A listing's pages are read once, in order: a page cache kept
            # across them only grows (to SQLite's default 2 MiB, in the process
            # that runs the cloud) with pages never read again. The pooled
            # connection gets its cache back for the requests that reuse it.
            (kept,) = db.execute("PRAGMA cache_size").fetchone()
            db.execute(f"PRAGMA cache_size = {LISTING_CACHE_KIB}")
            try:
                return rows_after(db, after, limit, since, native_timer)
            finally:
                db.execute(f"PRAGMA cache_size = {int(kept)}")

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A connection of the pool (a new one when none is idle), given back
        after use, out of any transaction; one that failed is closed instead.
        Never one a parent process opened (a fork)."""
        idle = self._idle()
        stamp = _stamp(self.db_path)
        db = None
        while db is None:
            try:
                db, was = idle.pop()
            except IndexError:
                db = self._connect()
                break
            if was != stamp:  # the file was replaced or removed since: read it afresh
                db.close()
                db = None
        healthy = False
        try:
            yield db
            healthy = True
        except sqlite3.Error:
            raise  # a damaged or locked file: the next request opens afresh
        except BaseException:
            healthy = True  # an API error (404, 409) or an interrupt: still usable
            raise
        finally:
            if healthy and db.in_transaction:
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    healthy = False
            # Kept with the file it was borrowed for: were the file replaced
            # meanwhile, the next borrower sees the stamps differ and closes it.
            if healthy and len(idle) < KEPT_IDLE and self._idle() is idle:
                idle.append((db, stamp))
            else:
                db.close()

    def _idle(self) -> list[tuple[sqlite3.Connection, tuple[int, int] | None]]:
        """This process's idle connections (list.pop and append are atomic),
        closed when the cloud is collected or the process exits."""
        pid = os.getpid()
        with _POOLS_LOCK:
            found = getattr(self, "_pool", None)
            if found is None or found[0] != pid:
                # A forked child never uses (nor closes) its parent's connections.
                found = self._pool = (pid, [])
                weakref.finalize(self, _close_idle, pid, found[1])
            return found[1]

    # A read is a connection of the pool, out of any transaction.
    _read = _connection

    @contextmanager
    def _write_lock(self) -> Iterator[sqlite3.Connection]:
        """A connection holding the write lock (BEGIN IMMEDIATE); commits on
        success, rolls back on any failure. The writers of this process queue
        for the file first, each woken as the one before commits: SQLite's own
        wait for a lock held by another thread is a sleep of 1 ms, then 2, 5,
        10, ... (its busy handler), which a burst of concurrent deletes spent
        more time in than in writing. Other processes still wait SQLite's way."""
        with _writers(self.db_path), self._connection() as db:
            db.execute("BEGIN IMMEDIATE")
            yield db  # a failure leaves the transaction to _connection's rollback
            db.execute("COMMIT")

    def close(self) -> None:
        """Close the idle connections (they reopen on the next request); the
        last one closed folds the write-ahead log back into the file."""
        _close_idle(os.getpid(), self._idle())


_POOLS_LOCK = threading.Lock()
_WRITERS: dict[tuple[int, str], threading.RLock] = {}


def _new_lock_after_fork() -> None:
    # A thread of the parent may have held it at the fork: never released here.
    global _POOLS_LOCK
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_after_fork)


def _writers(path: Path) -> threading.RLock:
    """The queue of this process's writers of the file at `path` (any cloud
    object over it); a forked child makes its own (a lock held by a parent's
    thread at the fork would never be released in the child)."""
    key = (os.getpid(), str(path))
    with _POOLS_LOCK:
        found = _WRITERS.get(key)
        if found is None:
            found = _WRITERS[key] = threading.RLock()
        return found


def _close_idle(pid: int,
                idle: list[tuple[sqlite3.Connection, tuple[int, int] | None]]) -> None:
    if pid != os.getpid():
        return  # a forked child's exit: the connections are its parent's
    while idle:
        try:
            idle.pop()[0].close()
        except (IndexError, sqlite3.Error):
            pass


def _stamp(path: Path) -> tuple[int, int] | None:
    """Which file `path` is now (device, inode): a kept connection to a file
    since replaced would read the old one."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def live_count(db: sqlite3.Connection, type_name: str, region: str, now: int,
               native_timer: bool) -> int:
    """Machines of a type in a region not ended at `now`, read off the index."""
    end, index = (END_BY_TIMER, "instances_live_timer") if native_timer \
        else (END_NO_TIMER, "instances_live")
    return int(db.execute(f"SELECT COUNT(*) FROM instances INDEXED BY {index}"
                          f" WHERE instance_type = ? AND region = ? AND {end} > ?",
                          (type_name, region, now)).fetchone()[0])


def made_fewer(db: sqlite3.Connection, capacity: int) -> bool:
    """Whether fewer machines were ever made, of any type, than ``capacity``, so
    one more fits wherever it goes, known without counting: the largest rowid
    bounds the rows, read off the table's b-tree. Counting the live ones walks
    an index, a cost per create that grows with the machines made (some 0.4 ms
    a create over a batch of 7,500, on the client's CPU when the cloud runs in
    its process)."""
    made = db.execute("SELECT max(rowid) FROM instances").fetchone()[0] or 0
    return int(made) < capacity


def visible_rows(db: sqlite3.Connection, since: int, native_timer: bool) -> list[sqlite3.Row]:
    """Machines not ended before `since` (now less the retention), in creation order."""
    # Named: without statistics the planner prefers a scan in rowid order.
    end, index = (END_BY_TIMER, "instances_end_timer") if native_timer \
        else (END_NO_TIMER, "instances_end")
    return db.execute(f"SELECT * FROM instances INDEXED BY {index} WHERE {end} > ?"
                      " ORDER BY rowid", (since,)).fetchall()


def rows_after(db: sqlite3.Connection, after: int, limit: int, since: int,
               native_timer: bool) -> list[sqlite3.Row]:
    """Up to `limit` machines after rowid `after`, in creation order, not ended
    before `since`; each with its rowid (the next page's cursor). Read along the
    rowid: a page costs its own rows (and any ended ones between them), not a
    sort of every visible machine."""
    end = END_BY_TIMER if native_timer else END_NO_TIMER
    return db.execute(f"SELECT rowid AS page_seq, * FROM instances WHERE rowid > ?"
                      f" AND {end} > ? ORDER BY rowid LIMIT ?", (after, since, limit)).fetchall()
