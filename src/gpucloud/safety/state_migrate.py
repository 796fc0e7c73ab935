"""`gpucloud state migrate --to URL`: a home's local journal, ledger and volume
records copied into the team database, once.

Run it again and nothing is copied twice: a launch is known by its id, a
volume by its provider and id, and a machine's ledger rows are copied only
when the team's ledger has no row of that machine yet. The latest row of a
machine is its state (ledger.py), so rows of a machine the team already
follows (another computer listed it) are left to the team's own: older local
rows appended after them would turn its state back. Everything is one
transaction holding the team's admission lock: a copy is whole or absent,
and no admission reads the budget half-way through it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from gpucloud.models import _Model
from gpucloud.safety.journal import Journal


class MigrateReport(_Model):
    """What `state migrate` copied, and what the team database had already."""

    source: str  # the local file
    target: str  # the team database, as shown (no password)
    launches_copied: int
    launches_present: int
    ledger_rows_copied: int
    machines_copied: int
    machines_present: int  # the team's ledger already follows them: rows kept as they were
    volumes_copied: int
    volumes_present: int


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]


def _team_columns(conn: Any, table: str) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ?"
        " AND table_schema = current_schema()", (table,))}


def _rows(db: sqlite3.Connection, table: str, columns: list[str],
          order: str = "") -> Iterator[tuple[Any, ...]]:
    yield from db.execute(f"SELECT {', '.join(columns)} FROM {table} {order}")


def migrate(source: Path, target: Journal) -> MigrateReport:
    """Copy the local state file at `source` into `target`'s team database."""
    from gpucloud.errors import StateError

    if target.team is None:
        raise StateError("state migrate copies into a team database, and none was given",
                         path=str(source), hint="gpucloud state migrate --to "
                                                "postgresql://host:5432/gpucloud")
    if not source.exists():
        raise StateError(f"there is no local state to copy: {source} does not exist",
                         path=str(source), hint="point GPUCLOUD_HOME at the home to copy")
    # Opened as the journal opens it: a file of an older gpucloud gains the
    # columns the team's schema has; a newer file is refused (exit 3).
    local = Journal(source)
    local.all()
    from gpucloud.safety.ledger import SCHEMA as LEDGER_SCHEMA

    with local._db(LEDGER_SCHEMA):
        pass
    counts = dict.fromkeys(("launches_copied", "launches_present", "ledger_rows_copied",
                            "machines_copied", "machines_present", "volumes_copied",
                            "volumes_present"), 0)
    with closing(sqlite3.connect(source, timeout=30)) as db, target.exclusive() as conn:
        _launches(db, conn, counts)
        _ledger(db, conn, counts)
        _volumes(db, conn, counts)
    return MigrateReport(source=str(source), target=target.where, **counts)


def _copy_columns(db: sqlite3.Connection, conn: Any, table: str,
                  leave: tuple[str, ...] = ()) -> list[str]:
    team = _team_columns(conn, table)
    return [c for c in _columns(db, table) if c in team and c not in leave]


def _launches(db: sqlite3.Connection, conn: Any, counts: dict[str, int]) -> None:
    columns = _copy_columns(db, conn, "launches")
    marks = ", ".join("?" for _ in columns)
    for row in _rows(db, "launches", columns, "ORDER BY created_at"):
        cur = conn.execute(f"INSERT INTO launches ({', '.join(columns)}) VALUES ({marks})"
                           " ON CONFLICT (launch_id) DO NOTHING", row)
        counts["launches_copied" if cur.rowcount else "launches_present"] += 1


def _ledger(db: sqlite3.Connection, conn: Any, counts: dict[str, int]) -> None:
    columns = _copy_columns(db, conn, "ledger", leave=("seq",))
    machines = [tuple(r) for r in db.execute(
        "SELECT provider, instance_id FROM ledger GROUP BY provider, instance_id"
        " ORDER BY MIN(seq)")]
    marks = ", ".join("?" for _ in columns)
    for provider, instance_id in machines:
        known = conn.execute("SELECT 1 FROM ledger WHERE provider = ? AND instance_id = ?"
                             " LIMIT 1", (provider, instance_id)).fetchone()
        if known:
            counts["machines_present"] += 1
            continue
        rows = db.execute(f"SELECT {', '.join(columns)} FROM ledger WHERE provider = ?"
                          " AND instance_id = ? ORDER BY seq", (provider, instance_id)).fetchall()
        conn.executemany(f"INSERT INTO ledger ({', '.join(columns)}) VALUES ({marks})", rows)
        counts["machines_copied"] += 1
        counts["ledger_rows_copied"] += len(rows)


def _volumes(db: sqlite3.Connection, conn: Any, counts: dict[str, int]) -> None:
    columns = _copy_columns(db, conn, "volume_ledger")
    marks = ", ".join("?" for _ in columns)
    for row in _rows(db, "volume_ledger", columns):
        cur = conn.execute(f"INSERT INTO volume_ledger ({', '.join(columns)}) VALUES ({marks})"
                           " ON CONFLICT (provider, volume_id) DO NOTHING", row)
        counts["volumes_copied" if cur.rowcount else "volumes_present"] += 1


__all__ = ["MigrateReport", "migrate"]
