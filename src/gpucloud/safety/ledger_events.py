"""What the operations write in the cost ledger: a launch delivered or
adopted, an end (a delete, a reaper's termination), a stop or start, a
listing. One call each from the launch, the instance operations and the
reaper; the ledger itself (ledger.py) keeps the rows and reads them back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpucloud.models import Instance
from gpucloud.safety import ledger
from gpucloud.safety.ledger import ENDED, RUNNING, STOPPED, Ledger, Row

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext


def launched(ctx: ClientContext, instance: Instance, offer: Any, disk_gb: int | None,
             shutdown_at: datetime | None, launch_id: str | None = None) -> None:
    """A launch delivered or adopted: billing starts now at the offer's full price.
    `launch_id`: the journal's, for a machine whose provider does not echo it."""
    launched_all(ctx, [(instance, offer, disk_gb, shutdown_at, launch_id)])


def launched_all(ctx: ClientContext,
                 launches: Sequence[tuple[Instance, Any, int | None, datetime | None,
                                          str | None]]) -> None:
    """Launches delivered together (a batch's pass), as ``launched`` records
    each, in one append: each offer is priced once, not once per machine."""
    from gpucloud.catalog import pricing

    priced: dict[tuple[int, int | None], tuple[Any, Decimal | None]] = {}
    rows = []
    at = ledger.utcnow()
    for instance, offer, disk_gb, shutdown_at, launch_id in launches:
        key = (id(offer), disk_gb)  # the offers outlive this call: ids are not reused
        if key not in priced:
            estimate = pricing.estimate(offer, 1, disk_gb=disk_gb)
            priced[key] = (estimate.price_per_hour, _stopped_price(offer, estimate))
        price, stopped = priced[key]
        rows.append(Row(
            at=at, provider=instance.provider, instance_id=instance.id, event="started",
            source="launch", state=RUNNING, price_per_hour=price,
            stopped_price_per_hour=stopped,
            shutdown_at=instance.shutdown_at or shutdown_at, name=instance.name,
            instance_type=instance.instance_type or offer.instance_type,
            region=instance.region or offer.region, launch_id=instance.launch_id or launch_id,
            simulated=instance.simulated or offer.simulated, task_id=ctx.task_id))
    Ledger(ctx.journal).append(rows)


def _stopped_price(offer: Any, estimate: Any) -> Decimal | None:
    if offer.simulated:
        return Decimal(0)  # the sandbox bills nothing while stopped
    disk = [line for line in estimate.breakdown if line.component.startswith("disk")]
    return disk[0].price_per_hour if disk else None


def ended(ctx: ClientContext, provider: str, instance_id: str, source: str) -> None:
    """A delete or a reaper termination: billing ends now."""
    ended_all(ctx, [(provider, instance_id)], source)


def ended_all(ctx: ClientContext, machines: Iterable[tuple[str, str]], source: str) -> None:
    """Machines (provider, instance id) deleted or reaped: one transaction."""
    now = ledger.utcnow()
    Ledger(ctx.journal).append([Row(at=now, provider=provider, instance_id=instance_id,
                                    event="terminated", source=source, state=ENDED)
                                for provider, instance_id in machines])


NAMED = 5  # machines a warning names; the rest are counted


def record_ends(ctx: ClientContext, machines: Sequence[tuple[str, str]], source: str,
                verb: str) -> None:
    """The journal and the ledger learn that `machines` ended (`verb`: "deleted",
    "reaped"): both in one transaction however many there are (they share the
    state file), so a pass over hundreds of machines commits once, not twice
    per machine, and a crash leaves both written or neither. A failure to
    record is one warning naming the machines: they did end."""
    if not machines:
        return
    names = ", ".join(f"{provider}/{ident}" for provider, ident in machines[:NAMED])
    if len(machines) > NAMED:
        names += f" and {len(machines) - NAMED} more"
    one = len(machines) == 1
    ctx.tolerant(f"{names} {'was' if one else 'were'} {verb} but the journal could not "
                 f"record it: {'its end is' if one else 'their ends are'} not in the cost "
                 "ledger", _record_ends, ctx, machines, source)


def _record_ends(ctx: ClientContext, machines: Sequence[tuple[str, str]], source: str) -> None:
    # Journal and ledger calls inside exclusive() join its one transaction.
    with ctx.journal.exclusive(ledger.SCHEMA):
        ctx.journal.mark_all_deleted(machines)
        ended_all(ctx, machines, source)


def powered(ctx: ClientContext, instance: Instance, action: str) -> None:
    """A stop or a start; the price the provider quotes, when it quotes one."""
    Ledger(ctx.journal).append([Row(
        at=ledger.utcnow(), provider=instance.provider, instance_id=instance.id,
        event="stopped" if action == "stop" else "started", source="power",
        state=STOPPED if action == "stop" else RUNNING,
        price_per_hour=instance.price_per_hour or None, shutdown_at=instance.shutdown_at,
        name=instance.name, launch_id=instance.launch_id)])


def observed(ctx: ClientContext, instances: Iterable[Instance], listed: Iterable[str] = ()) -> None:
    """A listing of `instances`; `listed`: the providers whose list came back whole."""
    record = ListingRecord(ctx)
    record.page(list(instances))
    record.finish(listed)


UNRECORDED = "the cost ledger did not record this listing"


class ListingRecord:
    """The ledger's record of one listing, taken page by page as it comes
    (ledger.Observation). A damaged state file is one warning, and then no
    record: the listing itself goes on."""

    def __init__(self, ctx: ClientContext) -> None:
        self.ctx = ctx
        self.observation: ledger.Observation | None = ledger.Observation(
            Ledger(ctx.journal), ledger.utcnow())

    def _try(self, fn: Any, *args: Any) -> None:
        if self.observation is not None and self.ctx.tolerant(
                UNRECORDED, lambda: fn(*args) or True) is None:
            self.observation = None

    def page(self, machines: list[Instance]) -> None:
        if self.observation is not None:
            self._try(self.observation.page, machines)

    def drop(self, provider: str) -> None:
        if self.observation is not None:
            self.observation.drop(provider)

    def written(self, provider: str, instance_id: str) -> Row | None:
        """The row this listing writes for the machine, if it writes one."""
        if self.observation is None:
            return None
        return self.observation.written(provider, instance_id)

    def finish(self, listed: Iterable[str] = ()) -> None:
        observation = self.observation
        if observation is None:
            return
        if observation.empty() and not self.ctx.journal.exists():
            return  # nothing to record: an empty listing never creates the state file
        self._try(observation.finish, listed)


__all__ = ["ListingRecord", "ended", "ended_all", "launched", "observed", "powered",
           "record_ends"]
