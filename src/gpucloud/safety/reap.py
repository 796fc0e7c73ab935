"""``reap``: enforce every deadline, from the providers alone.

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
   request's time) loses, and the extend says so.

A machine that is terminated or terminating is left alone; one that is
stopped or failed is terminated too (it still exists, and its disk may bill).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpucloud.safety import ledger_events
from gpucloud.errors import (
    GpuCloudError, NotFoundError,
)
from gpucloud.providers.launch_ids import is_gpucloud
from gpucloud.models import Instance, ReapAction, ReapReport
from gpucloud.core.instructions import Call, Gather, Op
from gpucloud.safety import unclaimed as unclaimed_mod
from gpucloud.safety.journal import utcnow
from gpucloud.safety.unresolved import warn_unresolved

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext

from gpucloud.safety.deadlines import GONE, overdue

def reap(ctx: ClientContext, dry_run: bool = False, provider: str | None = None,
         unclaimed: bool = False) -> Op:
    """One pass over every provider with credentials (or just `provider`).
    `unclaimed`: also report the machines no launch of this journal made
    (unclaimed.py); a report only, never a reason to end one."""
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
        # Recorded together, in one transaction, before anything is raised: the
        # machines terminated are gone whatever follows.
        ended = [(m.provider, m.id) for m, r in zip(doomed, results)
                 if r is not False and not isinstance(r, BaseException)]
        ledger_events.record_ends(ctx, ended, "reap", "reaped")
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
    found = None
    if unclaimed:  # not those this pass has just ended
        ended = {a.instance.ref for a in actions if a.action in ("terminated", "gone")}
        found = unclaimed_mod.find(ctx, [m for m in machines if m.ref not in ended], now)
    return ReapReport(at=now, dry_run=dry_run, providers=tuple(ok),
                      checked=sum(1 for m in machines if is_gpucloud(m.launch_id)),
                      actions=tuple(actions), warnings=tuple(warnings),
                      unclaimed=tuple(found or ()))


def _action(instance: Instance, action: Any, now: datetime, error: str | None = None
            ) -> ReapAction:
    late = (now - instance.shutdown_at) if instance.shutdown_at else timedelta(0)
    return ReapAction(instance=instance, action=action,
                      overdue_seconds=max(0, int(late.total_seconds())), error=error)


__all__ = ["reap"]
