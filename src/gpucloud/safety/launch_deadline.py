"""The deadline a machine is launched with, one rule for the launcher (which
sets it) and the monthly budget (which admits the launch on what the machine
costs up to it).

Under ``max_cost`` alone a machine's deadline is when its share of the cap is
spent at the price of the offer it is launched on: a fallback that costs less
per hour runs longer and commits the whole share all the same. A cap is never
kept on a guess: with a price part unknown it is refused, naming the part.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from gpucloud.catalog import pricing
from gpucloud.errors import BudgetExceededError, option
from gpucloud.models import CostEstimate, Offer, Plan
from gpucloud.safety.journal import utcnow


def refuse_unknown(estimate: CostEstimate, cap: Decimal) -> None:
    """A cap cannot be kept on a price that is not known: refuse rather than guess."""
    if estimate.unknown:
        o = estimate.offer
        raise BudgetExceededError(
            f"cannot keep --max-cost ${cap}: the price of {' and '.join(estimate.unknown)} "
            f"for {o.provider} {o.instance_type} is unknown",
            hint=f"drop {option('max_cost', '--max-cost')}, or pick another provider or GPU "
                 "(`gpucloud offers`)")


def budget_hours(offer: Offer, budget: Decimal, disk_gb: int | None) -> Decimal:
    estimate = pricing.estimate(offer, 1, disk_gb=disk_gb)
    refuse_unknown(estimate, budget)
    return min(pricing.hours_for_budget(estimate.price_per_hour, budget), pricing.MAX_HOURS)


def deadline_for(plan: Plan, offer: Offer, disk_gb: int | None,
                 now: datetime | None = None) -> datetime | None:
    """The deadline of a machine launched on `offer` at `now` (a fallback may
    cost more or less per hour). The launcher sets it, and the monthly budget
    admits the launch on what the machine costs up to it: one rule for both."""
    if plan.hours_basis == "max_cost" and plan.max_cost is not None:
        hours = budget_hours(offer, plan.max_cost / plan.instances, disk_gb)
        return (now or utcnow()) + timedelta(seconds=int(hours * 3600))
    return plan.shutdown_at


__all__ = ["budget_hours", "deadline_for", "refuse_unknown"]
