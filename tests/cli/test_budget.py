"""The monthly budget through the CLI (config.toml `[budget] monthly`): refusal
with the figures (exit 7), the 80 % warning in text and JSON, the figures in
a dry run, never blocking offers or estimate; `gpucloud costs` in JSON."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from gpucloud import BudgetExceededError
from gpucloud.catalog import pricing
from gpucloud.safety.budget import check
from gpucloud.config.settings import config_dir, load_config, state_db_path
from gpucloud.models import Offer, Plan
from gpucloud.safety.journal import Journal

SANDBOX_8X_H100 = Decimal("19.92")  # per hour, from the bundled sandbox catalog
CREATE = ["create", "--gpu", "h100", "--count", "8", "--provider", "sandbox"]


def set_budget(text: str) -> None:
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "config.toml").write_text(text)


def cli(*args: str):
    from gpucloud.cli import app

    return CliRunner().invoke(app, list(args))


def test_over_budget_is_refused_with_the_figures_and_creates_nothing():
    set_budget('[budget]\nmonthly = "99"\n')
    first = cli(*CREATE, "--auto-shutdown", "4h", "--yes")  # $79.68 of $99
    assert first.exit_code == 0, first.output
    second = cli(*CREATE, "--auto-shutdown", "1h", "--yes")  # + $19.92 > $99
    assert second.exit_code == 7, second.output
    message = second.stderr
    assert "over the monthly budget $99.00" in message
    assert "committed $79.6" in message and "this request $19.92" in message
    assert "spent $" in message and "hint:" in message
    listed = json.loads(cli("list", "--json").stdout)
    assert len(listed["instances"]) == 1
    print(f"\nrefused: {message.splitlines()[0]}")


def test_eighty_percent_warns_in_text_and_in_json():
    set_budget('[budget]\nmonthly = "99"\n')
    text = cli(*CREATE, "--auto-shutdown", "4h", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "warning: this create brings" in text.stderr and "80.5 %" in text.stderr
    assert "monthly budget $99.00" in text.stdout  # the figures are a note of the plan
    doc = json.loads(cli(*CREATE, "--auto-shutdown", "4h", "--yes", "--json").stdout)
    assert doc["instance"] and any("of the monthly budget" in w for w in doc["warnings"])
    below = cli(*CREATE, "--auto-shutdown", "1h", "--dry-run", "--json")
    assert below.exit_code == 7  # 79.68 committed + 19.92 > 99, also in a dry run
    assert json.loads(below.stdout)["error"]["exit_code"] == 7


def test_under_eighty_percent_is_quiet():
    set_budget('[budget]\nmonthly = "1000"\n')
    result = cli(*CREATE, "--auto-shutdown", "4h", "--dry-run")
    assert result.exit_code == 0 and "warning" not in result.stderr
    assert "this request $79.68" in result.stdout


def test_a_create_without_a_deadline_counts_to_the_end_of_the_month(monkeypatch):
    first_of_december = datetime(2026, 12, 1, tzinfo=timezone.utc)
    monkeypatch.setattr("gpucloud.safety.budget.utcnow", lambda: first_of_december)
    set_budget('[budget]\nmonthly = "5000"\n')
    bounded = cli(*CREATE, "--auto-shutdown", "8h", "--dry-run")
    assert bounded.exit_code == 0, bounded.output
    unbounded = cli(*CREATE, "--dry-run")
    assert unbounded.exit_code == 7
    month = SANDBOX_8X_H100 * 31 * 24
    assert f"this request ${month:,}".replace(",", "") in unbounded.stderr.replace(",", "")


def test_the_budget_never_blocks_offers_or_estimate():
    set_budget('[budget]\nmonthly = "1"\n')
    assert cli("offers", "--gpu", "h100", "--count", "8").exit_code == 0
    assert cli("estimate", "--gpu", "h100", "--count", "8", "--provider", "sandbox").exit_code == 0
    assert cli(*CREATE, "--auto-shutdown", "1h", "--dry-run").exit_code == 7


def test_an_unknown_price_is_refused_with_a_budget_set():
    set_budget('[budget]\nmonthly = "5000"\n')
    offer = Offer(provider="runpod", instance_type="8x H100", region="EU", gpu="H100",
                  gpu_count=8, price_per_hour=Decimal(0), source="live", available=True)
    estimate = pricing.estimate(offer, 4)
    assert estimate.price_per_hour is None
    plan = Plan(offer=offer, estimate=estimate, hours_basis="auto_shutdown",
                shutdown_at=datetime.now(timezone.utc) + timedelta(hours=4),
                total_per_hour=None, total=None)
    warnings: list[str] = []
    ctx = SimpleNamespace(config=load_config(), journal=Journal(state_db_path()),
                          warn=warnings.append)
    with pytest.raises(BudgetExceededError) as info:
        check(ctx, plan)
    assert "cannot keep the monthly budget $5000.00" in str(info.value)
    assert "GPU instance" in str(info.value)


@pytest.mark.parametrize("text, fragment", [
    ('[budget]\nmonthly = "lots"\n', "budget.monthly must be a positive amount"),
    ('[budget]\nmonthly = -5\n', "budget.monthly must be a positive amount"),
    ('[budget]\nmonthly = true\n', "budget.monthly must be a positive amount"),
    ('[budget]\nmontly = "5000"\n', "unknown key budget.montly"),
    ('budget = 5000\n', "[budget] must be a table"),
])
def test_a_bad_budget_is_a_configuration_error(text, fragment):
    set_budget(text)
    result = cli(*CREATE, "--dry-run")
    assert result.exit_code == 3, result.output
    assert fragment in result.stderr and "config.toml" in result.stderr


@pytest.mark.parametrize("value, expected", [('"5000"', "5000"), ("5000", "5000"),
                                             ("2500.50", "2500.50"), ('"$1_000"', "1000")])
def test_budget_amounts(value, expected):
    set_budget(f"[budget]\nmonthly = {value}\n")
    assert load_config().budget_monthly == Decimal(expected)


def test_costs_json_has_money_as_strings_and_the_budget():
    set_budget('[budget]\nmonthly = "5000"\n')
    assert cli(*CREATE, "--auto-shutdown", "2h", "--yes").exit_code == 0
    result = cli("costs", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["budget"] == "5000" and isinstance(doc["spent"], str)
    (line,) = doc["lines"]
    assert line["status"] == "running" and line["price_per_hour"] == "19.92"
    assert Decimal(line["projected"]) > Decimal("39")  # about 2 h left at $19.92
    by = json.loads(cli("costs", "--by", "provider", "--json").stdout)
    assert by["by"] == "provider" and by["lines"][0]["key"] == "sandbox"
    text = cli("costs")
    assert "monthly budget $5,000.00" in text.stdout and "PROJECTED" in text.stdout


def test_costs_rejects_a_bad_month_and_a_bad_grouping():
    bad_month = cli("costs", "--month", "2026-13")
    assert bad_month.exit_code == 2 and "YYYY-MM" in bad_month.stderr
    assert cli("costs", "--by", "region").exit_code == 2
