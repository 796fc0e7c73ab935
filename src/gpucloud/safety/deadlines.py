"""Deadlines: moving one later (extend) and enforcing them all (reap).

A deadline lives on the provider (tags, env, labels, description: each adapter
reads back the *latest* of its copies) and, as a copy, in the local journal.
The reaper works from the providers alone, so any machine with the same
credentials enforces every deadline, whoever created the machines:

1. list every provider with credentials;
2. for each machine gpucloud created (it carries a launch id of gpucloud's
   form, launch_ids.py; any other is foreign and never touched) whose deadline
   has passed, read that one machine again: an ``extend`` from another
   machine may have moved its deadline since the listing;
3. still past its deadline: terminate it (not in a dry run), through the
   adapter's ``delete_expired``: where the provider offers a conditional
   delete (Kubernetes: a resourceVersion precondition) the deadline is checked
   once more on the object the delete applies to; elsewhere a plain delete,
   so an ``extend`` landing between the fresh read and the delete (one
   request's time) loses, and the extend says so (below).

``extend`` computes its target once, at the precision the provider stores
(``Provider.deadline_precision``: whole seconds for every real cloud), and
sends it as an absolute time, so a retry of the same target changes nothing.
After the update it reads the machine again: a machine that is terminating
or gone was ended before the extension took hold (InstanceFailedError,
exit 9), never reported as extended.

A machine that is terminated or terminating is left alone; one that is
stopped or failed is terminated too (it still exists, and its disk may bill).
Deadlines only ever move later, so a copy that missed an update can only make
the reaper act earlier, never later.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from gpucloud.safety import budget, ledger
from gpucloud.catalog import pricing
from gpucloud.providers.base import format_utc
from gpucloud.errors import (
    APIResponseValidationError, ConflictError, GpuCloudError, InstanceFailedError, NotFoundError,
    SpecError,
)
from gpucloud.providers.launch_ids import is_gpucloud
from gpucloud.catalog.limits import MAX_HOURS
from gpucloud.models import Instance, InstanceStatus, ReapAction, ReapReport
from gpucloud.core.instructions import Call, Gather, Op
from gpucloud.safety.journal import utcnow
from gpucloud.safety.unresolved import warn_unresolved

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.providers.base import Provider
    from gpucloud.types import Deadline, Duration, Ref

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


def _extension(by: Any, until: Any) -> tuple[timedelta | None, datetime | None]:
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
    delta, moment = _extension(by, until)
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


def extend(ctx: ClientContext, ref: Ref, by: Duration | None = None,
           until: Deadline | None = None) -> Op:
    """Move a machine's deadline later, everywhere it is kept."""
    from gpucloud.core.instances import get

    _extension(by, until)  # bad arguments are refused before any request
    instance: Instance = yield from get(ctx, ref)
    adapter = ctx.adapter(instance.provider)
    now = utcnow()
    target = new_deadline(instance, by, until, now, adapter.deadline_precision)
    budget.check_extension(ctx, instance, target, now)
    retry = f"gpucloud extend {instance.ref} --until {format_utc(target)}"
    try:
        yield Call(instance.provider, adapter.set_deadline(instance, target))
    except (NotFoundError, ConflictError):
        # The provider refused to update a machine it no longer has (or that has
        # ended): the read below says which.
        yield from _still_there(instance, adapter, target)
        raise
    ctx.tolerant(f"{instance.ref}: the new deadline is on the provider but not in the "
                 "local journal", ctx.journal.set_deadline, instance.provider,
                 instance.id, target)
    # Read again: a reaper may have ended the machine between our read and the
    # update, and a provider may accept an update it does not keep.
    updated = yield from _still_there(instance, adapter, target)
    if updated.shutdown_at is None or updated.shutdown_at < target:
        # The provider answered but does not show the new deadline: the reaper
        # would act on the old one, so this is not an extension.
        raise APIResponseValidationError(
            f"{instance.ref}: {instance.provider} accepted the update but reads back deadline "
            f"{_utc(updated.shutdown_at)}, not {_utc(target)}",
            provider=instance.provider,
            hint=f"`gpucloud get {instance.ref}` shows the deadline the reaper will use; "
                 f"retry with `{retry}` (the same deadline: a retry never adds more time)")
    return updated


def _still_there(instance: Instance, adapter: Provider, target: datetime) -> Op:
    """The machine read again after an update; InstanceFailedError when it has ended."""
    try:
        fresh: Instance = yield Call(instance.provider, adapter.get(instance.id))
    except NotFoundError:
        fresh = instance.model_copy(update={"status": InstanceStatus.TERMINATED})
    if fresh.status in GONE:
        raise InstanceFailedError(
            f"{instance.ref} is {fresh.status.value}: the reaper ended it before the extension "
            f"to {format_utc(target)} (its deadline {_utc(instance.shutdown_at)} had passed), "
            "or it was deleted",
            hint="its disk and state are gone; `gpucloud create` a new machine with the "
                 "deadline you want")
    return fresh


def _utc(moment: datetime | None) -> str:
    return format_utc(moment) if moment else "none"


def overdue(instance: Instance, now: datetime) -> bool:
    return (is_gpucloud(instance.launch_id) and instance.shutdown_at is not None
            and instance.shutdown_at <= now and instance.status not in GONE)


def reap(ctx: ClientContext, dry_run: bool = False, provider: str | None = None) -> Op:
    """One pass over every provider with credentials (or just `provider`)."""
    names = [n for n in ctx.scope(provider, listing=True, every=True) if ctx.can_call(n)]
    if provider is not None and not names:
        raise ctx.missing_credentials([provider])
    listed = yield Gather([Call(n, ctx.adapter(n).list_instances()) for n in names])
    ctx.warnings.clear()
    warn_unresolved(ctx)
    warnings = ctx.warnings
    ok: list[str] = []
    machines: list[Instance] = []
    for name, result in zip(names, listed):
        if isinstance(result, GpuCloudError):
            warnings.append(f"{name}: could not list machines, none reaped there ({result})")
            continue
        if isinstance(result, BaseException):
            raise result
        ok.append(name)
        machines.extend(result)
    if names and not ok:
        raise next(r for r in listed if isinstance(r, BaseException))
    now = utcnow()
    due = [m for m in machines if overdue(m, now)]
    # A fresh read of each: the deadline may have moved since the listing.
    fresh = yield Gather([Call(m.provider, ctx.adapter(m.provider).get(m.id)) for m in due])
    actions: list[ReapAction] = []
    doomed: list[Instance] = []
    for listed_machine, again in zip(due, fresh):
        if isinstance(again, NotFoundError):
            actions.append(_action(listed_machine, "gone", now))
            continue
        if isinstance(again, GpuCloudError):
            actions.append(_action(listed_machine, "failed", now, f"could not re-read: {again}"))
            continue
        if isinstance(again, BaseException):
            raise again
        if again.status in GONE:
            continue
        if not overdue(again, now):
            actions.append(_action(again, "extended", now))
            continue
        doomed.append(again)
    if dry_run:
        actions.extend(_action(m, "would_terminate", now) for m in doomed)
    else:
        results = yield Gather([Call(m.provider, ctx.adapter(m.provider).delete_expired(m))
                                for m in doomed])
        for machine, result in zip(doomed, results):
            if result is False:  # the provider's own check: the deadline moved since the read
                actions.append(_action(machine, "extended", now))
            elif isinstance(result, NotFoundError):
                actions.append(_action(machine, "gone", now))
            elif isinstance(result, GpuCloudError):
                actions.append(_action(machine, "failed", now, str(result)))
            elif isinstance(result, BaseException):
                raise result
            else:
                actions.append(_action(machine, "terminated", now))
                ctx.tolerant(f"{machine.ref} was reaped but the journal could not record it",
                             ctx.journal.mark_deleted, machine.provider, machine.id)
                ctx.tolerant(f"{machine.ref}: its end is not in the cost ledger", ledger.ended,
                             ctx, machine.provider, machine.id, "reap")
    return ReapReport(at=now, dry_run=dry_run, providers=tuple(ok),
                      checked=sum(1 for m in machines if is_gpucloud(m.launch_id)),
                      actions=tuple(actions), warnings=tuple(warnings))


def _action(instance: Instance, action: Any, now: datetime, error: str | None = None
            ) -> ReapAction:
    late = (now - instance.shutdown_at) if instance.shutdown_at else timedelta(0)
    return ReapAction(instance=instance, action=action,
                      overdue_seconds=max(0, int(late.total_seconds())), error=error)


__all__ = ["at_precision", "extend", "future_deadline", "new_deadline", "overdue",
           "parse_deadline", "reap"]
