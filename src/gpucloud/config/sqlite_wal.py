"""The switch of a local SQLite file (the state file, the sandbox's cloud) to
its write-ahead log, which lets readers go on while one process writes.

The mode is kept in the file, so once is enough; but switching a file needs it
alone, and SQLite answers "database is locked" at once, without its busy wait,
while another process has it open (a burst of commands opening one new home
together). The switch is tried again until the wait a connection's own busy
timeout would give.
"""

from __future__ import annotations

import sqlite3
import time

WAL_WAIT_SECONDS = 30.0  # as the connections' own busy timeout


def use_wal(db: sqlite3.Connection, wait: float = WAL_WAIT_SECONDS) -> None:
    """Put the file of `db` in write-ahead-log mode, waiting out other openers."""
    deadline = time.monotonic() + wait
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


__all__ = ["WAL_WAIT_SECONDS", "use_wal"]
