"""The cost ledger: every start, stop, termination and price gpucloud sees.

It lives in the state database beside the journal (same file, same error
handling). Each row reads "from ``at`` on, this machine is ``state``
(running, stopped or ended) at ``price_per_hour``": a row carries the whole
state, what it does not know is carried forward from the machine's previous
row, so the latest row of a machine is its current state and consecutive
rows are the intervals ``costs.py`` bills.

Rows come from what this client does (a launch delivered or adopted, a
delete, a reaper termination, a stop or start) and from what listings
observe (a machine that changed state or price, or one seen for the first
time, e.g. created from another machine). A listing is one transaction,
whatever the number of machines, and writes only what changed.

Every row also names the machine's owner: the user and host whose launch
made it and the launch's project (``user_name``, ``host``, ``project``), taken
from the launch in the journal by its launch id and carried forward like the
rest, so a delete by someone else leaves the machine its owner's. A machine
no launch of this state made (created in a provider's console, or before
identities were recorded) has none: NULL, "(no user)" in a report.

Prices are what the user pays per hour for the whole machine, disk included
where priced (``pricing.estimate``); ``stopped_price_per_hour`` is what a
stopped machine still bills (the sandbox: 0; a provider that prices storage
apart: its disk rate; otherwise unknown, None). Unknown is None, never 0.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Container, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from sys import intern
from typing import Any, NamedTuple

from gpucloud.models import Instance, InstanceStatus
from gpucloud.safety import listing_memo
from gpucloud.safety.journal import CHUNK, Journal, add_columns
# The states are defined with the tables (and read as ledger.RUNNING etc.).
from gpucloud.safety.ledger_tables import (
    ADDED_COLUMNS, ENDED, RUNNING, STOPPED, TABLES as _TABLES,
)
from gpucloud.safety.ledger_volumes import SCHEMA as VOLUME_SCHEMA
# The ledger's clock: the rows ledger_events.py writes are stamped by it.
from gpucloud.safety.journal import utcnow  # noqa: F401 - read as ledger.utcnow


def _add_columns(db: sqlite3.Connection) -> None:
    """The columns added since the first release (ledger_tables.ADDED_COLUMNS)
    on a ledger made before them."""
    add_columns(db, "ledger", ADDED_COLUMNS)


# A row's insert moves its machine in or out of ledger_live: the latest row
# (the highest seq) is the machine's state, as _latest reads it.
_LIVE_TRIGGER = f"""CREATE TRIGGER IF NOT EXISTS ledger_live_track AFTER INSERT ON ledger BEGIN
    DELETE FROM ledger_live WHERE provider = NEW.provider AND instance_id = NEW.instance_id
        AND NEW.state = '{ENDED}';
    INSERT INTO ledger_live (provider, instance_id)
        SELECT NEW.provider, NEW.instance_id WHERE NEW.state != '{ENDED}'
        ON CONFLICT DO NOTHING;
END"""
_LIVE_BACKFILL = f"""INSERT INTO ledger_live (provider, instance_id)
    SELECT provider, instance_id FROM ledger WHERE seq IN
        (SELECT MAX(seq) FROM ledger GROUP BY provider, instance_id) AND state != '{ENDED}'
    ON CONFLICT DO NOTHING"""


def _track_live(db: sqlite3.Connection) -> None:
    """Create the trigger that keeps ledger_live, filling the table first from
    the rows already written (a ledger older than the trigger): in one write
    transaction, so no row lands between the fill and the trigger."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'trigger'"
                  " AND name = 'ledger_live_track'").fetchone():
        return
    if db.in_transaction:  # inside Journal.exclusive: its write transaction
        db.execute(_LIVE_BACKFILL)
        db.execute(_LIVE_TRIGGER)
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(_LIVE_BACKFILL)
        db.execute(_LIVE_TRIGGER)
    except BaseException:
        db.rollback()
        raise
    db.commit()


# What the ledger needs in the state file, made once per connection: the
# volumes' table too, so a decision's transaction (the budget's) that reads it
# finds it made before the transaction began, never inside one rolled back.
SCHEMA = (*_TABLES, _add_columns, *VOLUME_SCHEMA, _track_live)
# The source of the rows of a job that has no machine (a Kubernetes Job, keyed
# by its provider and job id): no machine listing shows it, so a listing never
# takes it for a machine that has gone (jobs/costs.py ends it).
JOB = "job"
# A machine missing from its provider's list is taken as ended only once its
# last row is older than this: a new launch can take a moment to be listed.
APPEAR_GRACE = timedelta(minutes=10)
_STATES = {
    InstanceStatus.PENDING: RUNNING,  # providers bill from the launch, not from boot
    InstanceStatus.RUNNING: RUNNING,
    InstanceStatus.STOPPING: STOPPED,
    InstanceStatus.STOPPED: STOPPED,
    InstanceStatus.TERMINATING: ENDED,
    InstanceStatus.TERMINATED: ENDED,
    InstanceStatus.FAILED: ENDED,
}
_COLUMNS = ("at", "provider", "instance_id", "event", "source", "state", "price_per_hour",
            "stopped_price_per_hour", "shutdown_at", "name", "instance_type", "region",
            "launch_id", "simulated", "task_id", "user_name", "host", "project")
# What a row that does not say takes from the machine's previous row.
_CARRIED = ("price_per_hour", "stopped_price_per_hour", "shutdown_at", "name", "instance_type",
            "region", "launch_id", "simulated", "task_id", "user_name", "host", "project")


def state_of(status: InstanceStatus) -> str | None:
    """running / stopped / ended for billing; None when the provider did not say."""
    return _STATES.get(status)


# Slots: a listing holds a Row per machine whose row it writes until it ends
# (every machine of a first listing: ten thousand in a big one), and a row
# without a __dict__ is half the size.
@dataclass(frozen=True, slots=True)
class Row:
    at: datetime
    provider: str
    instance_id: str
    event: str
    source: str
    state: str
    price_per_hour: Decimal | None = None
    stopped_price_per_hour: Decimal | None = None
    shutdown_at: datetime | None = None
    name: str | None = None
    instance_type: str | None = None
    region: str | None = None
    launch_id: str | None = None
    simulated: bool | None = None  # None: not said (carried forward)
    task_id: str | None = None  # the queue task that launched it (carried forward)
    # The owner: whose launch made the machine (from the journal, by launch id).
    user_name: str | None = None
    host: str | None = None
    project: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.instance_id}"


class Ledger:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        # The journal's connection: one file, and one StateError for a damaged one.
        with self.journal._db(SCHEMA) as db:
            yield db

    def append(self, rows: Iterable[Row]) -> None:
        """Rows in one transaction, each completed from its machine's previous row."""
        rows = list(rows)
        if not rows:
            return
        with self._db() as db:
            listing_memo.forget(self.journal)
            latest = _latest(db, {(r.provider, r.instance_id) for r in rows})
            carried = [_carry(r, latest) for r in rows]
            db.executemany(
                f"INSERT INTO ledger ({', '.join(_COLUMNS)}) VALUES "
                f"({', '.join('?' for _ in _COLUMNS)})",
                [_values(r) for r in _from_launches(db, carried)])

    def in_flight(self, since: datetime, user: str | None = None,
                  project: str | None = None) -> list[Decimal]:
        """What each launch journaled since `since` commits while its machine is
        not in the ledger yet: sent or about to be (intent), or unanswered
        (ambiguous, until reconcile settles it). A delivered launch's machine is
        written here before the journal marks it delivered, so every launch
        counts in one place or the other, never in neither. `user`, `project`:
        only the launches of that user, of that project (costs.Scope)."""
        where, args = "", [since.isoformat()]
        for column, value in (("user_name", user), ("project", project)):
            if value is not None:
                where += f" AND {column} = ?"
                args.append(value)
        with self._db() as db:
            found = db.execute(
                "SELECT committed FROM launches WHERE status IN ('intent', 'ambiguous')"
                f" AND created_at >= ? AND committed IS NOT NULL{where} AND NOT EXISTS"
                " (SELECT 1 FROM ledger WHERE ledger.launch_id = launches.launch_id)",
                args).fetchall()
        return [Decimal(r[0]) for r in found]

    def latest(self, machines: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Row]:
        with self._db() as db:
            return _latest(db, set(machines))

    def open_jobs(self, providers: Iterable[str]) -> dict[tuple[str, str], Row]:
        """The latest row of every job of `providers` the ledger still counts."""
        with self._db() as db:
            found = _latest(db, set(), set(providers))
        return {k: r for k, r in found.items() if r.source == JOB}

    def history(self, machines: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[Row]]:
        """Every row of each of `machines`, in order (through the machine index)."""
        by_provider: dict[str, list[str]] = {}
        for provider, instance_id in set(machines):
            by_provider.setdefault(provider, []).append(instance_id)
        out: dict[tuple[str, str], list[Row]] = {}
        with self._db() as db:
            for provider, ids in by_provider.items():
                for start in range(0, len(ids), CHUNK):
                    part = ids[start:start + CHUNK]
                    for values in db.execute(
                            f"SELECT {', '.join(_COLUMNS)} FROM ledger WHERE provider = ? AND"
                            f" instance_id IN ({', '.join('?' for _ in part)})"
                            " ORDER BY instance_id, at, seq", (provider, *part)):
                        row = _row(values)
                        out.setdefault((row.provider, row.instance_id), []).append(row)
        return out

    def month_rows(self, start: datetime, end: datetime) -> list[Row]:
        """The rows a report of the month [start, end) needs, per machine in order:
        those before `end` of every machine with a row from `start` on or still
        live. Any other machine ended before the month began, so nothing of it
        counts in the month; its rows are never read. The work grows with what
        is live and with the month asked, not with all of history."""
        with self._db() as db:
            machines = set(db.execute("SELECT DISTINCT provider, instance_id FROM ledger"
                                      " WHERE at >= ?", (start.isoformat(),)))
            machines |= set(db.execute("SELECT provider, instance_id FROM ledger_live"))
        history = self.history(machines)
        return [row for key in sorted(history) for row in history[key] if row.at < end]

    def rows(self, before: datetime | None = None) -> list[Row]:
        """Every row (before a moment), per machine in order."""
        where, args = ("WHERE at < ?", (before.isoformat(),)) if before else ("", ())
        with self._db() as db:
            found = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM ledger {where}"
                               " ORDER BY provider, instance_id, at, seq", args).fetchall()
        return [_row(r) for r in found]

    def observe(self, instances: Iterable[Instance], now: datetime,
                listed: Iterable[str] = ()) -> None:
        """A listing: one transaction, a row only for what changed. A machine of a
        provider in `listed` (listed in full) that the listing no longer shows has
        ended (providers drop terminated machines from their lists)."""
        observation = Observation(self, now)
        observation.page(instances)
        observation.finish(listed)


class Last(NamedTuple):
    """What a listing compares of a machine's latest row (``_observed``): its
    state, price and deadline. A listing keeps this, not the row, for every
    machine it showed (and the memo keeps it for the next listing of the
    process): most machines of a listing share one, so a machine costs its
    id and a slot, not a row of fourteen fields. The rest of a row (what a
    new row carries forward) is read from the ledger for the machines whose
    row a listing writes, and only for those."""

    state: str
    price_per_hour: Decimal | None
    shutdown_at: datetime | None


def _last(row: Row) -> Last:
    return Last(row.state, row.price_per_hour, row.shutdown_at)


class Observation:
    """A listing recorded as its pages come: each page is compared with the
    latest rows of its machines as it arrives, and only what changed is kept,
    so a listing of ten thousand machines never holds them all. Nothing is
    written before ``finish``: one transaction, the same rows
    ``Ledger.observe`` writes for the whole listing at once. A provider whose
    listing broke off is ``dropped``: what its pages showed is not recorded,
    and none of its machines is taken as ended (the listing did not see them
    all).

    What it keeps per machine seen is its ``Last`` (None: the ledger has no
    row of it), under its provider and id (listing_memo.py keeps the same for
    the next listing); whole rows only of the machines whose row it writes."""

    def __init__(self, ledger: Ledger, now: datetime) -> None:
        self.ledger, self.now = ledger, now
        # provider -> instance id -> Last of every machine the listing showed.
        self.seen: dict[str, dict[str, Last | None]] = {}
        # Per provider: the machines whose row this listing writes.
        self.pending: dict[str, dict[tuple[str, str], Row]] = {}
        self._shared: dict[Last, Last] = {}  # one tuple per distinct Last

    def empty(self) -> bool:
        return not any(self.seen.values())

    def _share(self, last: Last | None) -> Last | None:
        return None if last is None else self._shared.setdefault(last, last)

    def page(self, instances: Iterable[Instance]) -> None:
        machines = list(instances)
        if not machines:
            return
        keys = [(i.provider, i.id) for i in machines]
        journal = self.ledger.journal
        changed: list[tuple[tuple[str, str], Row]] = []
        with self.ledger._db() as db, _read_once(db):
            lasts = listing_memo.remembered(journal, db, keys)
            rows: dict[tuple[str, str], Row] = {}
            if lasts is None:
                rows = _latest(db, set(keys))
                lasts = {key: _last(row) for key, row in rows.items()}
            for instance, key in zip(machines, keys):
                shown = self.seen.setdefault(key[0], {})
                # A machine shown twice is compared with what this listing made of it.
                last = shown[key[1]] if key[1] in shown else lasts.get(key)
                row = _observed(instance, last, self.now)
                if row is None:
                    shown[key[1]] = self._share(last)
                else:
                    changed.append((key, row))
            # The whole rows the changed machines' new rows carry forward from.
            unread = {key for key, _ in changed if key not in rows
                      and key not in self.pending.get(key[0], {}) and lasts.get(key) is not None}
            if unread:
                rows.update(_latest(db, unread))
        for key, row in changed:
            pending = self.pending.setdefault(key[0], {})
            row = _carried(row, pending.get(key) or rows.get(key))
            pending[key] = row
            self.seen[key[0]][key[1]] = self._share(_last(row))

    def written(self, provider: str, instance_id: str) -> Row | None:
        """The row this listing will write for the machine, if any."""
        return self.pending.get(provider, {}).get((provider, instance_id))

    def drop(self, provider: str) -> None:
        """The provider's listing broke off: forget what its pages showed."""
        self.pending.pop(provider, None)
        self.seen.pop(provider, None)

    def finish(self, listed: Iterable[str] = ()) -> None:
        """Write the listing: the changed machines of every provider not dropped,
        and the end of each open machine of `listed` (providers listed in full)
        that no page showed."""
        complete = set(listed)
        journal = self.ledger.journal
        seen = _Seen(self.seen)
        with self.ledger._db() as db, _read_once(db):
            remembered = listing_memo.remembered_open(journal, db, complete, seen)
            if remembered is None:
                unseen = _latest(db, set(), complete, seen)
            else:
                unseen, shown_before = remembered
                gone = {key for key, last in shown_before
                        if last is not None and last.state != ENDED}
                if gone:  # shown by the last listing, not by this one: read whole
                    unseen = {**unseen, **_latest(db, gone)}
            rows = [r for changed in self.pending.values() for r in changed.values()]
            still_open: dict[tuple[str, str], Row] = {}
            for key, last in unseen.items():
                if last.state == ENDED:
                    continue
                # A launch may take a moment to show in its provider's list.
                if last.source != JOB and self.now - last.at > APPEAR_GRACE:
                    rows.append(_carried(Row(at=self.now, provider=key[0], instance_id=key[1],
                                             event="observed", source="list", state=ENDED),
                                         last))
                else:
                    still_open[key] = last
            if rows:
                db.executemany(
                    f"INSERT INTO ledger ({', '.join(_COLUMNS)}) VALUES "
                    f"({', '.join('?' for _ in _COLUMNS)})",
                    [_values(r) for r in _from_launches(db, rows)])
            listing_memo.remember(journal, db, self.seen, still_open, complete)


# The page cache of a listing's reads (a negative cache_size is KiB).
LISTING_CACHE_KIB = -128


@contextmanager
def _read_once(db: sqlite3.Connection) -> Iterator[None]:
    """A listing's reads of the ledger with a small page cache: each page of a
    listing reads the rows of its own machines, once, so a cache kept across
    pages only grows (to SQLite's default 2 MiB, about what ten thousand
    machines' rows fill) with pages not read again. The connection gets its
    cache back afterwards for the process's other reads. (A team database
    caches on its server: nothing to do.)"""
    if not isinstance(db, sqlite3.Connection):
        yield
        return
    (kept,) = db.execute("PRAGMA cache_size").fetchone()
    db.execute(f"PRAGMA cache_size = {LISTING_CACHE_KIB}")
    try:
        yield
    finally:
        db.execute(f"PRAGMA cache_size = {int(kept)}")


class _Seen:
    """The machines a listing showed (Observation.seen), as a set answers `in`."""

    def __init__(self, seen: dict[str, dict[str, Last | None]]) -> None:
        self.seen = seen

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple):
            return False
        shown = self.seen.get(key[0])
        return shown is not None and key[1] in shown


def _observed(instance: Instance, last: Last | None, now: datetime) -> Row | None:
    state = state_of(instance.status)
    price = instance.price_per_hour if instance.price_per_hour else None  # 0: did not say
    if last is None:
        if state in (None, ENDED):
            return None  # never seen running: nothing to bill or close
        # First seen (made elsewhere, or a launch the ledger missed): running
        # since the provider says it was created, the best figure there is.
        since = instance.created_at if state == RUNNING and instance.created_at else now
        return _listed(instance, price, at=min(since, now), event="first_seen", state=state)
    if last.state == ENDED:
        return None
    changed = (state is not None and state != last.state) \
        or (price is not None and price != last.price_per_hour) \
        or (instance.shutdown_at is not None and instance.shutdown_at != last.shutdown_at)
    if not changed:
        return None  # most machines of most listings: nothing built
    return _listed(instance, price, at=now, event="observed", state=state or last.state)


def _listed(instance: Instance, price: Decimal | None, **what: Any) -> Row:
    return Row(provider=instance.provider, instance_id=instance.id, source="list",
               price_per_hour=price, shutdown_at=instance.shutdown_at, name=instance.name,
               instance_type=instance.instance_type, region=instance.region,
               launch_id=instance.launch_id, simulated=instance.simulated, **what)


def _latest(db: sqlite3.Connection, machines: set[tuple[str, str]],
            providers: frozenset[str] | set[str] = frozenset(),
            besides: Container[tuple[str, str]] = frozenset()) -> dict[tuple[str, str], Row]:
    """The latest row of each of `machines`, and of every machine of `providers`
    still open (not ended, per ledger_live) but not in `besides`. Through the
    (provider, instance_id, seq) index: the rows of other machines are never read."""
    wanted: dict[str, list[str]] = {}  # latest rows wanted whatever their state
    live: dict[str, list[str]] = {}  # latest rows wanted only while not ended
    for provider, instance_id in machines:
        wanted.setdefault(provider, []).append(instance_id)
    for provider in providers:  # the live ones only: ledger_live, never all history
        for (instance_id,) in db.execute("SELECT instance_id FROM ledger_live"
                                         " WHERE provider = ?", (provider,)):
            if (provider, instance_id) not in machines \
                    and (provider, instance_id) not in besides:
                live.setdefault(provider, []).append(instance_id)
    found = _by_seq(db, _max_seqs(db, wanted), "") \
        + _by_seq(db, _max_seqs(db, live), f" AND state != '{ENDED}'")
    return {(r.provider, r.instance_id): r for r in map(_row, found)}


def _max_seqs(db: sqlite3.Connection, machines: dict[str, list[str]]) -> list[int]:
    """The seq of each machine's latest row, through the machine index."""
    seqs: list[int] = []
    for provider, ids in machines.items():
        for start in range(0, len(ids), CHUNK):
            part = ids[start:start + CHUNK]
            seqs += [r[0] for r in db.execute(
                "SELECT MAX(seq) FROM ledger WHERE provider = ? AND instance_id IN"
                f" ({', '.join('?' for _ in part)}) GROUP BY instance_id", (provider, *part))]
    return seqs


def _by_seq(db: sqlite3.Connection, seqs: list[int], more: str) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    for start in range(0, len(seqs), CHUNK):
        part = seqs[start:start + CHUNK]
        found += db.execute(f"SELECT {', '.join(_COLUMNS)} FROM ledger WHERE seq IN"
                            f" ({', '.join('?' for _ in part)}){more}", part).fetchall()
    return found


def _carry(row: Row, latest: dict[tuple[str, str], Row]) -> Row:
    """Fill what the row does not say from the previous one, and make it the latest."""
    key = (row.provider, row.instance_id)
    row = latest[key] = _carried(row, latest.get(key))
    return row


def _carried(row: Row, last: Row | None) -> Row:
    """The row with what it does not say taken from `last`, the machine's previous row."""
    if last is None:
        return row
    return replace(row, **{f: getattr(last, f) for f in _CARRIED if getattr(row, f) is None})


def _from_launches(db: sqlite3.Connection, rows: list[Row]) -> list[Row]:
    """The rows, each completed from the launch journaled here that made its
    machine (read by launch id, one query per CHUNK ids, only for rows that
    need it):

    * a machine with no owner yet (its first row, or one written before owners
      were recorded) takes its launch's user, host and project;
    * a machine first seen by a listing takes the queue task that sent its
      launch: one adopted after an unanswered create (by reconcile, in another
      process than the task's) stays on its task's bill."""
    wanted = list({r.launch_id for r in rows if r.launch_id and (
        r.user_name is None or (r.event == "first_seen" and r.task_id is None))})
    if not wanted:
        return rows
    launches: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(wanted), CHUNK):
        part = wanted[start:start + CHUNK]
        for launch_id, *found in db.execute(
                "SELECT launch_id, user_name, host, project, task_id FROM launches WHERE"
                f" launch_id IN ({', '.join('?' for _ in part)})", part):
            launches[launch_id] = tuple(found)
    out = []
    for row in rows:
        found = launches.get(row.launch_id or "")
        if found is not None:
            user_name, host, project, task_id = found
            if row.user_name is None:
                row = replace(row, user_name=user_name, host=host,
                              project=row.project or project)
            if row.event == "first_seen" and row.task_id is None and task_id:
                row = replace(row, task_id=task_id)
        out.append(row)
    return out


def _values(row: Row) -> tuple[Any, ...]:
    out: list[Any] = []
    for column in _COLUMNS:
        value = getattr(row, column)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, Decimal):
            value = str(value)
        elif isinstance(value, bool) or column == "simulated":
            value = int(bool(value))  # not said and nothing to carry: a real provider
        out.append(value)
    return tuple(out)


def _row(values: tuple[Any, ...]) -> Row:
    # Positional, in _COLUMNS order: a listing parses a row per machine. The
    # words every machine repeats (its provider, type, region, the event) are
    # shared, not one copy per row, and so are the few prices.
    (at, provider, instance_id, event, source, state, price, stopped_price, shutdown_at, name,
     instance_type, region, launch_id, simulated, task_id, user_name, host, project) = values
    return Row(at=datetime.fromisoformat(at), provider=intern(provider), instance_id=instance_id,
               event=intern(event), source=intern(source), state=intern(state),
               price_per_hour=_price(price) if price is not None else None,
               stopped_price_per_hour=_price(stopped_price) if stopped_price is not None
               else None,
               shutdown_at=datetime.fromisoformat(shutdown_at) if shutdown_at else None,
               name=name, instance_type=intern(instance_type) if instance_type else instance_type,
               region=intern(region) if region else region, launch_id=launch_id,
               simulated=bool(simulated), task_id=task_id, user_name=user_name, host=host,
               project=project)


@functools.lru_cache(maxsize=1024)
def _price(text: str) -> Decimal:
    return Decimal(text)  # immutable: one object serves every row at this price


__all__ = ["ADDED_COLUMNS", "ENDED", "JOB", "Last", "Ledger", "Observation", "RUNNING", "Row",
           "STOPPED", "state_of"]
