"""What a month costs: spend so far and the projected spend of what still runs.

Everything is computed from the cost ledger (``ledger.py``): consecutive rows
of a machine are intervals in one state at one price. cost_report.py lists
the providers first, so that the ledger is up to date.

* **Spent**: running time x price, clipped to the month and to now. Stopped
  time is billed at the stopped price where it is known (the sandbox bills
  nothing stopped; a provider that prices storage apart bills its disk);
  elsewhere a stopped machine's storage bill is not known and a note says so.
* **Projected**: machines still running, from now to their deadline or the
  end of the month, whichever is first (a machine without a deadline runs
  to the end of the month); a stopped machine whose storage rate is known,
  likewise at that rate.
* A price not known is None, shown as unknown, never 0. A total with an
  unknown part is None too, and ``unknown`` names the machines;
  ``spent_known`` / ``projected_known`` are the sums of the parts that are
  known (at least this much).

* **Volumes** (ledger_volumes.py): each volume's size x rate per GB-month x
  hours / hours per month, from creation to deletion; projected to the end
  of the month while it is not deleted (a volume has no deadline). They are
  in the totals; ``volumes`` has one line each.

* **Owners**: each machine and volume counts for the user and project of
  the launch (or create) that made it (ledger.py). ``by="user"`` and
  ``by="project"`` group by them; ``Scope`` keeps only one user's or one
  project's (the per-user and per-project budgets, budget.py), with the
  same arithmetic as the whole.

The sandbox's prices count like real ones (nothing is billed, but the
budget can be tried out on it); the report says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Literal

from gpucloud.errors import SpecError, option
from gpucloud.safety.ledger import ENDED, RUNNING, STOPPED, Row
from gpucloud.models import _Model
from gpucloud.catalog.pricing import money
from gpucloud.safety.journal import utcnow

By = Literal["provider", "instance", "name", "user", "project", "task"]
BY_VALUES: tuple[str, ...] = ("provider", "instance", "name", "user", "project", "task")
NO_NAME = "(no name)"
NO_USER = "(no user)"  # a machine no launch of this state made, or one made before owners
NO_PROJECT = "(no project)"
NO_TASK = "(no task)"  # by task: machines launched outside any queue task


@dataclass(frozen=True)
class Scope:
    """Whose costs count: everyone's (the default), one user's, one project's,
    or one user's within one project. A machine is its owner's (its ledger
    rows' user_name and project), a volume its record's."""

    user: str | None = None
    project: str | None = None

    def holds(self, owner: Any) -> bool:
        """Whether a ledger Row or a VolumeRecord is in scope."""
        return (self.user is None or owner.user_name == self.user) \
            and (self.project is None or owner.project == self.project)


class SpendLine(_Model):
    """One row of a cost report: a machine (by instance), or a group of them."""

    key: str  # the provider, the machine's ref, its name, or its queue task's id
    instances: tuple[str, ...]  # refs of the machines in it
    name: str | None = None  # by instance: the machine's name
    status: str | None = None  # by instance: running | stopped | ended, per the ledger
    price_per_hour: Decimal | None = None  # by instance: the last price known
    running_hours: Decimal  # this month, so far
    stopped_hours: Decimal
    spent: Decimal | None  # None: a price is unknown (see `unknown`)
    projected: Decimal | None
    total: Decimal | None
    unknown: tuple[str, ...] = ()  # refs whose price is not known
    simulated: bool = False


class VolumeSpend(_Model):
    """One network volume's month in a cost report (billed by the GB-month)."""

    ref: str
    name: str
    size_gb: int
    region: str | None = None
    price_per_gb_month: Decimal | None  # None: unknown, never 0
    status: Literal["live", "deleted"]
    hours: Decimal  # existed this month, so far
    spent: Decimal | None
    projected: Decimal | None
    total: Decimal | None
    simulated: bool = False
    user_name: str | None = None  # its owner (None: first seen by a listing)
    project: str | None = None


class CostReport(_Model):
    """`gpucloud costs` / Client.costs(): a month's spend, from the cost ledger."""

    month: str  # "2026-11"
    start: datetime
    end: datetime  # the first moment of the next month
    at: datetime  # "now": spent is up to here, projected from here
    by: By
    lines: tuple[SpendLine, ...]
    volumes: tuple[VolumeSpend, ...] = ()  # storage, in the totals
    spent: Decimal | None
    projected: Decimal | None
    total: Decimal | None
    spent_known: Decimal  # the parts whose price is known: at least this much
    projected_known: Decimal
    unknown: tuple[str, ...] = ()
    budget: Decimal | None = None  # the monthly budget in config.toml
    currency: Literal["USD"] = "USD"
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def month_bounds(month: str | None, now: datetime) -> tuple[str, datetime, datetime]:
    """("2026-11", its first moment, the next month's first moment), in UTC."""
    if month is None:
        year, number = now.year, now.month
    else:
        text = str(month).strip()
        try:
            year, number = (int(part) for part in text.split("-"))
            datetime(year, number, 1)
        except ValueError:
            raise SpecError(f"month {month!r} is not a month",
                            hint="give it as YYYY-MM, e.g. "
                                 f"{option('month', '--month', repr('2026-11'), '2026-11')}") \
                from None
    start = datetime(year, number, 1, tzinfo=timezone.utc)
    end = datetime(year + number // 12, number % 12 + 1, 1, tzinfo=timezone.utc)
    return f"{year:04d}-{number:02d}", start, end


def _hours(start: datetime, end: datetime, lo: datetime, hi: datetime) -> Decimal:
    """Hours of [start, end) inside [lo, hi)."""
    seconds = (min(end, hi) - max(start, lo)).total_seconds()
    return Decimal(int(seconds * 1000)) / Decimal(3600 * 1000) if seconds > 0 else Decimal(0)


@dataclass
class Machine:
    """One machine's month, summed from its ledger rows."""

    last: Row
    running_hours: Decimal = Decimal(0)
    stopped_hours: Decimal = Decimal(0)
    spent: Decimal | None = Decimal(0)
    projected: Decimal | None = Decimal(0)
    stopped_unpriced: bool = False  # stopped time whose storage bill is not known
    overdue: bool = False  # running past its deadline
    notes: list[str] = field(default_factory=list)

    def add(self, attr: str, hours: Decimal, price: Decimal | None) -> None:
        if hours <= 0:
            return
        current = getattr(self, attr)
        setattr(self, attr, None if current is None or price is None else current + hours * price)


def machine_month(rows: list[Row], start: datetime, end: datetime, now: datetime) -> Machine:
    """rows: one machine's ledger rows, in order."""
    summary = Machine(last=rows[-1])
    so_far = min(end, now)
    for row, following in zip(rows, [*rows[1:], None]):
        until = following.at if following is not None else now
        if row.state == RUNNING:
            hours = _hours(row.at, until, start, so_far)
            summary.running_hours += hours
            summary.add("spent", hours, row.price_per_hour)
        elif row.state == STOPPED:
            hours = _hours(row.at, until, start, so_far)
            summary.stopped_hours += hours
            if row.stopped_price_per_hour is None:
                summary.stopped_unpriced = summary.stopped_unpriced or hours > 0
            else:
                summary.add("spent", hours, row.stopped_price_per_hour)
    last = rows[-1]
    if last.state != ENDED:
        stop = min(end, last.shutdown_at) if last.shutdown_at else end
        hours = _hours(now, stop, start, end)
        summary.overdue = last.state == RUNNING and last.shutdown_at is not None \
            and last.shutdown_at <= now
        if last.state == RUNNING:
            summary.add("projected", hours, last.price_per_hour)
        elif last.stopped_price_per_hour is not None:
            summary.add("projected", hours, last.stopped_price_per_hour)
    return summary


def compute(rows: Iterable[Row], month: str | None = None, by: str = "instance",
            now: datetime | None = None, budget: Decimal | None = None,
            warnings: Iterable[str] = (), volumes: Iterable[Any] = (),
            scope: Scope = Scope()) -> CostReport:
    """The report from ledger rows (per machine, in order) and the ledger's
    volume records (ledger_volumes.VolumeRecord); pure, for any clock.
    `scope`: only the machines and volumes it holds count."""
    if by not in BY_VALUES:
        raise SpecError(f"cannot group costs by {by!r}",
                        hint=f"{option('by', '--by')} is one of {', '.join(BY_VALUES)}")
    now = now or utcnow()
    label, start, end = month_bounds(month, now)
    per_machine: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        if row.at < end:
            per_machine.setdefault((row.provider, row.instance_id), []).append(row)
    machines = []
    for machine_rows in per_machine.values():
        if not scope.holds(machine_rows[-1]):
            continue  # the owner is carried forward: the latest row names it
        summary = machine_month(machine_rows, start, end, now)
        if summary.running_hours or summary.stopped_hours or summary.projected != 0:
            machines.append(summary)
    groups: dict[str, list[Machine]] = {}
    for summary in machines:
        groups.setdefault(_key(summary.last, by), []).append(summary)
    lines = tuple(_line(key, members, by) for key, members in sorted(groups.items()))
    # Each volume that existed in the month (the ledger's month() reads only those).
    records = [r for r in volumes if scope.holds(r)]
    storage = [_volume(r, start, end, now) for r in records]
    parts = [(m.last.ref, m.spent, m.projected) for m in machines] \
        + [(line.ref, spent, ahead) for line, spent, ahead in storage]
    spent_known = sum((p[1] for p in parts if p[1] is not None), Decimal(0))
    projected_known = sum((p[2] for p in parts if p[2] is not None), Decimal(0))
    unknown = tuple(sorted({p[0] for p in parts if p[1] is None or p[2] is None}))
    spent = None if any(p[1] is None for p in parts) else spent_known
    projected = None if any(p[2] is None for p in parts) else projected_known
    return CostReport(
        month=label, start=start, end=end, at=now, by=by,  # type: ignore[arg-type]
        lines=lines, volumes=tuple(line for line, _, _ in storage), spent=_money(spent),
        projected=_money(projected),
        total=_money(spent + projected) if spent is not None and projected is not None
        else None,
        spent_known=money(spent_known), projected_known=money(projected_known),
        unknown=unknown, budget=budget,
        notes=tuple(_notes(machines, unknown, now, end, [line for line, _, _ in storage])),
        warnings=tuple(warnings))


def _volume(record: Any, start: datetime, end: datetime, now: datetime
            ) -> tuple[VolumeSpend, Decimal | None, Decimal | None]:
    """(the line, spent, projected: unrounded, for the totals)."""
    from gpucloud.safety.ledger_volumes import month_cost

    hours, _, spent, ahead = month_cost(record, start, end, now)
    return VolumeSpend(
        ref=record.ref, name=record.name, size_gb=record.size_gb, region=record.region,
        price_per_gb_month=record.price_per_gb_month,
        status="deleted" if record.deleted_at is not None else "live",
        hours=_round_hours(hours), spent=_money(spent), projected=_money(ahead),
        total=_money(spent + ahead) if spent is not None and ahead is not None else None,
        simulated=record.simulated, user_name=record.user_name, project=record.project), \
        spent, ahead


def _key(row: Row, by: str) -> str:
    if by == "provider":
        return row.provider
    if by == "name":
        return row.name or NO_NAME
    if by == "user":
        return row.user_name or NO_USER
    if by == "project":
        return row.project or NO_PROJECT
    if by == "task":  # the task that launched the machine (carried to its last row)
        return row.task_id or NO_TASK
    return row.ref



def _line(key: str, members: list[Machine], by: str) -> SpendLine:
    spent = None if any(m.spent is None for m in members) else sum(
        (m.spent for m in members if m.spent is not None), Decimal(0))
    projected = None if any(m.projected is None for m in members) else sum(
        (m.projected for m in members if m.projected is not None), Decimal(0))
    one = members[0].last if by == "instance" else None
    return SpendLine(
        key=key, instances=tuple(sorted(m.last.ref for m in members)),
        name=one.name if one else None, status=one.state if one else None,
        price_per_hour=one.price_per_hour if one else None,
        running_hours=_round_hours(sum((m.running_hours for m in members), Decimal(0))),
        stopped_hours=_round_hours(sum((m.stopped_hours for m in members), Decimal(0))),
        spent=_money(spent), projected=_money(projected),
        total=_money(spent + projected) if spent is not None and projected is not None else None,
        unknown=tuple(sorted(m.last.ref for m in members
                             if m.spent is None or m.projected is None)),
        simulated=all(bool(m.last.simulated) for m in members))


def _notes(machines: list[Machine], unknown: tuple[str, ...], now: datetime,
           end: datetime, volumes: list[VolumeSpend]) -> list[str]:
    notes = []
    if unknown:
        notes.append(f"price unknown for {', '.join(unknown)}: totals with it are unknown; "
                     "spent_known and projected_known are the known part")
    unpriced = sorted({m.last.provider for m in machines if m.stopped_unpriced})
    if unpriced:
        notes.append(f"stopped time is not counted for {', '.join(unpriced)}: storage may "
                     "still bill while stopped, at a rate not known here (unverified)")
    overdue = sorted(m.last.ref for m in machines if m.overdue)
    if overdue:
        notes.append(f"past their deadline and still running per the ledger: "
                     f"{', '.join(overdue)} (`gpucloud reap` ends them; nothing more is "
                     "projected for them)")
    if any(m.last.simulated for m in machines):
        notes.append("sandbox machines count at their simulated prices; nothing is billed")
    if any(v.simulated for v in volumes):
        notes.append("sandbox volumes count at their simulated rate; nothing is billed")
    if any(v.status == "live" for v in volumes):
        notes.append("volumes bill by the GB-month until deleted: projected to the end of the "
                     "month (`gpucloud volumes delete` ends one)")
    if now < end:
        notes.append("projected: machines still running, to their deadline or the end of the "
                     "month, whichever is first")
    return notes


def _money(value: Decimal | None) -> Decimal | None:
    return money(value) if value is not None else None


def _round_hours(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"))


__all__ = ["BY_VALUES", "CostReport", "NO_PROJECT", "NO_USER", "Scope", "SpendLine",
           "VolumeSpend", "compute", "machine_month", "month_bounds"]
