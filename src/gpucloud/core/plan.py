"""Planning a create: which offer, what it will cost, when it must stop.

Nothing is spent here. The plan carries the cheapest available live offer,
the other candidates create may fall back on (only those that also fit
``max_cost``), the estimate, and the deadline:

* ``auto_shutdown`` fixes the deadline; with ``max_cost`` the estimate over
  that window (times the number of machines) must fit, or BudgetExceededError.
* ``max_cost`` alone: each machine's deadline is when its share of the cap is
  spent; computed again for whichever offer is finally launched
  (``launch_deadline.deadline_for``), since a fallback may cost more per hour. A deadline
  less than a minute away is refused.
* A cap is never kept on a guess: with any price part unknown (a disk price
  not in the data, a live price of 0) ``max_cost`` is refused, naming the part.

``Plan.total`` is the cost of all machines over the window (None without
one); ``Plan.total_per_hour`` is the hourly figure for all of them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from gpucloud.safety import budget, deadlines
from gpucloud.catalog import pricing
from gpucloud.core.instructions import MAX_FALLBACKS, Op, sort_offers
from gpucloud.errors import (
    BudgetExceededError, ConfigurationError, InsufficientCapacityError, SpecError, option,
)
from gpucloud.catalog.gpus import parse_gpu
from gpucloud.safety.launch_deadline import budget_hours, refuse_unknown
from gpucloud.models import Offer, Plan
from gpucloud.safety.journal import utcnow
from gpucloud.core.offers import no_launchable, offers as find_offers

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.types import Deadline, Duration, Money

# A max_cost deadline closer than this is no run at all: refused, not planned.
MIN_RUN_SECONDS = 60


def plan(ctx: ClientContext, gpu: str, count: int, provider: str | None, region: str | None,
         disk_gb: int | None, auto_shutdown: Duration | None, max_cost: Money | None,
         spot: bool, n: int, until: Deadline | None = None, dry_run: bool = False, *,
         suitable: Callable[[Offer], bool] | None = None, project: str | None = None) -> Op:
    """What a create of `n` machines would do. `suitable`: which offers can take
    the work at all (a job's cpu and memory); the others are never candidates.
    `project`: what its launches are for (checked against that project's budget)."""
    if project is not None:
        from gpucloud.config.identity import check_project

        check_project(project)
    if disk_gb is not None and (isinstance(disk_gb, bool) or not isinstance(disk_gb, int)
                                or disk_gb < 1):
        raise SpecError(f"disk size must be a positive number of GB, got {disk_gb!r}")
    # No upper bound: a batch is paced by the provider's rate limit, not capped here.
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpecError(f"number of machines must be at least 1, got {n!r}",
                        hint=f"{option('n', '--instances')} is the number of machines; "
                             f"{option('count', '--count')} the GPUs on each")
    cap = pricing.to_decimal(max_cost, "max cost") if max_cost is not None else None
    if cap is not None and cap <= 0:
        raise SpecError(f"max cost must be positive, got {max_cost}",
                        hint="USD for the whole run, e.g. "
                             f"{option('max_cost', '--max-cost', '200')}")
    window, target, origin = _deadline(ctx, auto_shutdown, until, max_cost)

    # A dry run spends nothing and needs nothing: with no credentials for any
    # provider in scope it plans from the bundled catalog's list prices, which
    # its estimate labels as such (pricing.estimate's "catalog price" note).
    from_catalog = dry_run and not any(ctx.can_call(n) for n in ctx.scope(provider))
    offers = yield from find_offers(ctx, gpu, count, provider, region, spot,
                                    live_only=not from_catalog, disk_gb=disk_gb)
    if suitable is not None:
        offers = [o for o in offers if suitable(o)]
    if not offers:
        raise no_launchable(ctx, gpu, count, provider, region)
    # Live offers with capacity first, and a machine with a price part not known
    # is never picked over one fully priced (sort_offers). Without any, an
    # unreachable provider's list prices still make a plan (a dry run shows it,
    # warned); create refuses to launch a catalog row and reports why the
    # provider failed.
    candidates = sort_offers([o for o in offers if o.available]) \
        or [o for o in offers if o.source == "catalog"]
    if not candidates:
        raise InsufficientCapacityError(
            f"no capacity for {count}x {parse_gpu(gpu)} on "
            f"{', '.join(sorted({o.provider for o in offers}))} right now",
            provider=provider or "any", status_code=0,
            hint="try another region or GPU, or retry later")
    offer = candidates[0]
    notes: list[str] = []
    basis: Literal["auto_shutdown", "max_cost", "per_hour"]
    per_machine = f" per machine, {n} machines" if n > 1 else ""
    if window is not None:
        hours = pricing.duration_hours(window)
        estimate = pricing.estimate(offer, hours, disk_gb=disk_gb)
        shutdown_at, basis = target or utcnow() + window, "auto_shutdown"
        if origin:
            notes.append(origin)
        if cap is not None:
            refuse_unknown(estimate, cap)
            if estimate.total * n > cap:
                over = (auto_shutdown if isinstance(auto_shutdown, str) and until is None
                        else _span(window))
                raise BudgetExceededError(
                    f"estimate ${estimate.total * n} over {over}"
                    f"{per_machine} exceeds "
                    f"--max-cost ${cap}",
                    hint=f"shorten {option('auto_shutdown', '--auto-shutdown')}, raise "
                         f"{option('max_cost', '--max-cost')}, or pick a cheaper GPU")
        fits = [o for o in candidates[1:] if cap is None or _fits(o, hours, disk_gb, cap / n)]
    elif cap is not None:
        estimate = pricing.estimate(offer, 1, disk_gb=disk_gb)
        refuse_unknown(estimate, cap)
        hours = budget_hours(offer, cap / n, disk_gb)
        seconds = int(hours * 3600)
        if seconds < MIN_RUN_SECONDS:
            raise BudgetExceededError(
                f"--max-cost ${cap} buys {_runtime(seconds)} of {offer.instance_type} at "
                f"${pricing.money(estimate.price_per_hour)}/h{' per machine' if n > 1 else ''}: "
                "the deadline would be now",
                hint=f"raise {option('max_cost', '--max-cost')} "
                     f"(at least ${pricing.money(estimate.price_per_hour * n)} "
                     "buys an hour), or pick a cheaper GPU")
        shutdown_at = utcnow() + timedelta(seconds=seconds)
        estimate = pricing.estimate(offer, hours, disk_gb=disk_gb)
        basis = "max_cost"
        notes.append(f"no --auto-shutdown: the deadline is when spend reaches "
                     f"${pricing.money(cap / n)}{' per machine' if n > 1 else ''} "
                     f"({hours.quantize(Decimal('0.01'))} h)")
        fits = [o for o in candidates[1:]
                if not pricing.estimate(o, 1, disk_gb=disk_gb).unknown]
    else:
        estimate, shutdown_at, basis = pricing.estimate(offer, 1, disk_gb=disk_gb), None, "per_hour"
        notes.append("no auto-shutdown: the machine runs until you delete it"
                     + ("" if offer.simulated else ", and bills by the hour"))
        if not offer.simulated:
            ctx.warn(
                f"no deadline: {'these machines run' if n > 1 else 'the machine runs'} and "
                f"bill{'' if n > 1 else 's'} until deleted; set "
                f"{option('auto_shutdown', '--auto-shutdown')} or "
                f"{option('until', '--until')}, or a default in config.toml "
                "([defaults] auto_shutdown = \"8h\")")
        fits = list(candidates[1:])
    if estimate.unknown:
        notes.append(f"price unknown for: {', '.join(estimate.unknown)}")
    if from_catalog:
        notes.append("planned from the bundled catalog: no provider in scope has credentials, "
                     "and a create needs them")
    if shutdown_at and not ctx.adapter(offer.provider).capabilities.native_shutdown:
        notes.append(f"{offer.provider} has no native timer: the deadline is recorded on the "
                     "machine and in the local journal")
    per_hour = estimate.price_per_hour
    total = estimate.total if basis != "per_hour" else None
    made = Plan(offer=offer, alternatives=tuple(fits[:MAX_FALLBACKS]), estimate=estimate,
                hours_basis=basis, shutdown_at=shutdown_at, max_cost=cap, instances=n,
                total_per_hour=per_hour * n if per_hour is not None else None,
                total=pricing.money(total * n) if total is not None else None,
                notes=tuple(notes), project=project)
    # The monthly budget, when config.toml sets one.
    return budget.check(ctx, made, disk_gb)


NEVER = ("never", "none", "off")


def _deadline(ctx: ClientContext, auto_shutdown: Duration | None, until: Deadline | None,
              max_cost: Money | None) -> tuple[timedelta | None, datetime | None, str | None]:
    """(window, absolute deadline, where it came from) of a create.

    ``until`` is an absolute deadline; ``auto_shutdown`` a window from now, or
    "never" to opt out of the config default; with neither (and no max_cost,
    which sets its own deadline) ``[defaults] auto_shutdown`` applies."""
    never = isinstance(auto_shutdown, str) and auto_shutdown.strip().lower() in NEVER
    if until is not None:
        if auto_shutdown is not None and not never:
            raise SpecError("give a window (auto_shutdown, --auto-shutdown) or a deadline "
                            "(until, --until), not both")
        target = deadlines.future_deadline(until)
        return target - utcnow(), target, None
    if never:
        return None, None, None
    if auto_shutdown is not None:
        return pricing.parse_duration(auto_shutdown), None, None
    default = ctx.config.auto_shutdown
    if default is None or max_cost is not None:
        return None, None, None
    try:
        window = pricing.parse_duration(default)
    except SpecError as exc:
        raise ConfigurationError(f"{ctx.config.path}: [defaults] auto_shutdown: {exc.message}",
                                 hint='e.g. auto_shutdown = "8h"') from None
    return window, None, (f"deadline from [defaults] auto_shutdown = \"{default}\" in "
                          f"{ctx.config.path} (--auto-shutdown never to opt out)")


def _span(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def _fits(offer: Offer, hours: Decimal, disk_gb: int | None, cap: Decimal) -> bool:
    est = pricing.estimate(offer, hours, disk_gb=disk_gb)
    return est.total is not None and est.total <= cap


def _runtime(seconds: int) -> str:
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min"
