"""Unknown price parts are never zero; caps refuse on them; Plan totals say
what they cover (pricing.py, core/plan.py, and their rendering)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest

from gpucloud.catalog import pricing
from gpucloud.cli.commands.instance import plan_text
from gpucloud.cli.output import estimate_text
from gpucloud.config.settings import Config
from gpucloud.errors import BudgetExceededError, exit_code_for
from gpucloud.models import Offer, UsagePrice
from gpucloud.core.plan import plan


def offer(**kw):
    base = dict(provider="lambda", instance_type="gpu_8x_h100_sxm5", region="us-east-1",
                gpu="H100", gpu_count=8, price_per_hour=Decimal("23.92"), source="live",
                available=True)
    base.update(kw)
    return Offer(**base)


VAST = dict(provider="vastai", instance_type="8x-H100_SXM", region="US", offer_id="1")


class FakeContext:
    """What planner.plan asks of its context: live offers (through the offer
    search, replaced below) and adapter capabilities."""

    def __init__(self, offers):
        self._offers = offers
        self.asked = None
        self.warned = []
        self.config = Config(path=Path("config.toml"))
        self.warn = self.warned.append

    def adapter(self, name):
        return SimpleNamespace(capabilities=SimpleNamespace(native_shutdown=False))

    def offers(self, *args, **kwargs):
        self.asked = kwargs
        return list(self._offers)
        yield  # a generator, like the offer search


def make_plan(offers, *, disk_gb=None, auto_shutdown=None, max_cost=None, n=1, ctx=None):
    ctx = ctx or FakeContext(offers)
    op = plan(ctx, "h100", 8, None, None, disk_gb, auto_shutdown, max_cost, False, n)
    with mock.patch("gpucloud.core.plan.find_offers",
                    lambda context, *args, **kwargs: context.offers(*args, **kwargs)):
        try:
            next(op)
        except StopIteration as stop:
            return stop.value
    raise AssertionError("the plan asked for more than offers")


# -- estimates -------------------------------------------------------------------------


def test_a_live_price_of_zero_is_unknown_not_free():
    est = pricing.estimate(offer(price_per_hour=Decimal(0)), 10)
    assert est.unknown == ("GPU instance",)
    assert est.breakdown[0].price_per_hour is None and est.breakdown[0].total is None
    assert est.price_per_hour is None and est.total is None


def test_a_machine_priced_at_its_storage_alone_is_unknown():
    # Vast: dph_base 0 with a storage rate -> price_per_hour is the disk only.
    rate = Decimal("0.36")
    est = pricing.estimate(offer(**VAST, price_per_hour=rate * 100 / 720, disk_gb=100,
                                 disk_price_per_gb_month=rate, hours_per_month=720), 1)
    assert est.unknown == ("GPU instance",) and est.breakdown[1].price_per_hour == Decimal("0.05")


def test_a_disk_billed_apart_at_an_unknown_rate_is_unknown():
    est = pricing.estimate(offer(**VAST, disk_billed_apart=True, disk_gb=32), 10)
    assert est.unknown == ("disk (32 GB)",)
    assert est.breakdown[0].total == Decimal("239.20")  # the known part stays known
    assert est.total is None


def test_storage_months_follow_the_provider():
    rate = Decimal("0.36")
    vast = pricing.estimate(offer(**VAST, price_per_hour=Decimal(2) + rate * 100 / 720,
                                  disk_gb=100, disk_price_per_gb_month=rate,
                                  hours_per_month=720), 1)
    usual = pricing.estimate(offer(price_per_hour=Decimal(2) + rate * 100 / 730, disk_gb=100,
                                   disk_price_per_gb_month=rate), 1)
    assert vast.breakdown[1].price_per_hour == Decimal("0.05")
    assert usual.breakdown[1].price_per_hour == rate * 100 / 730
    assert vast.breakdown[0].price_per_hour == usual.breakdown[0].price_per_hour == 2


def test_usage_charges_are_lines_of_their_own_outside_the_total():
    o = offer(**VAST, usage_prices=(UsagePrice(component="egress", price=Decimal("0.02"),
                                               unit="GB"),))
    est = pricing.estimate(o, 2)
    assert est.total == Decimal("47.84") and est.unknown == ()
    [egress] = [line for line in est.breakdown if line.unit]
    assert (egress.component, egress.unit_price, egress.unit) == (
        "egress", Decimal("0.02"), "GB egress")
    text = estimate_text(est)
    assert "$0.02/GB egress" in text and "not in the total" in text


def test_estimate_text_says_unknown_never_zero():
    text = estimate_text(pricing.estimate(offer(**VAST, disk_billed_apart=True, disk_gb=32), 3))
    assert "disk (32 GB)" in text and "unknown" in text
    assert "$0.00" not in text and "price unknown for: disk (32 GB)" in text


def test_an_implausible_price_is_no_offer():
    for bad in (Decimal("Infinity"), Decimal(10) ** 7, Decimal(-1)):
        with pytest.raises(ValueError):
            offer(price_per_hour=bad)


# -- caps ---------------------------------------------------------------------------------


@pytest.mark.parametrize("auto_shutdown", ["4h", None])
def test_a_cap_refuses_an_unknown_disk_price_and_names_it(auto_shutdown):
    vast = offer(**VAST, price_per_hour=Decimal("10"), disk_billed_apart=True, disk_gb=32)
    with pytest.raises(BudgetExceededError) as info:
        make_plan([vast], auto_shutdown=auto_shutdown, max_cost=500)
    assert "disk (32 GB)" in str(info.value) and "unknown" in str(info.value)
    assert exit_code_for(info.value) == 7


def test_a_cap_refuses_a_live_price_of_zero():
    with pytest.raises(BudgetExceededError, match="GPU instance"):
        make_plan([offer(price_per_hour=Decimal(0))], auto_shutdown="2h", max_cost=100)


def test_without_a_cap_an_unknown_part_is_planned_and_said():
    p = make_plan([offer(**VAST, disk_billed_apart=True, disk_gb=32)], auto_shutdown="1h")
    assert p.total is None and p.total_per_hour is None
    assert any("unknown" in n for n in p.notes)
    assert "unknown" in plan_text(p)


def test_a_known_price_is_picked_before_an_unknown_one():
    free = offer(price_per_hour=Decimal(0), region="us-west-1")
    p = make_plan([free, offer()], auto_shutdown="1h")
    assert p.offer.region == "us-east-1" and p.alternatives == (free,)


def test_a_fully_priced_offer_is_picked_before_a_cheaper_one_with_an_unknown_disk():
    unknown = offer(**VAST, price_per_hour=Decimal("10"), disk_billed_apart=True, disk_gb=32)
    p = make_plan([unknown, offer()], max_cost=100)
    assert p.offer.provider == "lambda" and p.alternatives == ()


def test_fallbacks_with_unknown_prices_are_dropped_under_a_cap():
    unknown = offer(**VAST, price_per_hour=Decimal("20"), disk_billed_apart=True, disk_gb=32)
    p = make_plan([offer(), unknown], max_cost=100)
    assert p.alternatives == ()
    p = make_plan([offer(), unknown], auto_shutdown="1h", max_cost=100)
    assert p.alternatives == ()


@pytest.mark.parametrize("cap", ["0.10", "0.39"])
def test_a_cap_that_buys_less_than_a_minute_is_refused(cap):
    # $23.92/h: $0.10 is 15 s, $0.39 is 58 s -- the deadline would be now.
    with pytest.raises(BudgetExceededError) as info:
        make_plan([offer()], max_cost=cap)
    assert "deadline would be now" in str(info.value) and "raise max_cost=" in info.value.hint


def test_a_cap_that_buys_a_minute_is_planned():
    p = make_plan([offer()], max_cost="0.40")  # 60.2 s
    assert p.shutdown_at is not None and p.hours_basis == "max_cost"


# -- totals ---------------------------------------------------------------------------------


def test_plan_total_is_over_the_window_for_all_machines():
    p = make_plan([offer()], auto_shutdown="3h", n=2)
    assert p.estimate.total == Decimal("71.76")  # one machine, as before
    assert p.total == Decimal("143.52")
    assert p.total_per_hour == Decimal("47.84")
    text = plan_text(p)
    assert "x 2 machines = $47.84/h" in text
    assert "total over the window (auto-shutdown): $143.52 USD" in text


def test_without_a_window_the_total_is_unknown_and_the_hourly_figure_given():
    p = make_plan([offer()], n=3)
    assert p.hours_basis == "per_hour"
    assert p.total is None and p.total_per_hour == Decimal("71.76")
    assert "$71.76/h until deleted" in plan_text(p)


def test_a_max_cost_window_totals_to_the_cap():
    p = make_plan([offer()], max_cost=100, n=2)
    assert p.total is not None and p.total <= Decimal(100)
    assert Decimal(100) - p.total < Decimal("0.05")


def test_the_disk_asked_for_reaches_the_offer_search():
    ctx = FakeContext([offer()])
    make_plan([], disk_gb=200, auto_shutdown="1h", ctx=ctx)
    assert ctx.asked.get("disk_gb") == 200


# -- deadlines in the plan -------------------------------------------------------------


def test_a_plan_without_any_deadline_on_a_real_provider_warns():
    ctx = FakeContext([offer()])
    result = make_plan([offer()], ctx=ctx)
    assert result.shutdown_at is None
    assert ctx.warned and "no deadline" in ctx.warned[0]
    assert "auto_shutdown=" in ctx.warned[0] and "config.toml" in ctx.warned[0]
    ctx = FakeContext([offer()])
    assert make_plan([offer()], auto_shutdown="4h", ctx=ctx).shutdown_at is not None
    assert ctx.warned == []


def test_the_config_default_deadline_applies_only_when_none_is_given():
    ctx = FakeContext([offer()])
    ctx.config = Config(path=Path("c.toml"), auto_shutdown="8h")
    result = make_plan([offer()], ctx=ctx)
    assert result.hours_basis == "auto_shutdown" and result.estimate.hours == 8
    assert ctx.warned == [] and any("[defaults] auto_shutdown" in n for n in result.notes)
    assert make_plan([offer()], auto_shutdown="never", ctx=ctx).shutdown_at is None
    # --max-cost alone sets its own deadline: the default does not override it.
    capped = make_plan([offer()], max_cost="10", ctx=ctx)
    assert capped.hours_basis == "max_cost"
