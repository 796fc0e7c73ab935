from datetime import timedelta
from decimal import Decimal

import pytest

from gpucloud.errors import SpecError
from gpucloud.models import Offer
from gpucloud.catalog.pricing import estimate, hours_for_budget, parse_duration, to_decimal


def offer(**kw):
    base = dict(provider="lambda", instance_type="gpu_8x_h100_sxm5", region="us-east-1",
                gpu="H100", gpu_count=8, price_per_hour=Decimal("23.92"), source="live")
    base.update(kw)
    return Offer(**base)


def test_estimate_is_exact_decimal():
    est = estimate(offer(), 72)
    assert est.total == Decimal("1722.24")
    assert isinstance(est.total, Decimal) and est.currency == "USD"
    assert [line.component for line in est.breakdown] == ["GPU instance"]


def test_float_hours_do_not_leak_binary_error():
    est = estimate(offer(price_per_hour=Decimal("0.10")), 0.1)
    assert est.total == Decimal("0.01")
    assert est.hours == Decimal("0.1")


def test_disk_is_added_where_billed_apart():
    est = estimate(offer(disk_price_per_gb_month=Decimal("0.073")), 730, disk_gb=100)
    assert [line.component for line in est.breakdown] == ["GPU instance", "disk (100 GB)"]
    assert est.breakdown[1].total == Decimal("7.30")
    assert est.total == Decimal("17468.90")
    assert any("storage" in n for n in est.notes)


def test_catalog_estimates_say_so():
    est = estimate(offer(source="catalog", as_of="2026-11-30"), 1)
    assert any("2026-11-30" in n for n in est.notes)


@pytest.mark.parametrize("bad", [0, -1, "x"])
def test_bad_hours(bad):
    with pytest.raises(SpecError):
        estimate(offer(), bad)


@pytest.mark.parametrize("text, expected", [
    ("4h", timedelta(hours=4)), ("90m", timedelta(minutes=90)),
    ("1h30m", timedelta(minutes=90)), ("2d", timedelta(days=2)), (3, timedelta(hours=3)),
])
def test_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["", "4x", "-1h", "0h", "h", "3", "2.5"])
def test_bad_durations(bad):
    with pytest.raises(SpecError):
        parse_duration(bad)


def test_budget_hours():
    assert hours_for_budget(Decimal("20"), Decimal("200")) == Decimal("10")
    assert to_decimal("$12.50") == Decimal("12.50")
    with pytest.raises(SpecError):
        to_decimal("NaN")
