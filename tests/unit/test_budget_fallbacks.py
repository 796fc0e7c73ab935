"""What a fallback offer commits this month, as the budget admits it: exactly
what the launcher will commit on that offer (the deadline it sets there, and
the plan's disk size), never the chosen offer's hours at the fallback's price.

The offers are built here (CONSTRUCTED: prices chosen so the figures are round;
no provider's reply is involved, only the budget's arithmetic over them)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest

from gpucloud import BudgetExceededError
from gpucloud.catalog import pricing
from gpucloud.safety.budget import admit, check
from gpucloud.config.settings import load_config, state_db_path
from gpucloud.providers.launch_ids import new_launch_id
from gpucloud.models import Offer, Plan
from gpucloud.safety.launch_deadline import deadline_for
from gpucloud.safety.journal import Journal, utcnow


def offer(price: str, region: str, **more) -> Offer:
    return Offer(provider="lambda", instance_type="gpu_1x_h100", region=region, gpu="H100",
                 gpu_count=1, price_per_hour=Decimal(price), source="live", available=True,
                 **more)


def max_cost_plan(chosen: Offer, fallback: Offer, cap: Decimal, now=None) -> Plan:
    """As planner.plan makes one for `max_cost` alone: the deadline is when
    spend reaches the cap on the chosen offer."""
    hours = cap / chosen.price_per_hour
    return Plan(offer=chosen, alternatives=(fallback,), estimate=pricing.estimate(chosen, hours),
                hours_basis="max_cost",
                shutdown_at=(now or utcnow()) + timedelta(hours=float(hours)),
                max_cost=cap, total_per_hour=chosen.price_per_hour, total=cap)


def context(budget: str):
    from gpucloud.config.settings import config_dir

    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "config.toml").write_text(f'[budget]\nmonthly = "{budget}"\n')
    warnings: list[str] = []
    ctx = SimpleNamespace(config=load_config(), journal=Journal(state_db_path()),
                          warn=warnings.append)
    return ctx


def journal_intent(ctx, chosen: Offer, committed: list[Decimal]):
    def record(cost):
        committed.append(cost)
        ctx.journal.record_intent(launch_id=new_launch_id(), provider=chosen.provider,
                                  instance_type=chosen.instance_type, region=chosen.region,
                                  name=None, price_per_hour=str(chosen.price_per_hour),
                                  shutdown_at=None, committed=cost)
    return record


def month_left_hours() -> Decimal:
    from gpucloud.safety.costs import month_bounds

    now = utcnow()
    end = month_bounds(None, now)[2]
    return Decimal(int((end - now).total_seconds())) / 3600


def test_a_cheaper_fallback_under_max_cost_commits_the_whole_cap():
    # $60 at $10/h is 6 h on the chosen offer; on a $5/h fallback the launcher
    # sets the deadline 12 h out, so that machine commits the whole $60.
    chosen, cheaper = offer("10.00", "us-east-1"), offer("5.00", "us-west-1")
    plan = max_cost_plan(chosen, cheaper, Decimal(60))
    if month_left_hours() < 13:
        pytest.skip("the month ends within 13 h: the cap's month share is tested below")
    ran = deadline_for(plan, cheaper, None) - utcnow()
    assert timedelta(hours=11, minutes=59) < ran <= timedelta(hours=12)
    ctx = context("100")
    committed: list[Decimal] = []
    admit(ctx, plan, cheaper, journal_intent(ctx, cheaper, committed))
    assert Decimal("59.99") < committed[0] <= Decimal(60)  # not $5 x 6 h = $30
    with pytest.raises(BudgetExceededError) as info:  # $60 + $60 > $100
        admit(ctx, plan, cheaper, journal_intent(ctx, cheaper, committed))
    assert "this request $60.00" in str(info.value)
    assert len(committed) == 1


def disk_plan():
    """4 h on a $2/h machine, 1000 GB of disk; the fallback prices storage apart
    (Vast.ai-style): 1000 GB at $0.146/GB-month is $0.20/h on top of its
    machine, where its own default disk (10 GB) would count $0.002/h."""
    chosen = offer("2.00", "us-east-1")
    fallback = offer("3.002", "us-west-1", disk_gb=10,
                     disk_price_per_gb_month=Decimal("0.146"))
    estimate = pricing.estimate(chosen, 4, disk_gb=1000)
    plan = Plan(offer=chosen, alternatives=(fallback,), estimate=estimate,
                hours_basis="auto_shutdown", shutdown_at=utcnow() + timedelta(hours=4),
                total_per_hour=estimate.price_per_hour, total=estimate.total)
    if month_left_hours() < 5:
        pytest.skip("the month ends within 5 h")
    return plan, fallback


def test_the_plan_keeps_a_fallback_only_where_it_fits_with_the_plans_disk():
    plan, fallback = disk_plan()
    ctx = context("100")
    ctx.journal.record_intent(launch_id=new_launch_id(), provider="lambda",
                              instance_type="gpu_1x_h100", region="us-east-1", name=None,
                              price_per_hour="2.00", shutdown_at=None,
                              committed=Decimal("87.50"))
    # $87.50 + $8 fits; the fallback's $12.80 does not (at its own 10 GB, $12.008 did).
    checked = check(ctx, plan, disk_gb=1000)
    assert checked.alternatives == ()
    assert check(ctx, plan, disk_gb=10).alternatives == (fallback,)


def test_a_fallback_over_the_month_end_counts_its_month_share(monkeypatch):
    from datetime import datetime, timezone

    late = datetime(2026, 12, 31, 20, 0, tzinfo=timezone.utc)  # 4 h of December left
    monkeypatch.setattr("gpucloud.safety.budget.utcnow", lambda: late)
    monkeypatch.setattr("gpucloud.core.plan.utcnow", lambda: late)
    chosen, cheaper = offer("10.00", "us-east-1"), offer("5.00", "us-west-1")
    plan = max_cost_plan(chosen, cheaper, Decimal(60), now=late)
    ctx = context("1000")
    committed: list[Decimal] = []
    admit(ctx, plan, cheaper, journal_intent(ctx, cheaper, committed))
    assert committed == [Decimal(20)]  # $5 x the 4 h left of the month


def test_a_fallback_counts_the_plans_disk_where_the_provider_prices_it():
    plan, fallback = disk_plan()
    ctx = context("1000")
    committed: list[Decimal] = []
    admit(ctx, plan, fallback, journal_intent(ctx, fallback, committed), disk_gb=1000)
    machine_and_disk = (Decimal(3) + Decimal("0.146") * 1000 / 730) * 4
    assert committed == [machine_and_disk]  # $12.80, not $3.002 x 4 h = $12.008
