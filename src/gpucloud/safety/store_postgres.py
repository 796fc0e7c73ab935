"""The team's state in PostgreSQL: one journal, ledger and budget for many
computers (team mode: ``[state] url`` or ``GPUCLOUD_STATE_URL``).

The local store is one SQLite file per home (state_file.py); this one is a
database many processes on many machines share. It offers the journal the
same two calls (``session``: statements in one transaction; ``immediate``: a
decision and its record, serialized across every process of the team), and
runs the same SQL: the modules above write portable statements with ``?``
placeholders, converted here to psycopg's ``%s``.

* The password never comes from the URL: libpq's own sources (``PGPASSWORD``,
  ``~/.pgpass``, a service file), else the keyring's ``gpucloud`` / ``state``
  entry. The URL shown anywhere has no password in it.
* The schema is versioned (``gpucloud_schema``): migrations are applied on
  first use, under a lock, and checked on every start; a database newer than
  this gpucloud is refused (exit 3, both versions named) before anything is
  read or written.
* ``immediate`` takes a transaction-scoped advisory lock, as SQLite's BEGIN
  IMMEDIATE takes the file's write lock: twenty admissions from twenty
  computers check the budget one at a time.
* Session-scoped advisory locks (``advisory``) hold a batch key or the
  reaper's leadership on a connection of their own: the server drops them
  when the holder's connection ends, a killed process included.

psycopg is imported only here, and this module only when a URL is set: the
local mode's start-up is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gpucloud.config.state_url import display
from gpucloud.errors import StateError
from gpucloud.safety.store_schema import ADMIT, LOCK_CLASS, migrate



def _convert(sql: str) -> str:
    """qmark placeholders to psycopg's format style, outside string literals;
    a literal % doubled, as the format style needs."""
    pieces = sql.split("'")
    for i in range(0, len(pieces), 2):  # even pieces are outside quotes
        pieces[i] = pieces[i].replace("%", "%%").replace("?", "%s")
    for i in range(1, len(pieces), 2):
        pieces[i] = pieces[i].replace("%", "%%")
    return "'".join(pieces)


_CONVERTED: dict[str, str] = {}


def convert(sql: str) -> str:
    found = _CONVERTED.get(sql)
    if found is None:
        found = _CONVERTED[sql] = _convert(sql)
    return found


class PgConnection:
    """What the journal and ledger modules use of a database connection, on
    psycopg: execute / executemany with ``?`` placeholders, rows as tuples."""

    team = True

    def __init__(self, conn: Any) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cur = self.raw.cursor()
        if params:
            cur.execute(convert(sql), tuple(params))
        else:
            cur.execute(sql)  # no parameters: psycopg sends it as it is, % and all
        return cur

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> Any:
        rows = [tuple(r) for r in seq]
        cur = self.raw.cursor()
        if rows:
            cur.executemany(convert(sql), rows)
        return cur

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return bool(self.raw.info.transaction_status != TransactionStatus.IDLE)

    def __repr__(self) -> str:
        return "PgConnection()"


def _bool_as_int(conn: Any) -> None:
    """Python bools into the INTEGER columns the SQLite schema declares (0/1),
    as sqlite3 stores them, so both stores read back the same values."""
    from psycopg.adapt import Dumper

    class BoolAsInt(Dumper):
        oid = conn.adapters.types["int4"].oid

        def dump(self, obj: bool) -> bytes:
            return b"1" if obj else b"0"

    conn.adapters.register_dumper(bool, BoolAsInt)


def _password(url: str) -> str | None:
    """The keyring's password for the team database, only when libpq has none
    of its own (PGPASSWORD, a password file, a service): those come first."""
    if os.environ.get("PGPASSWORD") or os.environ.get("PGSERVICE") or "service=" in url:
        return None
    passfile = os.environ.get("PGPASSFILE") or os.path.expanduser("~/.pgpass")
    if os.path.isfile(passfile):
        return None
    from gpucloud.config.credentials import _keyring_get

    value, _problem = _keyring_get("state")
    return value


@dataclass
class _Shared:
    """This process's connection to one team database, one thread at a time."""

    lock: threading.RLock
    conn: PgConnection | None = None
    held: bool = False  # inside immediate() on the thread holding `lock`


_SHARED: dict[tuple[int, str], _Shared] = {}
_SHARED_LOCK = threading.Lock()
_CHECKED: set[tuple[int, str]] = set()


def _forget_after_fork() -> None:
    global _SHARED_LOCK
    # The parent's connections: never used in the child. Dropping them is
    # safe: psycopg's PGconn ends a session only in the process that opened it.
    _SHARED.clear()
    _CHECKED.clear()
    _SHARED_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class PostgresStore:
    """The team database at `url` (a postgresql:// URL without a password)."""

    team = True

    def __init__(self, url: str) -> None:
        self.url = url
        self.shown = display(url)

    def __repr__(self) -> str:
        return f"PostgresStore({self.shown!r})"

    def exists(self) -> bool:
        return True  # a team database is there by configuration

    @property
    def db_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.Error,)

    # -- connections ---------------------------------------------------------

    def connect(self, name: str = "gpucloud") -> PgConnection:
        """A new connection of its own (advisory session locks live on one),
        with the schema checked; `name`: its application_name, which other
        sessions see in pg_stat_activity (who holds a lock)."""
        try:
            import psycopg
        except ImportError:
            raise StateError(
                "team mode needs the PostgreSQL driver, which is not installed",
                path=self.shown,
                hint="pip install 'gpucloud[team]' (psycopg 3), or unset [state] url "
                     "and GPUCLOUD_STATE_URL for the local state file") from None
        password = _password(self.url)
        try:
            raw = psycopg.connect(self.url, autocommit=True, connect_timeout=10,
                                  application_name=name[:63],
                                  **({"password": password} if password else {}))
        except psycopg.Error as exc:
            raise self._unusable(exc, password) from None
        _bool_as_int(raw)
        conn = PgConnection(raw)
        key = (os.getpid(), self.url)
        if key not in _CHECKED:
            try:
                migrate(conn, self.shown)
            except psycopg.Error as exc:
                raw.close()
                raise self._unusable(exc, password) from None
            except BaseException:
                raw.close()
                raise
            _CHECKED.add(key)
        return conn

    def _shared(self) -> _Shared:
        key = (os.getpid(), self.url)
        found = _SHARED.get(key)
        if found is None:
            with _SHARED_LOCK:
                found = _SHARED.setdefault(key, _Shared(threading.RLock()))
        return found

    @contextmanager
    def session(self, schema: object = (), create: bool = True) -> Iterator[PgConnection]:
        """Statements in one transaction (committed on success), on this
        process's connection; joins the immediate() of this thread."""
        with self._transaction(admit=False) as conn:
            yield conn

    @contextmanager
    def immediate(self, schema: object = ()) -> Iterator[PgConnection]:
        """One transaction holding the team's admission lock: a decision and
        the record it leads to, one process of the team at a time."""
        with self._transaction(admit=True) as conn:
            yield conn

    @contextmanager
    def _transaction(self, admit: bool) -> Iterator[PgConnection]:
        import psycopg

        shared = self._shared()
        with shared.lock:
            if shared.held and shared.conn is not None:
                yield shared.conn  # inside immediate() on this thread: its transaction
                return
            try:
                if shared.conn is None or shared.conn.raw.closed:
                    shared.conn = self.connect()
                conn = shared.conn
                with conn.raw.transaction():
                    if not admit:
                        yield conn
                        return
                    conn.execute("SELECT pg_advisory_xact_lock(?, ?)", (LOCK_CLASS, ADMIT))
                    shared.held = True
                    try:
                        yield conn
                    finally:
                        shared.held = False
            except psycopg.Error as exc:
                self._drop(shared)
                raise self._unusable(exc, None) from None

    def release(self) -> None:
        """Close this process's connection (it reopens on next use)."""
        shared = _SHARED.get((os.getpid(), self.url))
        if shared is not None:
            with shared.lock:
                self._drop(shared)

    @staticmethod
    def _drop(shared: _Shared) -> None:
        if shared.conn is not None:
            try:
                shared.conn.raw.close()
            except Exception:  # noqa: BLE001 - a broken connection is dropped anyway
                pass
        shared.conn = None

    # -- session locks -------------------------------------------------------

    def try_advisory(self, purpose: str, holder: str = "gpucloud") -> AdvisoryLock | None:
        """The session lock named `purpose` (a batch key, the reaper), held on a
        connection of its own (named `holder`) until released or the process
        ends; None when another session holds it."""
        import psycopg

        conn = self.connect(holder)
        a, b = lock_key(purpose)
        try:
            got = conn.execute("SELECT pg_try_advisory_lock(?, ?)", (a, b)).fetchone()[0]
        except psycopg.Error as exc:
            conn.raw.close()
            raise self._unusable(exc, None) from None
        if not got:
            conn.raw.close()
            return None
        return AdvisoryLock(conn, a, b)

    def holder(self, purpose: str) -> str | None:
        """The application_name of the session holding lock `purpose`; None when
        nobody holds it, or this role may not see the holder's session."""
        a, b = lock_key(purpose)
        with self.session() as conn:
            row = conn.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a"
                " ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted"
                " AND l.objsubid = 2 AND l.classid = ?::bigint::oid"
                " AND l.objid = ?::bigint::oid", (a & 0xFFFFFFFF, b & 0xFFFFFFFF)).fetchone()
        return row[0] if row and row[0] else None

    def _unusable(self, exc: BaseException, password: str | None) -> StateError:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        for secret in (password, urlsplit(self.url).password):
            if secret:
                detail = detail.replace(secret, "***")
        return StateError(
            f"team state database {self.shown} is unusable: {detail}", path=self.shown,
            hint="check that the server is up and reachable, and the role's password "
                 "(PGPASSWORD, ~/.pgpass or the keyring's gpucloud/state entry)")


def lock_key(purpose: str) -> tuple[int, int]:
    """Two int4s for an advisory lock: gpucloud's class, then a hash of `purpose`."""
    digest = int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "big", signed=True)
    # The class of session locks differs from the transaction locks' (LOCK_CLASS).
    return LOCK_CLASS + 1, digest


class AdvisoryLock:
    """A session advisory lock held on its own connection."""

    def __init__(self, conn: PgConnection, a: int, b: int) -> None:
        self.conn, self._key = conn, (a, b)

    def alive(self) -> bool:
        """Whether the lock is still ours: the connection answers (a lock whose
        connection broke is the server's to give to another)."""
        try:
            row = self.conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND pid = pg_backend_pid() AND objsubid = 2"
                " AND classid = ?::bigint::oid AND objid = ?::bigint::oid",
                (self._key[0] & 0xFFFFFFFF, self._key[1] & 0xFFFFFFFF)).fetchone()
        except Exception:  # noqa: BLE001 - any failure means: not known to be ours
            return False
        return bool(row and row[0])

    def release(self) -> None:
        try:
            self.conn.execute("SELECT pg_advisory_unlock(?, ?)", self._key)
        except Exception:  # noqa: BLE001 - closing the connection releases it too
            pass
        try:
            self.conn.raw.close()
        except Exception:  # noqa: BLE001
            pass


__all__ = ["AdvisoryLock", "PgConnection", "PostgresStore", "convert", "lock_key"]
