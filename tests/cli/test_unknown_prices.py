"""Unknown prices are never shown as known: a live price of 0 is "unknown" in the
offers table and marked in its JSON; an offer with an unknown part is never
picked ahead of a fully priced one (estimate, plan); the confirmation prompt
and the plan name the unknown part instead of "-/hour" or "$0.00"."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.catalog import pricing
from gpucloud.cli import app, output
from gpucloud.cli.commands import instance as instance_cmds
from gpucloud.models import Offer
from gpucloud.core.instructions import sort_offers

KEY = "sk-unknown-prices-0123456789"


def itype(name, cents, regions=("us-east-1",)):
    return {"instance_type": {"name": name, "description": "8x H100 (80 GB SXM5)",
                              "gpu_description": "H100 (80 GB SXM5)",
                              "price_cents_per_hour": cents,
                              "specs": {"vcpus": 208, "memory_gib": 1800, "storage_gib": 24780,
                                        "gpus": 8}},
            "regions_with_capacity_available": [
                {"name": r, "description": r} for r in regions]}


@pytest.fixture
def lambda_types(monkeypatch):
    """Lambda sells a machine it gives no price for (0 cents), and a priced one."""
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", KEY)
    types = {"gpu_8x_h100_sxm5": itype("gpu_8x_h100_sxm5", 2392),
             "gpu_8x_h100_promo": itype("gpu_8x_h100_promo", 0)}
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        router.get("https://cloud.lambda.ai/api/v1/instance-types").mock(
            side_effect=lambda request: httpx.Response(200, json={"data": types}))
        yield types


def offer(**kw):
    base = dict(provider="lambda", instance_type="gpu_8x_h100_sxm5", region="us-east-1",
                gpu="H100", gpu_count=8, price_per_hour=Decimal("23.92"), source="live",
                available=True)
    base.update(kw)
    return Offer(**base)


# -- (a) the offers table and its JSON ----------------------------------------------------


def test_the_offers_table_shows_a_live_price_of_zero_as_unknown(lambda_types):
    result = CliRunner().invoke(app, ["offers", "--gpu", "h100", "--count", "8",
                                      "--provider", "lambda"])
    assert result.exit_code == 0, result.output
    assert "$0.00" not in result.stdout
    promo = next(line for line in result.stdout.splitlines() if "gpu_8x_h100_promo" in line)
    assert "unknown" in promo.split()


def test_offers_json_marks_unknown_parts_like_the_estimate(lambda_types):
    result = CliRunner().invoke(app, ["offers", "--gpu", "h100", "--count", "8",
                                      "--provider", "lambda", "--json"])
    assert result.exit_code == 0, result.output
    offers = json.loads(result.stdout)["offers"]
    by_type = {(o["instance_type"], o["region"]): o for o in offers}
    assert by_type["gpu_8x_h100_promo", "us-east-1"]["unknown"] == ["GPU instance"]
    assert by_type["gpu_8x_h100_sxm5", "us-east-1"]["unknown"] == []
    # the price keeps its type (a decimal string); `unknown` says not to trust it
    assert by_type["gpu_8x_h100_promo", "us-east-1"]["price_per_hour"] == "0"


def test_a_known_price_with_an_unknown_disk_says_so_in_the_table():
    vast = offer(provider="vastai", instance_type="8x-H100_SXM", region="US",
                 price_per_hour=Decimal("16"), disk_billed_apart=True, source="catalog")
    row = output.offers_table(output.group_offers([vast])).splitlines()[1]
    assert "$16.00 + disk?" in row


# -- (b) fully priced first, in every command ---------------------------------------------


def test_offers_list_fully_priced_ones_first():
    unknown_disk = offer(provider="vastai", price_per_hour=Decimal("10"), disk_billed_apart=True)
    no_price = offer(price_per_hour=Decimal(0), region="us-west-1")
    priced = offer()
    dearer = offer(price_per_hour=Decimal("30"), region="us-south-1")
    assert sort_offers([no_price, unknown_disk, dearer, priced]) == [
        priced, dearer, unknown_disk, no_price]


def test_estimate_picks_a_fully_priced_offer_over_one_without_a_price(lambda_types):
    estimate = Client(providers=["lambda"]).estimate(gpu="h100", count=8, hours=2)
    assert estimate.offer.instance_type == "gpu_8x_h100_sxm5"
    assert estimate.unknown == () and estimate.total == Decimal("47.84")


def test_estimate_from_the_catalog_picks_a_fully_priced_offer():
    """Without credentials Vast's catalog row is the cheapest, but its disk is unknown."""
    estimate = Client().estimate(gpu="h100", count=8)
    assert estimate.unknown == () and estimate.total is not None


def test_the_plan_and_the_estimate_agree_on_the_offer(lambda_types):
    client = Client(providers=["lambda"])
    assert client.plan(gpu="h100", count=8).offer == client.estimate(gpu="h100", count=8).offer


def test_unknown_parts_are_what_the_estimate_calls_unknown():
    for o in (offer(), offer(price_per_hour=Decimal(0)),
              offer(disk_billed_apart=True, disk_gb=32),
              offer(price_per_hour=Decimal("0.01"), disk_price_per_gb_month=Decimal(1),
                    disk_gb=100)):
        assert pricing.unknown_parts(o, 64) == pricing.estimate(o, 1, disk_gb=64).unknown


# -- (c) the create prompt and the plan -----------------------------------------------------


def test_the_create_prompt_names_the_unknown_part(lambda_types, monkeypatch):
    del lambda_types["gpu_8x_h100_sxm5"]  # only the machine without a price is left
    monkeypatch.setattr(instance_cmds, "_interactive", lambda: True)
    result = CliRunner().invoke(app, ["create", "--gpu", "h100", "--count", "8",
                                      "--provider", "lambda"], input="n\n")
    assert result.exit_code == 8, result.output
    prompt = next(line for line in result.stderr.splitlines() if line.startswith("Create "))
    assert "-/hour" not in prompt and "$0" not in prompt
    assert "unknown" in prompt and "GPU instance" in prompt
    assert "unknown per hour (price unknown for: GPU instance)" in result.stdout


def test_the_plan_shows_unknown_alternatives_as_unknown(lambda_types):
    lambda_types["gpu_8x_h100_sxm5"] = itype("gpu_8x_h100_sxm5", 2392,
                                             ("us-east-1", "us-west-1"))
    plan = Client(providers=["lambda"]).plan(gpu="h100", count=8)
    text = instance_cmds.plan_text(plan)
    assert "$0.00" not in text
    assert "gpu_8x_h100_promo us-east-1  unknown" in text
    assert "up to $23.92/h" in text
