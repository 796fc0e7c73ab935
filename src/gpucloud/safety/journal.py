"""The client's journal: launch intents and outcomes, deadlines, in SQLite.

A launch is written as an *intent* before its request is sent and marked
*delivered* (with the provider's id) after; a crash or an ambiguous failure
between the two leaves the intent, which reconcile repairs by listing the
provider and matching the launch id — never by guessing.
Nothing secret is ever stored here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, ContextManager, Protocol

from gpucloud.config.identity import Identity, who
from gpucloud.errors import StateError
from gpucloud.safety import schema_version
from gpucloud.safety.state_file import (  # noqa: F401 - release: the journal's name for it
    Schema, SharedFile, file_stamp, release, shared,
)

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
-- what every listing asks (unresolved): the few launches never settled, not all
CREATE INDEX IF NOT EXISTS launches_unresolved ON launches (created_at)
    WHERE status IN ('intent', 'ambiguous');
"""
# Columns added after the first release (ALTER TABLE on journals made before):
# a batch's key and the slot (0..N-1) a launch fills, so a restarted batch
# knows which machines an earlier run made (batch.py); the path of the public
# key file create sent (a path only, never key text), so ssh logs in with its
# private half (ssh.py); what the launch commits of this month's budget (a
# Decimal as text; budget.py counts it until the machine is in the ledger);
# the queue task whose process sent the launch (GPUCLOUD_TASK_ID, set by the
# worker in each task's environment), so a task's machines can be found; who
# launched it and for which project (config/identity.py: labels, never access
# control), which the per-user and per-project budgets count by.
ADDED_COLUMNS = {"batch_key": "TEXT", "slot": "INTEGER", "ssh_key_path": "TEXT",
                 "committed": "TEXT", "task_id": "TEXT", "user_name": "TEXT", "host": "TEXT",
                 "project": "TEXT"}
BATCH_INDEX = "CREATE INDEX IF NOT EXISTS launches_batch ON launches (batch_key, slot)"


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
    ssh_key_path: str | None = None
    task_id: str | None = None
    user_name: str | None = None  # None: journaled before identities were recorded
    host: str | None = None
    project: str | None = None


# SQLite's default bound on the variables of one statement, kept under.
CHUNK = 900

# A launch sent and not yet settled: its machine may exist (reconcile settles it).
UNRESOLVED = ("intent", "ambiguous")


def _setup(conn: sqlite3.Connection) -> None:
    """The journal's tables on a newly opened connection (and the columns added
    since the first release, on a file made before them); a file stamped by a
    newer gpucloud is refused before anything is written to it."""
    (found,) = conn.execute("PRAGMA user_version").fetchone()
    if found > schema_version.VERSION:
        raise schema_version.too_new(found, str(_path_of(conn)))
    conn.executescript(SCHEMA)
    _add_columns(conn)
    if found < schema_version.VERSION:
        conn.execute(f"PRAGMA user_version = {int(schema_version.VERSION)}")


def _path_of(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row else "the state file"


def _shared(path: Path) -> SharedFile:
    """The process's connection to this journal file (state_file.py)."""
    return shared(path, _setup)


class TeamStore(Protocol):
    """A team database holding the journal (store_postgres.PostgresStore)."""

    shown: str  # as messages name it: never with a password

    @property
    def db_errors(self) -> tuple[type[BaseException], ...]: ...

    def session(self) -> ContextManager[Any]: ...

    def immediate(self) -> ContextManager[Any]: ...


class Journal:
    """The launches of a home (`path`, the local SQLite file), or of a team
    (`url`, a PostgreSQL database: store_postgres.py), through one interface:
    the same statements and transactions on either store."""

    def __init__(self, path: Path, team: TeamStore | None = None) -> None:
        self.path = path
        self.team = team

    def __repr__(self) -> str:
        return f"Journal({self.team.shown if self.team else str(self.path)!r})"

    @property
    def where(self) -> str:
        """The store, as messages name it (never with a password)."""
        return self.team.shown if self.team is not None else str(self.path)

    @property
    def db_errors(self) -> tuple[type[BaseException], ...]:
        """The store's driver errors: a write that raised one leaves its
        transaction not to be trusted (group_commit.py fails it whole)."""
        return self.team.db_errors if self.team is not None else (sqlite3.Error,)

    def exists(self) -> bool:
        """Whether there is state to read: reading never creates a local file,
        and a team database is there by configuration."""
        return self.team is not None or self.path.exists()

    @contextmanager
    def _db(self, schema: Schema = ()) -> Iterator[sqlite3.Connection]:
        """The process's connection to this journal, in a transaction committed on
        success; `schema`: statements another module needs, run once per connection."""
        with self._session(schema, create=True) as conn:
            assert conn is not None  # created when missing
            yield conn

    @contextmanager
    def _session(self, schema: Schema,
                 create: bool) -> Iterator[sqlite3.Connection | None]:
        """As _db; None instead when the file is missing and `create` is false."""
        if self.team is not None:
            with self.team.session() as conn:
                yield conn  # type: ignore[misc]
            return
        shared = _shared(self.path)
        with shared.lock:
            if shared.held and shared.conn is not None:
                # Inside exclusive() on this thread (the lock is reentrant, so no
                # other thread is here): part of its transaction, committed by it.
                shared.ensure(schema)
                yield shared.conn
                return
            try:
                conn = shared.connection(create)
                if conn is None:
                    yield None
                    return
                shared.ensure(schema)
                changes = conn.total_changes if shared.stamp is not None else -1
                with conn:
                    yield conn
                if conn.total_changes != changes:  # a commit may have checkpointed
                    shared.stamp = file_stamp(self.path)
            except (sqlite3.Error, OSError) as exc:
                shared.drop()  # a damaged file is looked at afresh next time
                raise self._unusable(exc) from exc

    @contextmanager
    def exclusive(self, schema: Schema = ()) -> Iterator[sqlite3.Connection]:
        """The transaction of a decision and the record it leads to (the budget's
        admission, an extension, a batch's pass): ``immediate``. Named apart from
        the group commit's own transactions (group_commit.py), which a
        decision made inside one joins."""
        with self.immediate(schema) as conn:
            yield conn

    @contextmanager
    def immediate(self, schema: Schema = ()) -> Iterator[sqlite3.Connection]:
        """One write transaction taken before anything is read (BEGIN IMMEDIATE):
        what is read inside it cannot change until it commits, in this process or
        any other using the file, so a decision and the record it leads to are
        one step (the budget's admission of a launch). Journal and ledger calls
        made inside it, by this thread, join it. Keep it short: every other
        writer of the home waits (busy_timeout) until it ends. In a team
        database: a transaction holding the team's admission lock, the same
        guarantee across every computer of the team."""
        if self.team is not None:
            with self.team.immediate() as conn:
                yield conn  # type: ignore[misc]
            return
        shared = _shared(self.path)
        with shared.lock:
            if shared.held and shared.conn is not None:
                # Inside one on this thread already (a group commit's, which
                # an admission joins): one transaction, committed by the outer one.
                shared.ensure(schema)
                yield shared.conn
                return
            try:
                conn = shared.connection(True)
                assert conn is not None  # created when missing
                shared.ensure(schema)
                try:
                    # Inside the try: an interrupt right after BEGIN must still
                    # roll back, or the home's write lock stays held.
                    conn.execute("BEGIN IMMEDIATE")
                    shared.held = True
                    yield conn
                except BaseException:
                    try:
                        conn.rollback()
                    except sqlite3.Error:
                        pass  # the connection is dropped below when it failed
                    raise
                finally:
                    shared.held = False
                conn.commit()
                shared.stamp = file_stamp(self.path)
            except (sqlite3.Error, OSError) as exc:
                shared.drop()
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
                      batch_key: str | None = None, slot: int | None = None,
                      ssh_key_path: str | None = None, committed: Decimal | None = None,
                      task_id: str | None = None, project: str | None = None,
                      identity: Identity | None = None) -> None:
        """`identity`: who launches (default: this process's, config/identity.py)."""
        now = utcnow().isoformat()
        me = identity or who()
        with self._db() as db:
            db.execute(
                "INSERT INTO launches (launch_id, provider, instance_type, region, name, status,"
                " price_per_hour, shutdown_at, created_at, updated_at, batch_key, slot,"
                " ssh_key_path, committed, task_id, user_name, host, project)"
                " VALUES (?, ?, ?, ?, ?, 'intent', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (launch_id, provider, instance_type, region, name, price_per_hour,
                 shutdown_at.isoformat() if shutdown_at else None, now, now, batch_key, slot,
                 ssh_key_path, str(committed) if committed is not None else None, task_id,
                 me.user, me.host, project))

    def mark(self, launch_id: str, status: str, *, instance_id: str | None = None,
             error: str | None = None) -> None:
        with self._db() as db:
            db.execute(
                "UPDATE launches SET status = ?, instance_id = COALESCE(?, instance_id),"
                " error = ?, updated_at = ? WHERE launch_id = ?",
                (status, instance_id, error, utcnow().isoformat(), launch_id))

    def mark_all_delivered(self, launches: Iterable[tuple[str, str]]) -> None:
        """Launches (launch id, instance id) delivered, in one statement: ``mark``
        of each with status delivered."""
        now = utcnow().isoformat()
        with self._db() as db:
            db.executemany(
                "UPDATE launches SET status = 'delivered', instance_id = COALESCE(?, instance_id),"
                " error = NULL, updated_at = ? WHERE launch_id = ?",
                [(instance_id, now, launch_id) for launch_id, instance_id in launches])

    def mark_deleted(self, provider: str, instance_id: str) -> None:
        self.mark_all_deleted([(provider, instance_id)])

    def mark_all_deleted(self, machines: Iterable[tuple[str, str]]) -> None:
        """Machines (provider, instance id) deleted or reaped, in one transaction."""
        now = utcnow().isoformat()
        with self._db() as db:
            db.executemany("UPDATE launches SET status = 'deleted', updated_at = ?"
                           " WHERE provider = ? AND instance_id = ?",
                           [(now, provider, instance_id) for provider, instance_id in machines])

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

    def _rows(self, where: str, args: tuple[object, ...],
              create: bool = True) -> list[LaunchRecord]:
        with self._session((), create) as db:
            if db is None:
                return []  # reading never creates the journal
            rows = db.execute(
                "SELECT launch_id, provider, instance_type, region, name, status, instance_id,"
                " price_per_hour, shutdown_at, error, created_at, batch_key, slot, ssh_key_path,"
                f" task_id, user_name, host, project FROM launches {where}"
                " ORDER BY created_at", args).fetchall()
        return [LaunchRecord(
            launch_id=r[0], provider=r[1], instance_type=r[2], region=r[3], name=r[4],
            status=r[5], instance_id=r[6], price_per_hour=r[7],
            shutdown_at=datetime.fromisoformat(r[8]) if r[8] else None, error=r[9],
            created_at=datetime.fromisoformat(r[10]), batch_key=r[11], slot=r[12],
            ssh_key_path=r[13], task_id=r[14], user_name=r[15], host=r[16], project=r[17])
            for r in rows]

    def get(self, launch_id: str) -> LaunchRecord | None:
        rows = self._rows("WHERE launch_id = ?", (launch_id,))
        return rows[0] if rows else None

    def by_instance(self, provider: str, instance_id: str) -> LaunchRecord | None:
        rows = self._rows("WHERE provider = ? AND instance_id = ?", (provider, instance_id),
                          create=False)
        return rows[-1] if rows else None

    def deadline(self, provider: str, instance_id: str) -> datetime | None:
        """The deadline of the machine's latest launch here (by_instance's
        shutdown_at) in one indexed read that builds no record: every get
        asks it. Reading never creates the journal."""
        with self._session((), False) as db:
            if db is None:
                return None
            row = db.execute("SELECT shutdown_at FROM launches WHERE provider = ? AND"
                             " instance_id = ? ORDER BY created_at DESC LIMIT 1",
                             (provider, instance_id)).fetchone()
        return datetime.fromisoformat(row[0]) if row is not None and row[0] else None

    def ssh_key_path(self, provider: str, instance_id: str) -> str | None:
        """The public key file the machine's launch sent, when this computer
        launched it from a file; None otherwise. Reading never creates the journal."""
        record = self.by_instance(provider, instance_id)
        return record.ssh_key_path if record is not None else None

    def by_instances(self, provider: str, instance_ids: Iterable[str]) -> dict[str, LaunchRecord]:
        """The latest launch of each of a provider's machines, in one query per
        CHUNK ids (a listing's worth). Reading never creates the journal."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return {}
        found: dict[str, LaunchRecord] = {}
        for start in range(0, len(ids), CHUNK):
            part = ids[start:start + CHUNK]
            marks = ", ".join("?" for _ in part)
            for record in self._rows(f"WHERE provider = ? AND instance_id IN ({marks})",
                                     (provider, *part), create=False):
                found[record.instance_id or ""] = record  # ordered: the latest wins
        return found

    def by_launch_ids(self, launch_ids: Iterable[str]) -> dict[str, LaunchRecord]:
        """The launches of these ids (through the primary key), one query per CHUNK
        ids: what reconcile needs of the journal for the machines a listing shows,
        however long the journal's history."""
        ids = list(dict.fromkeys(launch_ids))
        found: dict[str, LaunchRecord] = {}
        for start in range(0, len(ids), CHUNK):
            part = ids[start:start + CHUNK]
            marks = ", ".join("?" for _ in part)
            for record in self._rows(f"WHERE launch_id IN ({marks})", tuple(part)):
                found[record.launch_id] = record
        return found

    def all(self) -> list[LaunchRecord]:
        return self._rows("", ())

    def batch(self, batch_key: str) -> list[LaunchRecord]:
        """Every launch of one batch (each with its slot), oldest first."""
        return self._rows("WHERE batch_key = ?", (batch_key,))


def _add_columns(conn: sqlite3.Connection) -> None:
    add_columns(conn, "launches", ADDED_COLUMNS)
    conn.execute(BATCH_INDEX)


def add_columns(conn: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    """The columns of `columns` that `table` (made by an older gpucloud) lacks."""
    have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    for column, kind in columns.items():
        if column not in have:
            try:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            except sqlite3.OperationalError as exc:  # another thread added it first
                if "duplicate column" not in str(exc):
                    raise
