"""The sandbox's SQLite file: schema, connections, and the live-machine counts.

Each request takes a connection (``timeout=30``) of its own for as long as it
runs, and writes take the lock up front (``BEGIN IMMEDIATE``), so two
processes sharing one file never both take the last unit of capacity. A
connection is kept for the next request rather than closed: closing the last
one on a write-ahead-logged file checkpoints the log into the file, several
milliseconds of disk work per request that a real cloud's API does not make
its client wait for, and that here would take the client's own process time.

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpucloud.providers.sandbox.job_sim import JOB_SCHEMA

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
# Columns added after the first release: databases made before get them on open.
_ADDED_COLUMNS = {"stopped_us": "INTEGER",
                  "stopped_total_us": "INTEGER NOT NULL DEFAULT 0"}


class Storage:
    """Mixed into SandboxCloud: its file and the queries that must stay indexed."""

    db_path: Path

    def _open_storage(self) -> None:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with self._read() as db:
            db.execute("PRAGMA journal_mode = WAL")  # kept in the file: once is enough
            table = _SCHEMA[:_SCHEMA.index("CREATE INDEX")]
            db.executescript(table + JOB_SCHEMA)
            have = {row["name"] for row in db.execute("PRAGMA table_info(instances)")}
            for column, kind in _ADDED_COLUMNS.items():
                if column not in have:
                    db.execute(f"ALTER TABLE instances ADD COLUMN {column} {kind}")
            db.executescript(_SCHEMA)  # the indexes, once the columns exist

    def _connect(self) -> sqlite3.Connection:
        # Kept between requests (_take), used by one thread at a time.
        db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None,
                             check_same_thread=False)
        db.row_factory = sqlite3.Row
        # A simulated cloud's file: write-ahead log, and no sync per commit (a
        # power cut may lose the last moments of a simulation, never corrupt it),
        # so that its own disk writes do not stand in for a real cloud's latency
        # (GPUCLOUD_SANDBOX_LATENCY_MS says that) in what a client measures.
        db.execute("PRAGMA synchronous = NORMAL")
        return db

    def _take(self) -> sqlite3.Connection:
        """A kept connection to the file as it is now (one replaced or removed
        since is opened afresh; a forked child never uses its parent's), or a
        new one."""
        kept = self.__dict__.get("_connections")
        stamp = _stamp(self.db_path)
        if kept is None or kept.pid != os.getpid():
            kept = self.__dict__["_connections"] = _Kept()
        with kept.lock:
            while kept.idle:
                db, was = kept.idle.pop()
                if was == stamp:
                    return db
                db.close()
        return self._connect()

    def _give_back(self, db: sqlite3.Connection) -> None:
        kept = self.__dict__.get("_connections")
        if kept is not None and kept.pid == os.getpid() and not db.in_transaction:
            with kept.lock:
                if len(kept.idle) < KEPT:
                    kept.idle.append((db, _stamp(self.db_path)))
                    return
        db.close()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        db = self._take()
        try:
            yield db
        finally:
            self._give_back(db)  # closed instead if left inside a transaction

    @contextmanager
    def _write_lock(self) -> Iterator[sqlite3.Connection]:
        """A connection holding the write lock (BEGIN IMMEDIATE); commits on success."""
        db = self._take()
        try:
            db.execute("BEGIN IMMEDIATE")
            yield db
            db.execute("COMMIT")
        except BaseException:
            try:
                if db.in_transaction:
                    db.execute("ROLLBACK")
            finally:
                self._give_back(db)  # closed instead if the rollback failed
            raise
        self._give_back(db)


# Idle connections kept per simulated cloud: as many as requests usually
# overlap on one file; more are closed after use.
KEPT = 16


class _Kept:
    """A SandboxCloud's idle connections, each with the file it was opened on."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.idle: list[tuple[sqlite3.Connection, tuple[int, int] | None]] = []


def _stamp(path: Path) -> tuple[int, int] | None:
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


def visible_rows(db: sqlite3.Connection, since: int, native_timer: bool) -> list[sqlite3.Row]:
    """Machines not ended before `since` (now less the retention), in creation order."""
    # Named: without statistics the planner prefers a scan in rowid order.
    end, index = (END_BY_TIMER, "instances_end_timer") if native_timer \
        else (END_NO_TIMER, "instances_end")
    return db.execute(f"SELECT * FROM instances INDEXED BY {index} WHERE {end} > ?"
                      " ORDER BY rowid", (since,)).fetchall()
