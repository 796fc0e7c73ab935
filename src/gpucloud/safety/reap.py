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

The machines of a multi-node job (one job batch key, providers/_batch_mark.py)
are one: once a node has ended, failed or stopped, or is missing from the
listing for longer than a launch can take (``LOST_AFTER``, counted from the
oldest node's creation), every other node is ended too, deadline or not, so
that no node runs alone and bills. The job then fails; it is not run again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpucloud.safety import ledger_events
from gpucloud.errors import (
    GpuCloudError, NotFoundError,
)
from gpucloud.providers._batch_mark import job_nodes
from gpucloud.providers.launch_ids import is_gpucloud
from gpucloud.models import Instance, InstanceStatus, ReapAction, ReapReport
from gpucloud.core.flow import Flow
from gpucloud.core.instructions import Call, Gather, Op
from gpucloud.safety import unclaimed as unclaimed_mod
from gpucloud.safety.journal import utcnow
from gpucloud.safety.unresolved import warn_unresolved

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.providers.base import Provider

from gpucloud.safety.deadlines import GONE, overdue

# A node missing from the listing for this long after the first node was
# created is lost: a batch launch (and its roll-back) ends well within it.
LOST_AFTER = timedelta(minutes=15)
NODE_ENDED = (*GONE, InstanceStatus.FAILED, InstanceStatus.STOPPED)


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
    steps = [_Step(m) for m in machines if overdue(m, now)]
    stepped = {s.listed.ref for s in steps}
    steps += [_Step(m, lost) for m, lost in lone_nodes(machines, now)
              if m.ref not in stepped]
    # Each overdue machine in one flow: its fresh read, then at once its
    # delete, rather than every machine's read before any delete.
    results = yield Gather([Call(s.listed.provider,
                                 _settle(ctx.adapter(s.listed.provider), s, now, dry_run))
                            for s in steps])
    ended = [(s.listed.provider, s.listed.id) for s, r in zip(steps, results)
             if s.deleting and r is not False and not isinstance(r, BaseException)]
    # Recorded together, in one transaction, before anything is raised: the
    # machines terminated are gone whatever follows.
    ledger_events.record_ends(ctx, ended, "reap", "reaped")
    read: list[ReapAction] = []  # what the fresh reads found, then what the deletes did
    done: list[ReapAction] = []
    for step, result in zip(steps, results):
        if isinstance(result, BaseException) and not isinstance(result, GpuCloudError):
            raise result
        if not step.deleting:
            if isinstance(result, NotFoundError):
                read.append(_action(step.listed, "gone", now))
            elif isinstance(result, GpuCloudError):
                read.append(_action(step.listed, "failed", now, f"could not re-read: {result}"))
            elif step.read is None or step.read.status in GONE:
                continue
            elif step.lost is None and not overdue(step.read, now):
                read.append(_action(step.read, "extended", now))
            else:  # a dry run
                done.append(_action(step.read, "would_terminate", now, reason=step.lost))
            continue
        machine = step.read
        assert machine is not None  # read before any delete
        if result is False:  # the provider's own check: the deadline moved since the read
            done.append(_action(machine, "extended", now))
        elif isinstance(result, NotFoundError):
            done.append(_action(machine, "gone", now))
        elif isinstance(result, GpuCloudError):
            done.append(_action(machine, "failed", now, str(result)))
        else:
            done.append(_action(machine, "terminated", now, reason=step.lost))
    actions = read + done
    yield from _volumes(ctx, names, dry_run, warnings)
    found = None
    if unclaimed:  # not those this pass has just ended
        gone = {a.instance.ref for a in actions if a.action in ("terminated", "gone")}
        found = unclaimed_mod.find(ctx, [m for m in machines if m.ref not in gone], now)
    return ReapReport(at=now, dry_run=dry_run, providers=tuple(ok),
                      checked=sum(1 for m in machines if is_gpucloud(m.launch_id)),
                      actions=tuple(actions), warnings=tuple(warnings),
                      unclaimed=tuple(found or ()))


def _volumes(ctx: ClientContext, names: list[str], dry_run: bool, warnings: list[str]) -> Op:
    """Volumes: those to go with a job that has ended are deleted (not in a
    dry run); the volumes are listed (the ledger's record brought up to date);
    each that bills with no machine for over a day is a warning."""
    from gpucloud.core import volumes as volume_ops

    with_volumes = [n for n in names if ctx.adapter(n).capabilities.volumes]
    if not with_volumes:
        return
    # `warnings` may be ctx.warnings itself, which each listing starts afresh.
    kept, more = list(warnings), []
    if not dry_run:
        from gpucloud.jobs import volumes as job_volumes

        yield from job_volumes.sweep(ctx)
        more.extend(ctx.warnings)
    for name in with_volumes:
        try:
            yield from volume_ops.list_volumes(ctx, name)
        except GpuCloudError as exc:
            more.append(f"{name}: could not list volumes ({exc})")
        more.extend(ctx.warnings)
    more.extend(volume_ops.unattached_warnings(ctx, with_volumes))
    warnings[:] = kept + [w for i, w in enumerate(more) if w not in kept and w not in more[:i]]


class _Step:
    """One overdue machine of a pass: as listed, as read again, and whether
    its delete was sent (an error then is the delete's, not the read's)."""

    __slots__ = ("deleting", "listed", "lost", "read")

    def __init__(self, listed: Instance, lost: str | None = None) -> None:
        self.listed = listed
        self.lost = lost  # why a node of a multi-node job is ended (another was lost)
        self.read: Instance | None = None
        self.deleting = False


def _settle(adapter: Provider, step: _Step, now: datetime, dry_run: bool) -> Flow[bool | None]:
    """Read the machine again (an extend from elsewhere may have moved its
    deadline since the listing); still overdue, end it (not in a dry run):
    delete_expired's answer, or None when no delete was sent. One flow, so a
    machine's delete follows its own read by one request, not by the reads
    of every other overdue machine."""
    step.read = yield from adapter.get(step.listed.id)
    if step.read.status in GONE or dry_run or (
            step.lost is None and not overdue(step.read, now)):
        return None
    if step.lost is not None:  # a node of a job that lost another: no deadline to check
        step.deleting = True
        yield from adapter.delete(step.read.id)
        return True
    step.deleting = True
    ended: bool = yield from adapter.delete_expired(step.read)
    return ended


def _action(instance: Instance, action: Any, now: datetime, error: str | None = None,
            reason: str | None = None) -> ReapAction:
    late = (now - instance.shutdown_at) if instance.shutdown_at else timedelta(0)
    return ReapAction(instance=instance, action=action,
                      overdue_seconds=max(0, int(late.total_seconds())), error=error,
                      reason=reason)


def lone_nodes(machines: list[Instance], now: datetime) -> list[tuple[Instance, str]]:
    """(machine, why) for every node still up of a multi-node job that has
    lost a node: one ended, failed or stopped, or missing past LOST_AFTER; or
    whose deadline has passed on one node (the nodes' deadlines, set as each
    launched, may be seconds apart: the job ends as one)."""
    groups: dict[str, list[Instance]] = {}
    for m in machines:
        if is_gpucloud(m.launch_id) and job_nodes(m.batch) is not None:
            groups.setdefault(str(m.batch), []).append(m)
    out = []
    for key, group in groups.items():
        wanted = job_nodes(key) or 0
        ended = [m for m in group if m.status in NODE_ENDED]
        late = [m for m in group if overdue(m, now)]
        born = [m.created_at for m in group]
        missing = len(group) < wanted and all(born) and \
            now - min(b for b in born if b is not None) > LOST_AFTER
        if not ended and not late and not missing:
            continue
        why = (f"{ended[0].ref}, a node of the same job, is {ended[0].status.value}" if ended
               else f"{late[0].ref}, a node of the same job, is past its deadline" if late
               else f"{wanted - len(group)} of the job's {wanted} nodes are gone")
        out += [(m, why) for m in group if m.status not in GONE]
    return out


__all__ = ["reap"]
