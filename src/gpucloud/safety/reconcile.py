"""Reconcile: repair the journal from the providers after a crash.

A launch is journaled as an *intent* before its request is sent and marked
delivered or failed after. A crash (SIGKILL, a closed laptop) or an ambiguous
reply nobody followed up leaves the intent *unresolved*: the machine may exist
and bill. Every adapter puts the launch id on the machine (tags, env, labels,
description), so the providers, not the journal, say what happened:

* a machine carries the launch id: *adopted* — journaled delivered with its
  id, and the provider's deadline copied into the journal;
* the provider's listing succeeded and no machine carries it: *failed* — but
  only for an intent older than ``SETTLE_SECONDS``: a younger one may still be
  waiting for its answer in another process, or its machine may not be in the
  listing yet, so it is left *pending* for a later run;
* the provider could not be listed (or has no credentials): *pending*, with a
  warning. Absence is never assumed from a failed look.

Every provider listed is also searched for *orphans*: machines
carrying a launch id from this journal that the journal never recorded as
delivered (its entry says failed, or deleted while the machine still runs, or
another machine was delivered for that launch; a multi-node job's nodes,
which all carry its one launch id and were each recorded by it, are not).
``terminate_orphans``
terminates them. Machines with a launch id this journal never issued are
*foreign* (a colleague's, another laptop's): reported, never touched. So is
a machine whose launch id is not of gpucloud's form (launch_ids.py: blank,
cut short, edited): it is never adopted nor terminated, whatever the journal
holds.

Asked for ``unclaimed``, reconcile lists every provider with credentials
(whatever config.toml's default list says) and reports, among the foreign
machines, those whose launch id has gpucloud's form: *unclaimed* (another
computer's crash, a deleted home; unclaimed.py), with their age and cost so
far. ``delete_unclaimed`` deletes them: it is the one way gpucloud ends a
machine no launch of this journal made, so it is only ever done when asked,
and a machine without the mark, or with a look-alike of it, is never among
them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Union

from pydantic import BaseModel, ConfigDict

from gpucloud.safety.deadlines import ENDED
from gpucloud.errors import GpuCloudError, NotFoundError
from gpucloud.providers.launch_ids import is_gpucloud
from gpucloud.models import Instance, UnclaimedMachine
from gpucloud.core.instructions import Call, Gather, Op
from gpucloud.safety import unclaimed as unclaimed_mod
from gpucloud.safety.journal import UNRESOLVED, LaunchRecord, utcnow
from gpucloud.safety.unresolved import warn_unresolved

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext

# A create waits at most its read timeout (30 s, _http.DEFAULT_TIMEOUT) for an
# answer, then looks for its machine for sum(RECONCILE_DELAYS) s; an intent
# older than both, with a margin for a listing that lags, is settled.
SETTLE_SECONDS = 60.0

TerminateOrphans = Union[bool, Iterable[str]]
DeleteUnclaimed = Union[bool, Iterable[str]]


class _Report(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # CLI start-up


class LaunchIntent(_Report):
    """A launch the journal still does not know the outcome of (``pending``), or
    that reconcile has just marked failed; ``reason`` says which and why."""

    launch_id: str
    provider: str
    instance_type: str
    region: str
    name: str | None = None
    sent_at: datetime  # when the intent was journaled, just before the request
    reason: str


class Orphan(_Report):
    """A running machine with a launch id of this journal, never recorded as
    delivered: ``journal_status`` is what the journal says about that launch
    (failed, deleted, or delivered as ``journal_instance_id``, another machine)."""

    instance: Instance
    journal_status: str
    journal_instance_id: str | None = None


class ReconcileReport(_Report):
    """What one reconcile found and did. ``providers``: those listed successfully.
    ``unclaimed`` (asked for only): the foreign machines whose launch id has
    gpucloud's form, with their age and cost so far; ``unclaimed_cost``: their
    costs together (None: one is not known); ``terminated``: every machine
    this pass ended (orphans, and unclaimed machines when deleting them);
    ``not_deleted``: the unclaimed machines it was asked to delete and could
    not (the reason is in ``warnings``)."""

    at: datetime
    providers: tuple[str, ...]
    adopted: tuple[Instance, ...] = ()
    failed: tuple[LaunchIntent, ...] = ()
    pending: tuple[LaunchIntent, ...] = ()
    orphans: tuple[Orphan, ...] = ()
    foreign: tuple[Instance, ...] = ()
    terminated: tuple[Instance, ...] = ()
    warnings: tuple[str, ...] = ()
    unclaimed: tuple[UnclaimedMachine, ...] = ()
    unclaimed_cost: Decimal | None = None
    not_deleted: tuple[Instance, ...] = ()


def reconcile(ctx: ClientContext, terminate_orphans: TerminateOrphans = False,
              provider: str | None = None, unclaimed: bool = False,
              delete_unclaimed: DeleteUnclaimed = False) -> Op:
    """One pass. ``terminate_orphans``: True terminates every orphan found; a
    collection of refs terminates only the orphans among them (what a user
    confirmed after seeing an earlier report), each still checked to be one.
    ``unclaimed``: list every provider with credentials and report the
    unclaimed machines; ``delete_unclaimed`` (implies it): True deletes every
    one found, a collection of refs only those among them still unclaimed."""
    if delete_unclaimed is not False:
        unclaimed = True
    journal = ctx.journal
    # No tolerance here: repairing a journal that cannot be read is exit 3. Only
    # the unsettled launches are read now, and after the listing the launches of
    # the machines it shows: never the journal's whole history.
    unsettled = journal.unresolved()
    ctx.warnings.clear()
    # Unclaimed machines are looked for on every account with credentials: a
    # leak on a provider left out of the default list bills all the same.
    names = [n for n in ctx.scope(provider, listing=True, every=unclaimed) if ctx.can_call(n)]
    if provider is not None and not names:
        raise ctx.missing_credentials([provider])
    open_ = [r for r in unsettled if provider is None or r.provider == provider]
    for name in dict.fromkeys(r.provider for r in open_):
        if name not in names and ctx.can_call(name):
            names.append(name)  # outside the default scope, but a launch went there
    listed = yield Gather([Call(n, ctx.adapter(n).list_instances()) for n in names])
    machines: dict[str, list[Instance]] = {}
    for name, result in zip(names, listed):
        if isinstance(result, GpuCloudError):
            waiting = sum(1 for r in open_ if r.provider == name)
            ctx.warn(f"{name}: could not list machines ({result})"
                     + (f"; its {waiting} unresolved launch(es) stay unresolved" if waiting
                        else ""))
            continue
        if isinstance(result, BaseException):
            raise result
        machines[name] = result
    if names and not machines:
        # "Nothing to reconcile" must never mean "could not look".
        raise next(r for r in listed if isinstance(r, BaseException))

    now = utcnow()
    adopted: list[Instance] = []
    failed: list[LaunchIntent] = []
    pending: list[LaunchIntent] = []
    records = journal.by_launch_ids(
        m.launch_id for listing in machines.values() for m in listing
        if m.launch_id is not None and is_gpucloud(m.launch_id))
    delivered = {lid: r.instance_id for lid, r in records.items() if r.status == "delivered"}
    for record in open_:
        if record.provider not in machines:
            why = (f"{record.provider} could not be listed" if record.provider in names
                   else f"no credentials for {record.provider}, so it could not be listed")
            if record.provider not in names:
                ctx.warn(f"{record.provider}: launch {record.launch_id} stays unresolved: {why}")
            pending.append(_intent(record, why))
            continue
        carrying = [m for m in machines[record.provider]
                    if is_gpucloud(m.launch_id) and m.launch_id == record.launch_id]
        if carrying:
            # Two machines for one launch would be a provider's bug; the one
            # still alive is adopted and any other is reported as an orphan.
            machine = next((m for m in carrying if m.status not in ENDED), carrying[0])
            adopted.append(_adopt(ctx, record, machine))
            delivered[record.launch_id] = machine.id
            continue
        age = (now - record.created_at).total_seconds()
        if age < SETTLE_SECONDS:
            pending.append(_intent(record, (
                f"sent {int(age)} s ago and not listed yet: a new machine can take a moment "
                f"to appear; run reconcile again after {int(SETTLE_SECONDS)} s")))
            continue
        journal.mark(record.launch_id, "failed", error="reconcile: absent from the listing")
        failed.append(_intent(record, f"no machine on {record.provider} carries launch id "
                                      f"{record.launch_id} (listed {now:%Y-%m-%dT%H:%M:%SZ})"))

    orphans, foreign = _unrecorded(machines, records, delivered)
    orphans = _not_nodes(ctx, orphans)
    found: list[UnclaimedMachine] = []
    if unclaimed:
        found = unclaimed_mod.unclaimed(foreign, records, ctx.catalogs, now)
    terminated, _ = yield from _terminate(ctx, [o.instance for o in orphans], terminate_orphans)
    deleted, not_deleted = yield from _terminate(ctx, [u.instance for u in found],
                                                 delete_unclaimed)
    return ReconcileReport(
        at=now, providers=tuple(machines), adopted=tuple(adopted), failed=tuple(failed),
        pending=tuple(pending), orphans=tuple(orphans), foreign=tuple(foreign),
        terminated=tuple(terminated + deleted), warnings=tuple(ctx.warnings),
        unclaimed=tuple(found),
        unclaimed_cost=unclaimed_mod.total(found) if unclaimed else None,
        not_deleted=tuple(not_deleted))


def _unrecorded(machines: dict[str, list[Instance]], known: dict[str, LaunchRecord],
                delivered: dict[str, str | None]) -> tuple[list[Orphan], list[Instance]]:
    """Running machines the journal does not account for: orphans (its own
    launch ids) and foreign machines (launch ids it never issued). `known`: the
    journal's launches of the listed machines' launch ids."""
    orphans: list[Orphan] = []
    foreign: list[Instance] = []
    for machine in (m for listing in machines.values() for m in listing):
        if machine.launch_id is None or machine.status in ENDED:
            continue
        if not is_gpucloud(machine.launch_id):
            foreign.append(machine)  # a look-alike mark: not ours to act on
            continue
        record = known.get(machine.launch_id)
        if record is None:
            foreign.append(machine)
        elif machine.launch_id in delivered:
            if delivered[machine.launch_id] not in (None, machine.id):
                orphans.append(Orphan(instance=machine, journal_status="delivered",
                                      journal_instance_id=delivered[machine.launch_id]))
        elif record.status not in UNRESOLVED:  # failed, deleted
            orphans.append(Orphan(instance=machine, journal_status=record.status,
                                  journal_instance_id=record.instance_id))
    return orphans, foreign


def _not_nodes(ctx: ClientContext, orphans: list[Orphan]) -> list[Orphan]:
    """Less the nodes of a multi-node job: they all carry its one launch id, the
    journal names node 0's machine, and the launch that delivered them recorded
    every node, node 0 included, in the ledger under that launch id. (A second
    machine a provider made by mistake was never recorded so.) Terminating a
    node would leave the others running a job that cannot go on."""
    from gpucloud.safety.ledger import Ledger

    named = [o for o in orphans if o.journal_status == "delivered"
             and o.journal_instance_id is not None]
    if not named:
        return orphans
    history = Ledger(ctx.journal).history(
        key for o in named for key in ((o.instance.provider, o.instance.id),
                                       (o.instance.provider, str(o.journal_instance_id))))

    def launched(provider: str, instance_id: str, launch_id: str | None) -> bool:
        return any(r.source == "launch" and r.launch_id == launch_id
                   for r in history.get((provider, instance_id), []))

    nodes = {id(o) for o in named
             if launched(o.instance.provider, o.instance.id, o.instance.launch_id)
             and launched(o.instance.provider, str(o.journal_instance_id), o.instance.launch_id)}
    return [o for o in orphans if id(o) not in nodes]


def _adopt(ctx: ClientContext, record: LaunchRecord, machine: Instance) -> Instance:
    ctx.journal.mark(record.launch_id, "delivered", instance_id=machine.id)
    if machine.shutdown_at is not None:
        # The provider's copy is the truth (an extend from elsewhere moves it).
        ctx.journal.set_deadline(machine.provider, machine.id, machine.shutdown_at)
        return machine
    return machine.model_copy(update={"shutdown_at": record.shutdown_at})


def _intent(record: LaunchRecord, reason: str) -> LaunchIntent:
    return LaunchIntent(launch_id=record.launch_id, provider=record.provider,
                        instance_type=record.instance_type, region=record.region,
                        name=record.name, sent_at=record.created_at, reason=reason)


def _terminate(ctx: ClientContext, candidates: list[Instance],
               which: TerminateOrphans) -> Op:
    """End those of `candidates` that `which` names (True: all of them): the
    machines ended, and those that could not be (each also a warning)."""
    if which is False:
        return [], []
    if isinstance(which, str):  # one ref, not its characters
        which = [which]
    chosen = None if which is True else set(which)
    doomed = [m for m in candidates if chosen is None or m.ref in chosen]
    results = yield Gather([Call(m.provider, ctx.adapter(m.provider).delete(m.id))
                            for m in doomed])
    terminated: list[Instance] = []
    refused: list[Instance] = []
    for machine, result in zip(doomed, results):
        if isinstance(result, NotFoundError):
            ctx.warn(f"{machine.ref} was gone before it could be terminated")
        elif isinstance(result, GpuCloudError):
            refused.append(machine)
            ctx.warn(f"{machine.ref} could not be terminated ({result}); it still bills: "
                     f"`gpucloud delete {machine.ref}`")
        elif isinstance(result, BaseException):
            raise result
        else:
            terminated.append(machine)
            ctx.tolerant(f"{machine.ref} was terminated but the journal could not record it",
                         ctx.journal.mark_deleted, machine.provider, machine.id)
    return terminated, refused


__all__ = ["LaunchIntent", "Orphan", "ReconcileReport", "SETTLE_SECONDS", "reconcile",
           "warn_unresolved"]
