"""The monthly budget (``[budget] monthly = "5000"`` in config.toml, USD).

Checked at the end of every plan (so ``create``, ``create --dry-run`` and
``Client.plan`` alike; never ``offers`` or ``estimate``):

    spent this month + committed + this request  <=  budget

* spent and committed come from the cost ledger (``costs.py``): committed is
  what machines still running will cost up to their deadline or the end of
  the month, whichever is first (no deadline: the end of the month); a job
  without a machine (a Kubernetes Job) is in the ledger as itself
  (jobs/costs.py); a volume (ledger_volumes.py) counts to the end of the
  month, and a job's plan adds the volumes it would create (``check_extra``);
* this request: every machine of the plan at the chosen offer's price, up to
  the plan's deadline or the end of the month, by the same rule;
* over the budget: BudgetExceededError (exit 7) with the figures; at 80 % or
  more: a warning. The figures are a note of the plan either way;
* a cap is never kept on a guess: a request whose price is not known is
  refused; running machines of unknown price are left out of committed, with
  a warning naming them;
* the fallback offers create may try are kept only where they fit too, each
  costed as it would be launched: its own price with the plan's disk, up to
  the deadline the launcher gives it (``launch_deadline.deadline_for``: under
  ``max_cost`` alone a cheaper offer runs longer and commits the whole cap).

The plan's check is advice (a dry run shows it; a prompt may wait between
plan and launch). What keeps the budget is the admission of each launch
(``admit``, called by core/launch.py for every machine, batch slot and job):
in one exclusive transaction of the home's state database (SQLite BEGIN
IMMEDIATE, so one admission at a time per GPUCLOUD_HOME, across processes,
threads and tasks) the figures are read again and the launch intent is
journaled with what it commits this month. Committed therefore includes the
launches journaled and not yet in the ledger (``Ledger.in_flight``): ten
creates started at once admit what fits, and every refusal quotes a
committed figure counting the ones admitted before it. The transaction ends
before the launch request is sent.

``extend`` is checked the same way (``check_extension``): this request is the
extra time at the machine's price, counted from where the ledger already
counts the machine (its current deadline, or the end of the month when it has
none) to the new deadline, within this month.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from gpucloud.catalog import pricing
from gpucloud.safety.costs import compute, month_bounds
from gpucloud.errors import BudgetExceededError, option
from gpucloud.safety.launch_deadline import deadline_for
from gpucloud.safety.ledger import SCHEMA as LEDGER_SCHEMA, Ledger, Row, state_of
from gpucloud.models import Instance, Offer, Plan
from gpucloud.safety.journal import utcnow

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext

WARN_AT = Decimal("0.8")


def check(ctx: ClientContext, plan: Plan, disk_gb: int | None = None) -> Plan:
    """The plan with the budget's figures in its notes, or BudgetExceededError.
    `disk_gb`: the disk size asked for (priced on every offer, fallbacks too)."""
    # A context without a config (a bare planner, as in unit tests) has no budget.
    limit: Decimal | None = ctx.config.budget_monthly
    if limit is None:
        return plan
    now = utcnow()
    month, start, end = month_bounds(None, now)
    # No tolerance here: a budget that cannot be read cannot be kept (StateError, exit 3).
    spent, committed, unsettled = _standing(ctx, month, start, now, warn=True)
    request = _request(plan, plan.offer, now, end, disk_gb)
    if request is None:
        raise _unknown_price(ctx, plan, plan.offer, limit)
    total = spent + committed + request
    figures = (f"monthly budget ${pricing.money(limit)} ({month}): spent ${spent}, committed "
               f"${committed}{_in_flight(unsettled)}, this request "
               f"${pricing.money(request)}, together ${pricing.money(total)} "
               f"({_percent(total, limit)})")
    if total > limit:
        raise _over(ctx, month, limit, spent, committed, unsettled, request)
    if total >= limit * WARN_AT:
        ctx.warn(f"this create brings {month} to {_percent(total, limit)} of the monthly "
                 f"budget: {figures}")
    fits = tuple(o for o in plan.alternatives
                 if (cost := _request(plan, o, now, end, disk_gb)) is not None
                 and spent + committed + cost <= limit)
    return plan.model_copy(update={"notes": (*plan.notes, figures), "alternatives": fits})


def check_extension(ctx: ClientContext, instance: Instance, target: datetime, now: datetime,
                    record: bool = True) -> None:
    """BudgetExceededError when moving `instance`'s deadline to `target` would
    take this month over the budget; a warning at 80 % or more. Admitted, the
    new deadline is in the cost ledger at once, in the same exclusive
    transaction as the check (as a launch's admission journals its intent):
    the next create or extend, here or in another process, counts it. Before
    the provider has it, that over-counts at worst; a later listing corrects a
    deadline the provider did not keep. `record=False`: the check alone (the
    CLI's figures before it asks)."""
    limit: Decimal | None = ctx.config.budget_monthly
    if limit is None:
        if record:
            _record_extension(ctx, instance, target, now)
        return
    with ctx.journal.exclusive(LEDGER_SCHEMA):
        _check_extension(ctx, instance, target, now, limit)
        if record:
            _record_extension(ctx, instance, target, now)


def _record_extension(ctx: ClientContext, instance: Instance, target: datetime,
                      now: datetime) -> None:
    ledger = Ledger(ctx.journal)
    state = state_of(instance.status)
    # A machine the ledger has not seen yet (made elsewhere) is first recorded
    # by a listing, from when it was created: a row here would start it now.
    if state is None or not ledger.latest([(instance.provider, instance.id)]):
        return
    ledger.append([Row(at=now, provider=instance.provider, instance_id=instance.id,
                       event="extended", source="extend", state=state, shutdown_at=target)])


def _check_extension(ctx: ClientContext, instance: Instance, target: datetime, now: datetime,
                     limit: Decimal) -> None:
    month, start, end = month_bounds(None, now)
    counted_to = min(instance.shutdown_at or end, end)
    extra = min(target, end) - max(counted_to, now)
    hours = max(Decimal(0), pricing.duration_hours(extra))
    if instance.price_per_hour is None:
        if hours == 0:
            return  # nothing more this month, whatever the price
        raise BudgetExceededError(
            f"cannot keep the monthly budget ${pricing.money(limit)}: the price of "
            f"{instance.ref} is unknown", hint=f"`gpucloud delete {instance.ref}` and create "
                                               f"a machine of known price, or remove [budget] "
                                               f"from {ctx.config.path}")
    spent, committed, _ = _standing(ctx, month, start, now, warn=False)
    request = instance.price_per_hour * hours
    total = spent + committed + request
    if total > limit:
        raise BudgetExceededError(
            f"this extend would bring {month} to ${pricing.money(total)}, over the monthly "
            f"budget ${pricing.money(limit)} (spent ${spent}, committed ${committed}, this "
            f"extension ${pricing.money(request)})",
            hint="extend by less, delete machines you no longer need (`gpucloud costs` shows "
                 f"what runs), or raise [budget] monthly in {ctx.config.path}")
    if total >= limit * WARN_AT:
        ctx.warn(f"this extend brings {month} to {_percent(total, limit)} of the monthly budget "
                 f"${pricing.money(limit)} ({month}): spent ${spent}, committed ${committed}, "
                 f"this extension ${pricing.money(request)}")


def admit(ctx: ClientContext, plan: Plan, offer: Offer, record: Callable[[Decimal | None], None],
          disk_gb: int | None = None, machines: int = 1) -> None:
    """Journal one launch's intent (`record`, given what it commits this month:
    `machines` machines, one or a multi-node job's nodes sent as one request)
    only if it fits the monthly budget with everything spent, running and
    in flight; BudgetExceededError otherwise, with nothing journaled. The check
    and the record are one exclusive transaction of the state database.

    It blocks the calling thread while another writer of the same home holds
    the database (an admission: a read of the ledger and one insert,
    milliseconds). Under AsyncClient that is a short blocking wait on the event
    loop, not a thread: operations run as generators on the loop, and every
    journal write there already blocks it for as long."""
    now = utcnow()
    month, start, end = month_bounds(None, now)
    cost = _request(plan, offer, now, end, disk_gb, machines=machines)
    limit: Decimal | None = ctx.config.budget_monthly
    if limit is None:
        record(cost)  # counted should a budget be set while it is in flight
        return
    if cost is None:
        raise _unknown_price(ctx, plan, offer, limit)
    with ctx.journal.exclusive(LEDGER_SCHEMA):
        spent, committed, unsettled = _standing(ctx, month, start, now, warn=False)
        if spent + committed + cost > limit:
            raise _over(ctx, month, limit, spent, committed, unsettled, cost)
        record(cost)


def check_extra(ctx: ClientContext, plan: Plan, extra: Decimal, what: str,
                disk_gb: int | None = None) -> None:
    """The monthly budget with `extra` (what `what` adds this month, e.g. a
    job's new volumes) on top of the plan's own request: BudgetExceededError
    when it does not fit."""
    limit: Decimal | None = ctx.config.budget_monthly
    if limit is None or extra <= 0:
        return
    now = utcnow()
    month, start, end = month_bounds(None, now)
    spent, committed, unsettled = _standing(ctx, month, start, now, warn=False)
    request = _request(plan, plan.offer, now, end, disk_gb)
    if request is None:
        raise _unknown_price(ctx, plan, plan.offer, limit)
    if spent + committed + request + extra > limit:
        raise _over(ctx, month, limit, spent, committed, unsettled, request + extra).with_details(
            hint=f"{what} bill ${pricing.money(extra)} of it this month: make them smaller, "
                 "create them first only if you mean to keep them, or raise [budget] monthly "
                 f"in {ctx.config.path}")


def _standing(ctx: ClientContext, month: str, start: datetime, now: datetime,
              warn: bool) -> tuple[Decimal, Decimal, list[Decimal]]:
    """(spent, committed, the in-flight launches' part of committed) this month."""
    from gpucloud.safety.ledger_volumes import VolumeLedger

    ledger = Ledger(ctx.journal)
    _, _, end = month_bounds(month, now)
    # Volumes bill by the GB-month until deleted: spent, and committed to the month's end.
    report = compute(ledger.rows(), month, "instance", now=now,
                     volumes=VolumeLedger(ctx.journal).month(start, end))
    unsettled = ledger.in_flight(start)
    if warn and report.unknown:
        ctx.warn(f"monthly budget: running machines of unknown price are not counted: "
                 f"{', '.join(report.unknown)}")
    committed = pricing.money(report.projected_known + sum(unsettled, Decimal(0)))
    return report.spent_known, committed, unsettled


def _in_flight(unsettled: list[Decimal]) -> str:
    if not unsettled:
        return ""
    n = len(unsettled)
    return f" with {n} launch{'es' if n > 1 else ''} in flight"


def _over(ctx: ClientContext, month: str, limit: Decimal, spent: Decimal, committed: Decimal,
          unsettled: list[Decimal], request: Decimal) -> BudgetExceededError:
    total = spent + committed + request
    stale = (" (a launch left in flight by a crash counts until `gpucloud reconcile` "
             "settles it)" if unsettled else "")
    return BudgetExceededError(
        f"this create would bring {month} to ${pricing.money(total)}, over the monthly "
        f"budget ${pricing.money(limit)} (spent ${spent}, committed ${committed}"
        f"{_in_flight(unsettled)}, this request ${pricing.money(request)})",
        hint=f"set a shorter {option('auto_shutdown', '--auto-shutdown')}, fewer machines or a "
             "cheaper GPU; delete "
             "machines you no longer need (`gpucloud costs` shows what runs); or raise "
             f"[budget] monthly in {ctx.config.path}{stale}")


def _unknown_price(ctx: ClientContext, plan: Plan, offer: Offer,
                   limit: Decimal) -> BudgetExceededError:
    unknown = plan.estimate.unknown if offer is plan.offer else ()
    return BudgetExceededError(
        f"cannot keep the monthly budget ${pricing.money(limit)}: the price of "
        f"{' and '.join(unknown) or 'the machine'} for {offer.provider} "
        f"{offer.instance_type} is unknown",
        hint="pick another provider or GPU (`gpucloud offers`), or remove [budget] from "
             f"{ctx.config.path}")


def _request(plan: Plan, offer: Offer, now: datetime, end: datetime, disk_gb: int | None,
             machines: int | None = None) -> Decimal | None:
    """What the plan's machines (or `machines` of them) launched on `offer` now
    cost this month: at the offer's price with the plan's disk, up to the
    deadline the launcher gives a machine there (launch_deadline.deadline_for: under
    ``max_cost`` a cheaper fallback runs longer, so it commits the whole cap,
    not its price x the chosen offer's hours) or the end of the month,
    whichever is first. None: price unknown."""
    n = plan.instances if machines is None else machines
    per_hour = pricing.estimate(offer, 1, disk_gb=disk_gb).price_per_hour
    if per_hour is None:
        return None
    deadline = deadline_for(plan, offer, disk_gb, now=now)
    if deadline is not None and deadline == plan.shutdown_at and deadline <= end:
        # The plan's own window, counted from the plan: the figure the plan shows,
        # never less than what is left of it.
        hours = plan.estimate.hours
    else:  # no deadline, or one next month: counted to the end of this month
        stop = end if deadline is None else min(deadline, end)
        hours = max(Decimal(0), pricing.duration_hours(stop - now))
    return per_hour * hours * n


def _percent(total: Decimal, limit: Decimal) -> str:
    return f"{(total * 100 / limit).quantize(Decimal('0.1'))} %"


__all__ = ["WARN_AT", "admit", "check", "check_extension", "check_extra"]
