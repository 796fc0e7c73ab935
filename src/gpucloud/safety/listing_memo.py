"""What the last listing of this process read or wrote of the ledger, per
journal file, so that a script or `reap --watch` listing every few seconds
reads the latest rows again only when another connection committed since.

SQLite's data_version moves then, and only then; this process's own appends
forget the memo (``forget``). Accessed under the journal's lock.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucloud.safety.journal import Journal

# A machine's latest ledger row (ledger.Row: this module sits below the ledger
# and keeps the rows as given).
Row = Any

# journal path -> (connection id, data_version, latest rows, machines covered,
# providers listed in full)
_MEMO: dict[str, tuple[int, int, dict[tuple[str, str], Row], set[tuple[str, str]],
                       frozenset[str]]] = {}


def remembered(journal: Journal, db: sqlite3.Connection, machines: set[tuple[str, str]],
                providers: set[str]) -> dict[tuple[str, str], Row] | None:
    memo = _MEMO.get(str(journal.path))
    if memo is None:
        return None
    conn, version, latest, covered, listed = memo
    if conn != id(db) or not machines <= covered or not providers <= listed \
            or db.execute("PRAGMA data_version").fetchone()[0] != version:
        return None
    return {k: v for k, v in latest.items() if k in machines or k[0] in providers}


def remember(journal: Journal, db: sqlite3.Connection, latest: dict[tuple[str, str], Row],
              machines: set[tuple[str, str]], providers: set[str]) -> None:
    version = db.execute("PRAGMA data_version").fetchone()[0]
    _MEMO[str(journal.path)] = (id(db), version, dict(latest), set(machines),
                                frozenset(providers))


def forget(journal: Journal) -> None:
    """This process wrote to the ledger: the memo is stale."""
    _MEMO.pop(str(journal.path), None)


__all__ = ["forget", "remember", "remembered"]
