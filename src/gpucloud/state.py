"""The client's journal: launch intents and outcomes, deadlines, in SQLite.

A launch is written as an *intent* before its request is sent and marked
*delivered* (with the provider's id) after; a crash or an ambiguous failure
between the two leaves the intent, which reconcile repairs by listing the
provider and matching the launch id — never by guessing.
Nothing secret is ever stored here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .errors import StateError

SCHEMA = """
CREATE TABLE IF NOT EXISTS launches (
    launch_id     TEXT PRIMARY KEY,
    provider      TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    region        TEXT NOT NULL,
    name          TEXT,
    status        TEXT NOT NULL,   -- intent | delivered | failed | ambiguous | deleted
    instance_id   TEXT,
    price_per_hour TEXT,
    shutdown_at   TEXT,
    error         TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS launches_instance ON launches (provider, instance_id);
"""
# Columns added after the first release (ALTER TABLE on journals made before):
# a batch's key and the slot (0..N-1) a launch fills, so a restarted batch
# knows which machines an earlier run made (batch.py).
ADDED_COLUMNS = {"batch_key": "TEXT", "slot": "INTEGER"}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class LaunchRecord:
    launch_id: str
    provider: str
    instance_type: str
    region: str
    name: str | None
    status: str
    instance_id: str | None
    price_per_hour: str | None
    shutdown_at: datetime | None
    error: str | None
    created_at: datetime
    batch_key: str | None = None
    slot: int | None = None


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                conn.executescript(SCHEMA)
                _add_columns(conn)
                with conn:
                    yield conn
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            raise self._unusable(exc) from exc

    def _unusable(self, exc: BaseException) -> StateError:
        """One clear error for a corrupt, truncated, locked or unwritable journal."""
        detail = str(exc) or type(exc).__name__
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            fix = (f"move the damaged file away (mv '{self.path}' '{self.path}.broken'); "
                   "gpucloud starts a new journal and `gpucloud list` still shows your machines")
        else:
            fix = (f"make {self.path.parent} writable, or point GPUCLOUD_HOME at a writable "
                   "directory")
        return StateError(f"state database {self.path} is unusable: {detail}", path=self.path,
                          hint=fix)

    def record_intent(self, *, launch_id: str, provider: str, instance_type: str, region: str,
                      name: str | None, price_per_hour: str, shutdown_at: datetime | None,
                      batch_key: str | None = None, slot: int | None = None) -> None:
        now = utcnow().isoformat()
        with self._db() as db:
            db.execute(
                "INSERT INTO launches (launch_id, provider, instance_type, region, name, status,"
                " price_per_hour, shutdown_at, created_at, updated_at, batch_key, slot)"
                " VALUES (?, ?, ?, ?, ?, 'intent', ?, ?, ?, ?, ?, ?)",
                (launch_id, provider, instance_type, region, name, price_per_hour,
                 shutdown_at.isoformat() if shutdown_at else None, now, now, batch_key, slot))

    def mark(self, launch_id: str, status: str, *, instance_id: str | None = None,
             error: str | None = None) -> None:
        with self._db() as db:
            db.execute(
                "UPDATE launches SET status = ?, instance_id = COALESCE(?, instance_id),"
                " error = ?, updated_at = ? WHERE launch_id = ?",
                (status, instance_id, error, utcnow().isoformat(), launch_id))

    def mark_deleted(self, provider: str, instance_id: str) -> None:
        with self._db() as db:
            db.execute("UPDATE launches SET status = 'deleted', updated_at = ?"
                       " WHERE provider = ? AND instance_id = ?",
                       (utcnow().isoformat(), provider, instance_id))

    def set_deadline(self, provider: str, instance_id: str, shutdown_at: datetime | None) -> None:
        """The local copy of a moved deadline (extend); the provider's copy is the truth."""
        with self._db() as db:
            db.execute("UPDATE launches SET shutdown_at = ?, updated_at = ?"
                       " WHERE provider = ? AND instance_id = ?",
                       (shutdown_at.isoformat() if shutdown_at else None, utcnow().isoformat(),
                        provider, instance_id))

    def unresolved(self) -> list[LaunchRecord]:
        """Launches sent but never recorded as delivered or failed: each machine may
        exist (a crash, an interrupt, an ambiguous reply). reconcile settles them."""
        return self._rows("WHERE status IN ('intent', 'ambiguous')", ())

    def _rows(self, where: str, args: tuple[object, ...]) -> list[LaunchRecord]:
        with self._db() as db:
            rows = db.execute(
                "SELECT launch_id, provider, instance_type, region, name, status, instance_id,"
                " price_per_hour, shutdown_at, error, created_at, batch_key, slot"
                f" FROM launches {where}"
                " ORDER BY created_at", args).fetchall()
        return [LaunchRecord(
            launch_id=r[0], provider=r[1], instance_type=r[2], region=r[3], name=r[4],
            status=r[5], instance_id=r[6], price_per_hour=r[7],
            shutdown_at=datetime.fromisoformat(r[8]) if r[8] else None, error=r[9],
            created_at=datetime.fromisoformat(r[10]), batch_key=r[11], slot=r[12])
            for r in rows]

    def get(self, launch_id: str) -> LaunchRecord | None:
        rows = self._rows("WHERE launch_id = ?", (launch_id,))
        return rows[0] if rows else None

    def by_instance(self, provider: str, instance_id: str) -> LaunchRecord | None:
        rows = self._rows("WHERE provider = ? AND instance_id = ?", (provider, instance_id))
        return rows[-1] if rows else None

    def all(self) -> list[LaunchRecord]:
        return self._rows("", ())

    def batch(self, batch_key: str) -> list[LaunchRecord]:
        """Every launch of one batch (each with its slot), oldest first."""
        return self._rows("WHERE batch_key = ?", (batch_key,))


def _add_columns(conn: sqlite3.Connection) -> None:
    have = {row[1] for row in conn.execute("PRAGMA table_info(launches)")}
    for column, kind in ADDED_COLUMNS.items():
        if column not in have:
            try:
                conn.execute(f"ALTER TABLE launches ADD COLUMN {column} {kind}")
            except sqlite3.OperationalError as exc:  # another thread added it first
                if "duplicate column" not in str(exc):
                    raise
    conn.execute("CREATE INDEX IF NOT EXISTS launches_batch ON launches (batch_key, slot)")
