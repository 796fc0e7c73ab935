"""What the last listing of this process made of the ledger, per journal
file, so that a script or `reap --watch` listing every few seconds reads the
latest rows again only when another connection committed since.

SQLite's data_version moves then, and only then; this process's own appends
forget the memo (``forget``). Accessed under the journal's lock.

Per machine the listing showed it keeps what the listing compares of its
latest row (ledger.Last, as given: this module sits below the ledger), not
the row: a listing of ten thousand machines leaves about their ids behind.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucloud.safety.journal import Journal

# ledger.Last of a machine's latest row, None when it has none; ledger.Row.
Last = Any
Row = Any
Key = tuple[str, str]

# journal path -> (the connection, its data_version, provider -> instance id ->
# Last of every machine the listing showed, the latest rows of the open
# machines of the providers listed in full that it did not show, those
# providers). The connection itself, not its id(): data_version is only
# comparable on one connection (a new one starts over), and a connection
# opened afresh (the file's stamp moved) may sit where the last one did.
_MEMO: dict[str, tuple[sqlite3.Connection, int, dict[str, dict[str, Last]],
                       dict[Key, Row], frozenset[str]]] = {}


def _valid(journal: Journal, db: sqlite3.Connection) -> tuple[Any, ...] | None:
    memo = _MEMO.get(str(journal.path))
    if memo is None or not isinstance(db, sqlite3.Connection) or memo[0] is not db \
            or db.execute("PRAGMA data_version").fetchone()[0] != memo[1]:
        return None
    return memo


def remembered(journal: Journal, db: sqlite3.Connection,
               machines: Iterable[Key]) -> dict[Key, Last] | None:
    """The Last of each of `machines` (one page of a listing) that has a
    row, when the last listing showed each of them and nothing was committed
    since."""
    memo = _valid(journal, db)
    if memo is None:
        return None
    shown = memo[2]
    found = {}
    for key in machines:
        ids = shown.get(key[0])
        if ids is None or key[1] not in ids:
            return None
        last = ids[key[1]]
        if last is not None:
            found[key] = last
    return found


def remembered_open(journal: Journal, db: sqlite3.Connection, providers: set[str],
                    seen: Container[Key]) -> tuple[dict[Key, Row], list[tuple[Key, Last]]] | None:
    """What the last listing knew of the machines of `providers` this one has
    not seen (in `seen`), when it listed those providers in full and nothing
    was committed since: the latest rows of the open ones it did not show
    either, and the Last of each it showed (the caller reads the rows of
    those still open)."""
    memo = _valid(journal, db)
    if memo is None or not providers <= memo[4]:
        return None
    rows = {k: v for k, v in memo[3].items() if k[0] in providers and k not in seen}
    shown = [((provider, ident), last) for provider in providers
             for ident, last in memo[2].get(provider, {}).items()
             if (provider, ident) not in seen]
    return rows, shown


def remember(journal: Journal, db: sqlite3.Connection, shown: dict[str, dict[str, Last]],
             unshown: dict[Key, Row], providers: set[str]) -> None:
    """`shown`: the Last of every machine the listing showed (None: no row);
    `unshown`: the latest rows of the open machines of `providers` (listed in
    full) it did not show. Kept as they are (the caller hands them over and
    changes them no more)."""
    if not isinstance(db, sqlite3.Connection):
        # A team database changes under other computers' writes with no
        # counter to read: every listing reads the ledger afresh.
        return
    version = db.execute("PRAGMA data_version").fetchone()[0]
    _MEMO[str(journal.path)] = (db, version, shown, unshown, frozenset(providers))


def forget(journal: Journal) -> None:
    """This process wrote to the ledger: the memo is stale."""
    _MEMO.pop(str(journal.path), None)


__all__ = ["forget", "remember", "remembered", "remembered_open"]
