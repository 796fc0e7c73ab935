"""Housekeeping: what a listing shows by default, and deleting every machine in scope.

* A listing hides machines terminated more than ``RECENT_END`` ago: some
  providers keep them listed for an hour or more, and they bury the machines
  that bill. ``all=True`` shows them; so does asking for their status.
* The end of a machine is the one this computer's cost ledger recorded (a
  delete, a reaper termination, or the listing that first saw it ended). One
  the ledger never saw end is hidden unless it was created within
  ``RECENT_END`` (it cannot have ended before it was created).
* A terminated machine carries what it cost from start to end
  (``final_cost``), summed from the ledger as ``gpucloud costs`` does.
* ``delete_all`` deletes every machine in scope that carries gpucloud's launch
  id and is not on its way out; machines made elsewhere (a provider's console,
  other tools) are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import TYPE_CHECKING

from gpucloud.core.instances import list_instances, list_pages
from gpucloud.core.instructions import Call, Gather, Op, collect
from gpucloud.errors import GpuCloudError, SpecError
from gpucloud.safety.journal import utcnow

# The models (pydantic) are imported where a status is named: a listing that
# finds nothing (`gpucloud list` with nothing in scope) never loads them.
if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.models import Instance, InstanceStatus
    from gpucloud.safety.ledger_events import ListingRecord
    from gpucloud.types import StatusFilter

RECENT_END = timedelta(minutes=10)
# On its way out: nothing left to delete.
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_CENT = Decimal("0.01")


def statuses(value: StatusFilter | None) -> frozenset[InstanceStatus] | None:
    """None, a status, a comma-separated list, or an iterable of either -> the set;
    an unknown name is a SpecError that lists the valid ones."""
    if value is None:
        return None
    from gpucloud.models import InstanceStatus

    items = [value] if isinstance(value, (str, InstanceStatus)) else list(value)
    found: set[InstanceStatus] = set()
    valid = ", ".join(s.value for s in InstanceStatus)
    for item in items:
        if isinstance(item, InstanceStatus):
            found.add(item)
            continue
        for name in str(item).split(","):
            name = name.strip().lower()
            try:
                found.add(InstanceStatus(name))
            except ValueError:
                raise SpecError(f"unknown status {name!r}",
                                hint=f"status= (CLI --status) is one or more of: {valid}") \
                    from None
    if not found:
        raise SpecError("no status given", hint=f"status= (CLI --status) is one of: {valid}")
    return frozenset(found)


def listing(ctx: ClientContext, provider: str | None = None, all: bool = False,
            status: StatusFilter | None = None, now: datetime | None = None,
            mine: bool = False) -> Op:
    """The machines in scope, terminated ones with their end and cost, filtered:
    by `status` when given, else without those that ended over RECENT_END ago
    unless `all`; with `mine`, only those this user launched (``mine``)."""
    return (yield from collect(listing_pages(ctx, provider, all, status, now, mine)))


def listing_pages(ctx: ClientContext, provider: str | None = None, all: bool = False,
                  status: StatusFilter | None = None, now: datetime | None = None,
                  mine: bool = False) -> Op:
    """listing as it comes, page by page (``Emit``; core/instances.list_pages)."""
    wanted = statuses(status)  # a bad status fails before anything is listed

    def shape(page: list[Instance], record: ListingRecord | None) -> list[Instance]:
        machines = _with_ends(ctx, page, record)
        if mine:
            machines = _mine(ctx, machines)
        if wanted is not None:
            return [m for m in machines if m.status in wanted]
        if all:
            return machines
        moment = now or utcnow()
        return [m for m in machines if not _long_gone(m, moment)]

    yield from list_pages(ctx, provider, shape)
    # Volumes that bill with no machine (from the ledger: no request to any provider).
    listed = [n for n in ctx.scope(provider, listing=True) if ctx.can_call(n)]
    if listed:
        from gpucloud.core.volumes import unattached_warnings

        for line in unattached_warnings(ctx, listed):
            ctx.warn(line)


def _mine(ctx: ClientContext, machines: list[Instance]) -> list[Instance]:
    """The machines whose launch in the journal this user made (GPUCLOUD_USER,
    else the OS user; config/identity.py): found by machine id, else by the
    launch id the machine carries. A machine the journal has no launch of is
    nobody's here, so not mine. The user is a label, not a permission."""
    from gpucloud.config.identity import current_user

    if not machines or not ctx.journal.exists():
        return []
    me = current_user()
    owners: dict[tuple[str, str], str | None] = {}
    for provider in dict.fromkeys(m.provider for m in machines):
        ids = [m.id for m in machines if m.provider == provider]
        for instance_id, record in ctx.journal.by_instances(provider, ids).items():
            owners[(provider, instance_id)] = record.user_name
    by_launch = ctx.journal.by_launch_ids(
        m.launch_id for m in machines if m.launch_id and (m.provider, m.id) not in owners)
    for m in machines:
        found = by_launch.get(m.launch_id or "")
        if found is not None and found.provider == m.provider:
            owners[(m.provider, m.id)] = found.user_name
    return [m for m in machines if owners.get((m.provider, m.id)) == me]


def _long_gone(machine: Instance, now: datetime) -> bool:
    from gpucloud.models import InstanceStatus

    if machine.status != InstanceStatus.TERMINATED:
        return False
    ended = machine.terminated_at or machine.created_at
    return ended is None or now - ended > RECENT_END


def _with_ends(ctx: ClientContext, machines: list[Instance],
               record: ListingRecord | None = None) -> list[Instance]:
    """Each terminated machine with its end and cost from the ledger: its rows
    there and the one this listing (`record`) is about to write."""
    from gpucloud.models import InstanceStatus

    ended = [(m.provider, m.id) for m in machines if m.status == InstanceStatus.TERMINATED]
    if not ended or not ctx.journal.exists():
        return machines
    from gpucloud.safety.costs import machine_month
    from gpucloud.safety.ledger import ENDED, Ledger

    history = ctx.tolerant("what terminated machines cost is not shown",
                           Ledger(ctx.journal).history, ended) or {}
    out = []
    for machine in machines:
        if machine.status != InstanceStatus.TERMINATED:
            out.append(machine)
            continue
        rows = history.get((machine.provider, machine.id)) or []
        written = record.written(machine.provider, machine.id) if record is not None else None
        if written is not None:
            rows = [*rows, written]
        if rows and rows[-1].state == ENDED:
            end = rows[-1].at
            spent = machine_month(rows, _EPOCH, end, end).spent
            machine = machine.model_copy(update={
                "terminated_at": end, "final_cost": spent.quantize(_CENT) if spent is not None
                else None})
        out.append(machine)
    return out


def in_scope(machines: Iterable[Instance], name_prefix: str | None = None) -> list[Instance]:
    """gpucloud's machines still up, whose name starts with `name_prefix` if given."""
    from gpucloud.safety.deadlines import GONE
    from gpucloud.providers.launch_ids import is_gpucloud

    return [m for m in machines if m.status not in GONE and is_gpucloud(m.launch_id)
            and (name_prefix is None or (m.name or "").startswith(name_prefix))]


def deletable(ctx: ClientContext, provider: str | None = None,
              name_prefix: str | None = None) -> Op:
    machines: list[Instance] = yield from list_instances(ctx, provider)
    return in_scope(machines, name_prefix)


# Deletes sent at once by delete_all before their ends are recorded.
DELETE_CHUNK = 32


def delete_all(ctx: ClientContext, provider: str | None = None,
               name_prefix: str | None = None) -> Op:
    """Delete every machine `deletable` finds; one failure does not stop the
    others. The deleted machines, or the first error once all were tried, its
    `instances` the machines still up."""
    from gpucloud.safety import ledger_events

    machines = yield from deletable(ctx, provider, name_prefix)
    deleted: list[Instance] = []
    failures: list[tuple[Instance, GpuCloudError]] = []
    # A chunk at once (the provider's pacing still holds), so an interrupt leaves
    # at most the chunk in flight unknown (a later listing closes those). The
    # ends are recorded once, in one transaction, as the pass ends, however it
    # ends (an error raised, an interrupt): not a commit per machine or chunk.
    try:
        for start in range(0, len(machines), DELETE_CHUNK):
            chunk = machines[start:start + DELETE_CHUNK]
            results = yield Gather([Call(m.provider, ctx.adapter(m.provider).delete(m.id))
                                    for m in chunk])
            deleted.extend(m for m, r in zip(chunk, results)
                           if not isinstance(r, BaseException))
            for machine, result in zip(chunk, results):
                if isinstance(result, GpuCloudError):
                    failures.append((machine, result))
                elif isinstance(result, BaseException):
                    raise result
    finally:
        # Before anything is raised: these machines are gone whatever follows.
        ledger_events.record_ends(ctx, [(m.provider, m.id) for m in deleted], "delete",
                                  "deleted")
    if failures:
        first = failures[0][1]
        message = first.message
        if len(failures) > 1:
            message = (f"{len(failures)} of {len(machines)} deletes failed; "
                       f"first: {failures[0][0].ref}: {first.message}")
        raise first.with_details(message=message,
                                 instances=[m for m, _ in failures]) from first
    return deleted


__all__ = ["RECENT_END", "delete_all", "deletable", "in_scope", "listing", "listing_pages",
           "statuses"]
