"""The sandbox's SQLite file: schema, connections, and the live-machine counts.

Each request opens its own connection (``timeout=30``) and writes take the
lock up front (``BEGIN IMMEDIATE``), so two processes sharing one file never
both take the last unit of capacity.

A machine ends by time (its termination or, with the native timer, its
deadline passing), so "live" cannot be a stored flag. It is a range instead:
a machine is live at ``now`` while its end — the earliest of those times, or
never — is after ``now``. The end is an indexed expression, so counting the
capacity in use reads the live machines of one type and region only, and a
listing reads only the machines still visible, however many have ended.
"""

from __future__ import annotations

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
        db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        # A simulated cloud's file: write-ahead log, and no sync per commit (a
        # power cut may lose the last moments of a simulation, never corrupt it),
        # so that its own disk writes do not stand in for a real cloud's latency
        # (GPUCLOUD_SANDBOX_LATENCY_MS says that) in what a client measures.
        db.execute("PRAGMA synchronous = NORMAL")
        return db

    def _page_rows(self, after: int, limit: int, since: int,
                   native_timer: bool) -> list[sqlite3.Row]:
        """rows_after, through one connection kept from a listing's first page
        to its last (per thread): opening and closing the file for each page
        (closing the last connection checkpoints the log and removes it) cost
        a listing of many pages more than its reads."""
        local = self.__dict__.setdefault("_pages", threading.local())
        db = getattr(local, "db", None)
        if db is None:
            db = local.db = self._connect()
            # Pages are read once, in order: a page cache kept across them would
            # only grow (to SQLite's default 2 MiB) with pages never read again.
            db.execute("PRAGMA cache_size = -128")
        try:
            rows = rows_after(db, after, limit, since, native_timer)
        except BaseException:
            local.db = None
            db.close()
            raise
        if len(rows) < limit:  # the last page: let the file go
            local.db = None
            db.close()
        return rows

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        try:
            yield db
        finally:
            db.close()

    @contextmanager
    def _write_lock(self) -> Iterator[sqlite3.Connection]:
        """A connection holding the write lock (BEGIN IMMEDIATE); commits on success."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            yield db
            db.execute("COMMIT")
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
            db.close()


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


def rows_after(db: sqlite3.Connection, after: int, limit: int, since: int,
               native_timer: bool) -> list[sqlite3.Row]:
    """Up to `limit` machines after rowid `after`, in creation order, not ended
    before `since`; each with its rowid (the next page's cursor). Read along the
    rowid: a page costs its own rows (and any ended ones between them), not a
    sort of every visible machine."""
    end = END_BY_TIMER if native_timer else END_NO_TIMER
    return db.execute(f"SELECT rowid AS page_seq, * FROM instances WHERE rowid > ?"
                      f" AND {end} > ? ORDER BY rowid LIMIT ?", (after, since, limit)).fetchall()
