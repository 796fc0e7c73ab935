"""The process's connection to each state file: one per file, shared by the
threads of a client one at a time, opened afresh when the file was replaced,
never used across a fork, and few kept open at once.

The journal (journal.py) owns the file and its tables; the ledger's tables
live in the same file (``Journal._db(schema)`` makes them once per connection).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from gpucloud.config.sqlite_wal import use_wal

# One connection per process per journal file: opening one and creating the
# schema cost more than the statements a launch runs. Keyed by pid too, since
# a forked child (the queue worker) must never use its parent's connection.
_SHARED: dict[tuple[int, str], SharedFile] = {}
_SHARED_LOCK = threading.Lock()
# Statements another module needs in the state file (SQL, or a function of the
# connection): Journal._db runs them once per connection.
Schema = tuple[str | Callable[[sqlite3.Connection], None], ...]

KEPT_OPEN = 8


class SharedFile:
    """A journal file's connection in this process, its lock, and what was
    created on it; `stamp` is the file as it was when last used, so a file
    replaced, moved away or overwritten by someone else is opened afresh."""

    def __init__(self, path: Path, setup: Callable[[sqlite3.Connection], None]) -> None:
        self.lock = threading.RLock()
        self.path = path
        self.setup = setup  # the file's own tables, made on every new connection
        self.conn: sqlite3.Connection | None = None
        self.schemas: set[str] = set()
        self.stamp: tuple[int, ...] | None = None
        # True while this process holds the file's write lock (Journal.exclusive):
        # statements of the thread holding `lock` then join that transaction.
        self.held = False

    def connection(self, create: bool = True) -> sqlite3.Connection | None:
        """The connection; None when the file does not exist and `create` is false."""
        stamp = file_stamp(self.path)
        if self.conn is not None and (stamp is None or stamp != self.stamp):
            self.drop()
        if self.conn is None:
            if stamp is None and not create:
                return None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Threads of a Client share it, one at a time (self.lock).
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            try:
                conn.execute("PRAGMA busy_timeout = 30000")
                use_wal(conn)  # a burst of processes opening one new home
                conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL: no corruption
                self.setup(conn)
            except BaseException:
                conn.close()
                raise
            self.conn, self.schemas = conn, set()
        return self.conn

    def ensure(self, statements: Schema) -> None:
        """Another module's tables in the same file (the ledger), created once: SQL
        statements, or functions of the connection for a step SQL cannot say
        alone (fill a new table from the rows already there)."""
        key = "\n".join(s if isinstance(s, str) else s.__qualname__ for s in statements)
        if key in self.schemas or self.conn is None:
            return
        for statement in statements:
            if isinstance(statement, str):
                self.conn.execute(statement)
            else:
                statement(self.conn)
        self.schemas.add(key)

    def drop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except sqlite3.Error:
                pass
        self.conn, self.schemas, self.stamp = None, set(), None


def file_stamp(path: Path) -> tuple[int, ...] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def shared(path: Path, setup: Callable[[sqlite3.Connection], None]) -> SharedFile:
    """The process's connection to the state file at `path`; `setup` makes the
    file's tables on a new connection (the journal's: the file's owner)."""
    key = (os.getpid(), str(path))
    found = _SHARED.get(key)  # a dict read is atomic: every lookup of a get comes here
    if found is not None:
        return found
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None:
            if any(pid != key[0] for pid, _ in _SHARED):
                # A forked child: its parent's connections are not its own to
                # use nor to close (closing could checkpoint under the parent).
                for stale in [k for k in _SHARED if k[0] != key[0]]:
                    del _SHARED[stale]
            found = _SHARED[key] = SharedFile(path, setup)
            _close_idle(key)
        return found


def _close_idle(keep: tuple[int, str]) -> None:
    """Bound the files kept open (a test suite, a script walking many homes):
    the least recently opened ones not in use are closed; they reopen on use."""
    for key in list(_SHARED)[:-KEPT_OPEN]:
        shared = _SHARED[key]
        if key != keep and shared.lock.acquire(blocking=False):
            try:
                shared.drop()
                del _SHARED[key]
            finally:
                shared.lock.release()


def _forget_after_fork() -> None:
    global _SHARED_LOCK
    _SHARED.clear()  # the parent's: neither used nor closed here
    _SHARED_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def release() -> None:
    """Close this process's state-file connections (they reopen on next use). The
    last one closed folds the write-ahead log back into the file, as a process
    exiting does."""
    with _SHARED_LOCK:
        mine = [s for (pid, _), s in _SHARED.items() if pid == os.getpid()]
    for shared in mine:
        with shared.lock:
            shared.drop()


__all__ = ["KEPT_OPEN", "Schema", "SharedFile", "file_stamp", "release", "shared"]
