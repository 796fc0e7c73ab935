"""The cost ledger's record of network volumes, billed by the GB-month.

A volume bills its size at its provider's rate from creation to deletion,
whether or not a machine uses it; so it is one record per volume (beside the
machines' rows in the same state file), not intervals of states:

* written when gpucloud creates a volume (``volumes create``, a job that
  makes one), when a listing first shows one (made elsewhere: from its
  ``created_at``, else from now), and ended when gpucloud deletes it or a
  whole listing of its provider no longer shows it (deleted elsewhere: now,
  the best figure there is);
* each listing also stamps ``last_attached_at`` on the volumes a machine
  uses, which the unattached warnings of ``list`` and ``reap`` read;
* a volume a job created with ``delete_with_job`` carries the job
  (``job_ref``), so the job's end can delete it, and only it.
* each record names its owner (``user_name``, ``host``: config/identity.py)
  and ``project``: whoever created it here, with the create's or the job's
  project; a volume first seen by a listing (made elsewhere) has none (NULL).

The bill of an interval is ``size_gb x rate x hours / hours_per_month``
(Decimal), ``hours_per_month`` being the provider's convention (its
catalog's, else the usual 730, catalog/pricing.py). An unknown rate is None,
and so is every figure made from it: never 0.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpucloud.config.identity import who
from gpucloud.safety.journal import add_columns, utcnow
from gpucloud.safety.ledger_tables import VOLUME_ADDED_COLUMNS as ADDED_COLUMNS, VOLUME_TABLES

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.models import Volume
    from gpucloud.safety.journal import Journal



def _add_volume_columns(db: sqlite3.Connection) -> None:
    add_columns(db, "volume_ledger", ADDED_COLUMNS)


SCHEMA = (*VOLUME_TABLES, _add_volume_columns)
# A volume with no machine for longer than this is worth a warning.
UNATTACHED_AFTER = timedelta(days=1)


@dataclass(frozen=True)
class VolumeRecord:
    provider: str
    volume_id: str
    name: str
    region: str | None
    size_gb: int
    price_per_gb_month: Decimal | None
    hours_per_month: int
    created_at: datetime
    deleted_at: datetime | None
    last_attached_at: datetime | None
    source: str
    job_ref: str | None
    simulated: bool
    user_name: str | None = None  # the owner (None: first seen by a listing)
    host: str | None = None
    project: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.volume_id}"

    @property
    def price_per_month(self) -> Decimal | None:
        if self.price_per_gb_month is None:
            return None
        return self.price_per_gb_month * self.size_gb

    def cost(self, hours: Decimal) -> Decimal | None:
        """What `hours` of this volume bill (unrounded); None when the rate is unknown."""
        if self.price_per_gb_month is None:
            return None
        return self.size_gb * self.price_per_gb_month * hours / self.hours_per_month


_COLUMNS = ("provider", "volume_id", "name", "region", "size_gb", "price_per_gb_month",
            "hours_per_month", "created_at", "deleted_at", "last_attached_at", "source",
            "job_ref", "simulated", "user_name", "host", "project")


def _record(values: tuple[Any, ...]) -> VolumeRecord:
    row = dict(zip(_COLUMNS, values))
    for key in ("created_at", "deleted_at", "last_attached_at"):
        row[key] = datetime.fromisoformat(row[key]) if row[key] else None
    row["price_per_gb_month"] = (Decimal(row["price_per_gb_month"])
                                 if row["price_per_gb_month"] is not None else None)
    row["simulated"] = bool(row["simulated"])
    return VolumeRecord(**row)


def hours_per_month(ctx: ClientContext, provider: str) -> int:
    """The provider's hours in a month of its per-month rates (catalog/pricing.py)."""
    from gpucloud.catalog.pricing import HOURS_PER_MONTH

    catalog = ctx.catalogs.get(provider)
    found = getattr(catalog, "hours_per_month", None) if catalog is not None else None
    return int(found) if found else int(HOURS_PER_MONTH)


class VolumeLedger:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with self.journal._db(SCHEMA) as db:
            yield db

    def records(self, providers: Iterable[str] | None = None,
                live_only: bool = False) -> list[VolumeRecord]:
        where, args = [], []
        if providers is not None:
            names = sorted(set(providers))
            if not names:
                return []
            where.append(f"provider IN ({', '.join('?' for _ in names)})")
            args.extend(names)
        if live_only:
            where.append("deleted_at IS NULL")
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        with self._db() as db:
            found = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM volume_ledger{clause}"
                               " ORDER BY provider, created_at, volume_id", args).fetchall()
        return [_record(r) for r in found]

    def month(self, start: datetime, end: datetime) -> list[VolumeRecord]:
        """The volumes that existed at some moment of [start, end)."""
        with self._db() as db:
            found = db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM volume_ledger WHERE created_at < ?"
                " AND (deleted_at IS NULL OR deleted_at > ?) ORDER BY provider, volume_id",
                (end.isoformat(), start.isoformat())).fetchall()
        return [_record(r) for r in found]

    def add(self, volume: Volume, hours: int, source: str, job_ref: str | None = None,
            at: datetime | None = None, seen_at: datetime | None = None,
            project: str | None = None) -> None:
        """A volume gpucloud made (or first saw): billed from `at` (default: now).
        Seen attached, it was attached at `seen_at` (the listing's time), not
        since its creation: a volume made long ago and in use now is not idle.
        Made here (any `source` but a listing's), this process's user owns it."""
        since = at or utcnow()
        seen = seen_at or since
        me = who() if source != "list" else None
        with self._db() as db:
            db.execute(
                f"INSERT INTO volume_ledger ({', '.join(_COLUMNS)}) VALUES"
                f" ({', '.join('?' for _ in _COLUMNS)})"
                " ON CONFLICT (provider, volume_id) DO NOTHING",
                (volume.provider, volume.id, volume.name, volume.region, volume.size_gb,
                 str(volume.price_per_gb_month) if volume.price_per_gb_month is not None
                 else None, hours, since.isoformat(), None,
                 seen.isoformat() if volume.attached_to else None, source, job_ref,
                 int(volume.simulated), me.user if me else None, me.host if me else None,
                 project))

    def own(self, provider: str, volume_ids: Iterable[str], job_ref: str) -> None:
        """The job that made these volumes (delete_with_job), once it has a ref."""
        with self._db() as db:
            db.executemany("UPDATE volume_ledger SET job_ref = ? WHERE provider = ?"
                           " AND volume_id = ?", [(job_ref, provider, v) for v in volume_ids])

    def deleted(self, provider: str, volume_id: str, at: datetime | None = None) -> None:
        with self._db() as db:
            db.execute("UPDATE volume_ledger SET deleted_at = ? WHERE provider = ? AND"
                       " volume_id = ? AND deleted_at IS NULL",
                       ((at or utcnow()).isoformat(), provider, volume_id))

    def seen(self, provider: str, volumes: list[Volume], hours: int,
             now: datetime | None = None) -> None:
        """A whole listing of `provider`'s volumes: the new ones recorded (from
        their created_at), the attached ones stamped, the rate kept up to date
        where the provider says it, and those no longer listed ended."""
        now = now or utcnow()
        with self._db() as db:
            known = {r[0]: r[1:] for r in db.execute(
                "SELECT volume_id, deleted_at, size_gb, price_per_gb_month FROM volume_ledger"
                " WHERE provider = ?", (provider,))}
        for volume in volumes:
            if volume.id not in known:
                since = min(volume.created_at, now) if volume.created_at else now
                self.add(volume, hours, "list", at=since, seen_at=now)
        # Only what changed is written: a listing that changes nothing commits nothing.
        changed = []
        for v in volumes:
            if v.id not in known:
                continue
            price = str(v.price_per_gb_month) if v.price_per_gb_month is not None else None
            _, size, kept = known[v.id]
            if v.attached_to or size != v.size_gb or (price is not None and price != kept):
                changed.append((v.size_gb, price, 1 if v.attached_to else 0, now.isoformat(),
                                provider, v.id))
        listed = {v.id for v in volumes}
        gone = [(now.isoformat(), provider, vid) for vid, (deleted, _, _) in known.items()
                if deleted is None and vid not in listed]
        if not changed and not gone:
            return
        with self._db() as db:
            db.executemany(
                "UPDATE volume_ledger SET size_gb = ?,"
                " price_per_gb_month = coalesce(?, price_per_gb_month),"
                " last_attached_at = CASE WHEN ? THEN ? ELSE last_attached_at END"
                " WHERE provider = ? AND volume_id = ?", changed)
            db.executemany("UPDATE volume_ledger SET deleted_at = ? WHERE provider = ? AND"
                           " volume_id = ? AND deleted_at IS NULL", gone)


def unattached(records: Iterable[VolumeRecord], now: datetime,
               after: timedelta = UNATTACHED_AFTER) -> list[VolumeRecord]:
    """Live volumes with no machine for longer than `after`: since the last
    listing that showed one attached, else since their creation."""
    return [r for r in records if r.deleted_at is None
            and now - (r.last_attached_at or r.created_at) > after]


def warning(record: VolumeRecord, now: datetime) -> str:
    """One line: the volume, how long it has had no machine, what it bills, how to end it."""
    idle = now - (record.last_attached_at or record.created_at)
    monthly = record.price_per_month
    cost = f"${monthly.quantize(Decimal('0.01'))}/month" if monthly is not None \
        else "at a rate not known here"
    return (f"volume {record.ref} ({record.name}, {record.size_gb} GB) has had no machine "
            f"for {idle.days} day(s) and still bills {cost}"
            f"{' (simulated)' if record.simulated else ''}: "
            f"`gpucloud volumes delete {record.ref}` ends it")


def month_cost(record: VolumeRecord, start: datetime, end: datetime,
               now: datetime) -> tuple[Decimal, Decimal, Decimal | None, Decimal | None]:
    """(hours so far, hours projected, spent, projected) of the month [start, end):
    spent from creation to deletion (or now), projected from now to the end of
    the month while the volume is still there."""
    so_far = min(end, now)
    stop = min(record.deleted_at, so_far) if record.deleted_at else so_far
    used = _hours(max(record.created_at, start), stop)
    ahead = Decimal(0) if record.deleted_at is not None else _hours(
        max(now, start, record.created_at), end)
    return used, ahead, record.cost(used), record.cost(ahead)


def _hours(start: datetime, end: datetime) -> Decimal:
    seconds = (end - start).total_seconds()
    # Whole milliseconds, as the machines' intervals are counted (costs.py).
    return Decimal(int(seconds * 1000)) / Decimal(3600 * 1000) if seconds > 0 else Decimal(0)


__all__ = ["ADDED_COLUMNS", "SCHEMA", "UNATTACHED_AFTER", "VolumeLedger", "VolumeRecord",
           "hours_per_month", "month_cost", "unattached", "warning"]
