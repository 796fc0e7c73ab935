"""Deadlines: the rules every deadline follows, below the operations that move
one later (extend.py) and enforce them all (reap.py).

A deadline lives on the provider (tags, env, labels, description: each adapter
reads back the *latest* of its copies) and, as a copy, in the local journal.
Deadlines only ever move later, so a copy that missed an update can only make
the reaper act earlier, never later. A deadline is computed once, at the
precision the provider stores (``Provider.deadline_precision``: whole seconds
for every real cloud), and sent as an absolute time, so a retry of the same
target changes nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from gpucloud.catalog import pricing
from gpucloud.providers.base import format_utc
from gpucloud.errors import (
    SpecError,
)
from gpucloud.providers.launch_ids import is_gpucloud
from gpucloud.catalog.limits import MAX_HOURS
from gpucloud.models import Instance, InstanceStatus
from gpucloud.safety.journal import utcnow

if TYPE_CHECKING:
    pass

ENDED = (InstanceStatus.TERMINATED, InstanceStatus.TERMINATING, InstanceStatus.FAILED)
# What the reaper leaves alone: a machine on its way out. A failed (crashed,
# exited) machine still exists on the provider and its disk may still bill.
GONE = (InstanceStatus.TERMINATED, InstanceStatus.TERMINATING)


def parse_deadline(value: Any) -> datetime:
    """An absolute deadline: an aware datetime, or ISO-8601 text with an offset
    or "Z" ("2026-12-01T18:00Z"). A time without a zone is refused, not guessed."""
    if isinstance(value, datetime):
        moment = value
    else:
        text = str(value).strip()
        try:
            moment = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
        except ValueError:
            raise SpecError(f"deadline {value!r} is not an ISO-8601 time",
                            hint="e.g. 2026-12-01T18:00Z (UTC) or 2026-12-01T19:00+01:00") \
                from None
    if moment.tzinfo is None:
        raise SpecError(f"deadline {value!r} has no time zone",
                        hint="add Z for UTC (2026-12-01T18:00Z) or an offset (+01:00)")
    return moment.astimezone(timezone.utc)


def future_deadline(value: Any, now: datetime | None = None) -> datetime:
    moment = parse_deadline(value)
    now = now or utcnow()
    if moment <= now:
        raise SpecError(f"deadline {format_utc(moment)} is in the past "
                        f"(now {format_utc(now)})", hint="give a time in the future")
    _within_cap(moment, now)
    return moment


def _within_cap(moment: datetime, now: datetime) -> None:
    """The same bound as a duration (--by, --auto-shutdown): 10 years from now."""
    if moment - now > timedelta(hours=int(MAX_HOURS)):
        raise SpecError(f"deadline {format_utc(moment)} is more than 10 years away",
                        hint="use at most 10 years")


def at_precision(moment: datetime, precision: timedelta) -> datetime:
    """`moment` cut down to what the provider stores (whole seconds, say), so the
    deadline read back is compared with what could have been written."""
    step = int(precision / timedelta(microseconds=1))
    if step <= 1:
        return moment
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    micros = (moment - epoch) // timedelta(microseconds=1)
    return epoch + timedelta(microseconds=micros - micros % step)


def extension_arguments(by: Any, until: Any) -> tuple[timedelta | None, datetime | None]:
    if (by is None) == (until is None):
        raise SpecError("give how much longer (by=, --by 2h) or a new deadline "
                        "(until=, --until 2026-12-01T18:00Z), not both or neither")
    if by is not None:
        return pricing.parse_duration(by), None
    return None, parse_deadline(until)


def new_deadline(instance: Instance, by: Any = None, until: Any = None,
                 now: datetime | None = None,
                 precision: timedelta = timedelta(microseconds=1)) -> datetime:
    """Where `extend` moves a machine's deadline: `until`, or `by` past the current
    one (from now for a machine with none, or overdue and not reaped yet), cut
    to `precision` (what the provider stores)."""
    delta, moment = extension_arguments(by, until)
    if instance.status in ENDED:
        raise SpecError(f"{instance.ref} is {instance.status.value}: there is nothing to extend",
                        hint="`gpucloud list` shows the machines still running")
    if not is_gpucloud(instance.launch_id):
        raise SpecError(f"{instance.ref} was not created by gpucloud: no reaper enforces a "
                        "deadline on it", hint="only machines made with `gpucloud create` "
                                               "carry a deadline the reaper reads")
    now = now or utcnow()
    current = instance.shutdown_at
    target = max(current or now, now) + delta if delta is not None else moment
    assert target is not None
    target = at_precision(target, precision)
    if target <= now:
        raise SpecError(f"deadline {format_utc(target)} is in the past",
                        hint="give a time in the future")
    _within_cap(target, now)
    if current is not None and target < current:
        raise SpecError(
            f"{format_utc(target)} is before the current deadline "
            f"{format_utc(current)}: a deadline only moves later",
            hint=f"to end it sooner, `gpucloud delete {instance.ref}` when you are done")
    return target


def overdue(instance: Instance, now: datetime) -> bool:
    return (is_gpucloud(instance.launch_id) and instance.shutdown_at is not None
            and instance.shutdown_at <= now and instance.status not in GONE)


__all__ = ["ENDED", "GONE", "at_precision", "future_deadline", "new_deadline", "overdue",
           "parse_deadline"]
