"""What the last listing of this process read or wrote of the ledger, per
journal file, so that a script or `reap --watch` listing every few seconds
reads the latest rows again only when another connection committed since.

SQLite's data_version moves then, and only then; this process's own appends
forget the memo (``forget``). Accessed under the journal's lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucloud.safety.journal import Journal

# A machine's latest ledger row (ledger.Row: this module sits below the ledger
# and keeps the rows as given).
Row = Any

# journal path -> (connection id, data_version, latest rows, machines seen
# without a row, providers listed in full). The machines it covers are those
# of the two: each row is the latest there is, each of the others has none.
_MEMO: dict[str, tuple[int, int, dict[tuple[str, str], Row], set[tuple[str, str]],
                       frozenset[str]]] = {}


def _valid(journal: Journal, db: sqlite3.Connection) -> tuple[Any, ...] | None:
    memo = _MEMO.get(str(journal.path))
    if memo is None or memo[0] != id(db) \
            or db.execute("PRAGMA data_version").fetchone()[0] != memo[1]:
        return None
    return memo


def remembered(journal: Journal, db: sqlite3.Connection, machines: set[tuple[str, str]],
               providers: set[str]) -> dict[tuple[str, str], Row] | None:
    """The latest rows of `machines` and of the open machines of `providers`,
    when the last listing covered them all and nothing was committed since."""
    memo = _valid(journal, db)
    if memo is None or not providers <= memo[4] \
            or any(k not in memo[2] and k not in memo[3] for k in machines):
        return None
    return {k: v for k, v in memo[2].items() if k in machines or k[0] in providers}


def remembered_rows(journal: Journal, db: sqlite3.Connection,
                    machines: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Row] | None:
    """The latest rows of `machines` (one page of a listing), when the last
    listing covered each of them and nothing was committed since; a machine it
    covered without a row has none."""
    memo = _valid(journal, db)
    if memo is None:
        return None
    latest, unrecorded = memo[2], memo[3]
    found = {}
    for key in machines:
        row = latest.get(key)
        if row is not None:
            found[key] = row
        elif key not in unrecorded:
            return None
    return found


def remembered_open(journal: Journal, db: sqlite3.Connection, providers: set[str],
                    seen: Container[tuple[str, str]],
                    seen_too: Container[tuple[str, str]] = ()) -> dict[tuple[str, str], Row] | None:
    """The latest rows of the machines of `providers` the last listing had
    open and this one has not seen (in neither `seen` nor `seen_too`), when it
    listed those providers in full and nothing was committed since."""
    memo = _valid(journal, db)
    if memo is None or not providers <= memo[4]:
        return None
    return {k: v for k, v in memo[2].items()
            if k[0] in providers and k not in seen and k not in seen_too}


def remember(journal: Journal, db: sqlite3.Connection, latest: dict[tuple[str, str], Row],
             unrecorded: set[tuple[str, str]], providers: set[str]) -> None:
    """`latest`: the latest row of every machine the listing read or wrote;
    `unrecorded`: those it saw that have none. Kept as they are (the caller
    hands them over and changes them no more: a copy of a listing's ten
    thousand rows would double what the listing holds)."""
    version = db.execute("PRAGMA data_version").fetchone()[0]
    _MEMO[str(journal.path)] = (id(db), version, latest, unrecorded, frozenset(providers))


def forget(journal: Journal) -> None:
    """This process wrote to the ledger: the memo is stale."""
    _MEMO.pop(str(journal.path), None)


__all__ = ["forget", "remember", "remembered", "remembered_open", "remembered_rows"]
