"""The monthly budgets: the home's or team's (``[budget] monthly = "5000"``
in config.toml, USD), each user's (``[budget.users] alice = "2000"``) and
each project's (``[budget.projects] vision = "3000"``).

Every budget that applies to a request is checked, each by the rule below
over its own rows: the total over everything; the requesting user's
(GPUCLOUD_USER, else the OS user: config/identity.py) over the machines,
volumes and launches in flight that user made; the request's project's
(``--project``) over those of that project. Over any one of them is a
refusal naming which (``user alice's monthly budget $2000``).

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
none) to the new deadline, within this month. The budgets of the machine's
owner and project apply (whoever extends it: the time is billed to them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from gpucloud.catalog import pricing
from gpucloud.config.identity import current_user
from gpucloud.safety.costs import Scope, compute, month_bounds
from gpucloud.errors import BudgetExceededError, option
from gpucloud.safety.launch_deadline import deadline_for
from gpucloud.safety.ledger import SCHEMA as LEDGER_SCHEMA, Ledger, Row, state_of
from gpucloud.models import Instance, Offer, Plan
from gpucloud.safety.journal import utcnow

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext

WARN_AT = Decimal("0.8")


@dataclass(frozen=True)
class Cap:
    """One monthly budget that applies to a request: its amount, whose costs
    it counts, its name in messages and its key in config.toml."""

    limit: Decimal
    scope: Scope
    name: str  # "monthly budget", "user alice's monthly budget"
    key: str  # what to raise: "[budget] monthly", "alice in [budget.users]"

    @property
    def phrase(self) -> str:
        """The budget in a sentence: "the monthly budget", "user alice's monthly budget"."""
        return f"the {self.name}" if self.scope == Scope() else self.name


def caps(ctx: ClientContext, project: str | None, user: str | None = None) -> list[Cap]:
    """The budgets that apply to a request of `user` (default: this process's)
    for `project`: the total, the user's, the project's, those config.toml sets."""
    config = ctx.config
    found = []
    if config.budget_monthly is not None:
        found.append(Cap(config.budget_monthly, Scope(), "monthly budget", "[budget] monthly"))
    if config.budget_users:
        user = user if user is not None else current_user()
        if user in config.budget_users:
            found.append(Cap(config.budget_users[user], Scope(user=user),
                             f"user {user}'s monthly budget", f"{user} in [budget.users]"))
    if project is not None and project in config.budget_projects:
        found.append(Cap(config.budget_projects[project], Scope(project=project),
                         f"project {project}'s monthly budget", f"{project} in [budget.projects]"))
    return found


@dataclass(frozen=True)
class Standing:
    """What a budget's scope has this month: spent, committed (in flight included)."""

    spent: Decimal
    committed: Decimal
    unsettled: list[Decimal]  # the in-flight launches' part of committed


def check(ctx: ClientContext, plan: Plan, disk_gb: int | None = None) -> Plan:
    """The plan with the budgets' figures in its notes, or BudgetExceededError.
    `disk_gb`: the disk size asked for (priced on every offer, fallbacks too)."""
    # A context without a config (a bare planner, as in unit tests) has no budget.
    applies = caps(ctx, plan.project)
    if not applies:
        return plan
    now = utcnow()
    month, start, end = month_bounds(None, now)
    # No tolerance here: a budget that cannot be read cannot be kept (StateError, exit 3).
    standings = _standing(ctx, applies, month, start, now, warn=True)
    request = _request(plan, plan.offer, now, end, disk_gb)
    if request is None:
        raise _unknown_price(ctx, plan, plan.offer, applies[0])
    notes = []
    for cap, had in zip(applies, standings):
        total = had.spent + had.committed + request
        figures = (f"{cap.name} ${pricing.money(cap.limit)} ({month}): spent ${had.spent}, "
                   f"committed ${had.committed}{_in_flight(had.unsettled)}, this request "
                   f"${pricing.money(request)}, together ${pricing.money(total)} "
                   f"({_percent(total, cap.limit)})")
        if total > cap.limit:
            raise _over(ctx, cap, month, had, request)
        if total >= cap.limit * WARN_AT:
            ctx.warn(f"this create brings {month} to {_percent(total, cap.limit)} of "
                     f"{cap.phrase}: {figures}")
        notes.append(figures)
    fits = tuple(o for o in plan.alternatives
                 if (cost := _request(plan, o, now, end, disk_gb)) is not None
                 and all(had.spent + had.committed + cost <= cap.limit
                         for cap, had in zip(applies, standings)))
    return plan.model_copy(update={"notes": (*plan.notes, *notes), "alternatives": fits})


def check_extension(ctx: ClientContext, instance: Instance, target: datetime, now: datetime,
                    record: bool = True) -> None:
    """BudgetExceededError when moving `instance`'s deadline to `target` would
    take this month over a budget that applies (the total, the machine's
    owner's, its project's); a warning at 80 % or more. Admitted, the
    new deadline is in the cost ledger at once, in the same exclusive
    transaction as the check (as a launch's admission journals its intent):
    the next create or extend, here or in another process, counts it. Before
    the provider has it, that over-counts at worst; a later listing corrects a
    deadline the provider did not keep. `record=False`: the check alone (the
    CLI's figures before it asks)."""
    if not ctx.config.budgeted:
        if record:
            _record_extension(ctx, instance, target, now)
        return
    with ctx.journal.exclusive(LEDGER_SCHEMA):
        owner = Ledger(ctx.journal).latest([(instance.provider, instance.id)]).get(
            (instance.provider, instance.id))
        # The machine's owner pays for its time; one the ledger has no owner
        # of is counted as the extender's.
        user = owner.user_name if owner is not None and owner.user_name else None
        applies = caps(ctx, owner.project if owner is not None else None, user)
        if applies:
            _check_extension(ctx, instance, target, now, applies)
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
                     applies: list[Cap]) -> None:
    month, start, end = month_bounds(None, now)
    counted_to = min(instance.shutdown_at or end, end)
    extra = min(target, end) - max(counted_to, now)
    hours = max(Decimal(0), pricing.duration_hours(extra))
    if instance.price_per_hour is None:
        if hours == 0:
            return  # nothing more this month, whatever the price
        cap = applies[0]
        raise BudgetExceededError(
            f"cannot keep {cap.phrase} ${pricing.money(cap.limit)}: the price of "
            f"{instance.ref} is unknown", hint=f"`gpucloud delete {instance.ref}` and create "
                                               f"a machine of known price, or remove {cap.key} "
                                               f"from {ctx.config.path}")
    request = instance.price_per_hour * hours
    for cap, had in zip(applies, _standing(ctx, applies, month, start, now, warn=False)):
        spent, committed = had.spent, had.committed
        total = spent + committed + request
        if total > cap.limit:
            raise BudgetExceededError(
                f"this extend would bring {month} to ${pricing.money(total)}, over "
                f"{cap.phrase} ${pricing.money(cap.limit)} (spent ${spent}, committed "
                f"${committed}, this extension ${pricing.money(request)})",
                hint="extend by less, delete machines you no longer need (`gpucloud costs` "
                     f"shows what runs), or raise {cap.key} in {ctx.config.path}")
        if total >= cap.limit * WARN_AT:
            ctx.warn(f"this extend brings {month} to {_percent(total, cap.limit)} of "
                     f"{cap.phrase} ${pricing.money(cap.limit)} ({month}): spent ${spent}, "
                     f"committed ${committed}, this extension ${pricing.money(request)}")


def admit(ctx: ClientContext, plan: Plan, offer: Offer, record: Callable[[Decimal | None], None],
          disk_gb: int | None = None, machines: int = 1) -> None:
    """Journal one launch's intent (`record`, given what it commits this month:
    `machines` machines, one or a multi-node job's nodes sent as one request)
    only if it fits every monthly budget that applies (the total, this user's,
    the plan's project's) with everything spent, running and in flight in its
    scope; BudgetExceededError otherwise, naming the budget, with nothing
    journaled. The checks and the record are one exclusive transaction of the
    state database.

    It blocks the calling thread while another writer of the same home holds
    the database (an admission: a read of the ledger and one insert,
    milliseconds). Under AsyncClient that is a short blocking wait on the event
    loop, not a thread: operations run as generators on the loop, and every
    journal write there already blocks it for as long."""
    now = utcnow()
    month, start, end = month_bounds(None, now)
    cost = _request(plan, offer, now, end, disk_gb, machines=machines)
    applies = caps(ctx, plan.project)
    if not applies:
        record(cost)  # counted should a budget be set while it is in flight
        return
    if cost is None:
        raise _unknown_price(ctx, plan, offer, applies[0])
    with ctx.journal.exclusive(LEDGER_SCHEMA):
        for cap, had in zip(applies, _standing(ctx, applies, month, start, now, warn=False)):
            if had.spent + had.committed + cost > cap.limit:
                raise _over(ctx, cap, month, had, cost)
        record(cost)


def check_extra(ctx: ClientContext, plan: Plan, extra: Decimal, what: str,
                disk_gb: int | None = None) -> None:
    """Every monthly budget that applies with `extra` (what `what` adds this
    month, e.g. a job's new volumes) on top of the plan's own request:
    BudgetExceededError when it does not fit."""
    applies = caps(ctx, plan.project)
    if not applies or extra <= 0:
        return
    now = utcnow()
    month, start, end = month_bounds(None, now)
    standings = _standing(ctx, applies, month, start, now, warn=False)
    request = _request(plan, plan.offer, now, end, disk_gb)
    if request is None:
        raise _unknown_price(ctx, plan, plan.offer, applies[0])
    for cap, had in zip(applies, standings):
        if had.spent + had.committed + request + extra > cap.limit:
            raise _over(ctx, cap, month, had, request + extra).with_details(
                hint=f"{what} bill ${pricing.money(extra)} of it this month: make them "
                     "smaller, create them first only if you mean to keep them, or raise "
                     f"{cap.key} in {ctx.config.path}")


def _standing(ctx: ClientContext, applies: list[Cap], month: str, start: datetime,
              now: datetime, warn: bool) -> list[Standing]:
    """Each budget's spent and committed this month, over the rows of its scope:
    the ledger is read once, and costs.compute counts each scope."""
    from gpucloud.safety.ledger_volumes import VolumeLedger

    ledger = Ledger(ctx.journal)
    _, _, end = month_bounds(month, now)
    # Launches still in flight first, then the ledger: in a team database other
    # computers' ledger rows land between two reads (the admission lock keeps
    # out only other admissions), and a launch delivered in between must count
    # twice (the safe side) rather than in neither read.
    unsettled_of = [ledger.in_flight(start, user=cap.scope.user, project=cap.scope.project)
                    for cap in applies]
    rows = ledger.rows()
    # Volumes bill by the GB-month until deleted: spent, and committed to the month's end.
    volumes = VolumeLedger(ctx.journal).month(start, end)
    out = []
    unknown: dict[str, None] = {}
    for cap, unsettled in zip(applies, unsettled_of):
        report = compute(rows, month, "instance", now=now, volumes=volumes, scope=cap.scope)
        unknown.update(dict.fromkeys(report.unknown))
        committed = pricing.money(report.projected_known + sum(unsettled, Decimal(0)))
        out.append(Standing(report.spent_known, committed, unsettled))
    if warn and unknown:  # once, however many budgets count them
        ctx.warn(f"monthly budget: running machines of unknown price are not counted: "
                 f"{', '.join(unknown)}")
    return out


def _in_flight(unsettled: list[Decimal]) -> str:
    if not unsettled:
        return ""
    n = len(unsettled)
    return f" with {n} launch{'es' if n > 1 else ''} in flight"


def _over(ctx: ClientContext, cap: Cap, month: str, had: Standing,
          request: Decimal) -> BudgetExceededError:
    total = had.spent + had.committed + request
    stale = (" (a launch left in flight by a crash counts until `gpucloud reconcile` "
             "settles it)" if had.unsettled else "")
    return BudgetExceededError(
        f"this create would bring {month} to ${pricing.money(total)}, over "
        f"{cap.phrase} ${pricing.money(cap.limit)} (spent ${had.spent}, committed "
        f"${had.committed}{_in_flight(had.unsettled)}, this request ${pricing.money(request)})",
        hint=f"set a shorter {option('auto_shutdown', '--auto-shutdown')}, fewer machines or a "
             "cheaper GPU; delete "
             "machines you no longer need (`gpucloud costs` shows what runs); or raise "
             f"{cap.key} in {ctx.config.path}{stale}")


def _unknown_price(ctx: ClientContext, plan: Plan, offer: Offer,
                   cap: Cap) -> BudgetExceededError:
    unknown = plan.estimate.unknown if offer is plan.offer else ()
    return BudgetExceededError(
        f"cannot keep {cap.phrase} ${pricing.money(cap.limit)}: the price of "
        f"{' and '.join(unknown) or 'the machine'} for {offer.provider} "
        f"{offer.instance_type} is unknown",
        hint="pick another provider or GPU (`gpucloud offers`), or remove "
             f"{'[budget]' if cap.scope == Scope() else cap.key} from {ctx.config.path}")


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


__all__ = ["Cap", "WARN_AT", "admit", "caps", "check", "check_extension", "check_extra"]
