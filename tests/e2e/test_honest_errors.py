"""Errors tell the truth: a provider that cannot be
reached or that rejects its key is reported as what it is, never as "no offer";
falling back to catalog prices is the same in offers, estimate and
create --dry-run, and always visible."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud import APIConnectionError, AuthenticationError, Client
from gpucloud.cli import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lambda"
PUBKEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ1bm55IGtleSBmb3IgZ3B1Y2xvdWQgdGVzdHMhIQ== "
          "me@laptop")


def no_sleep(_: float) -> None:
    return None


@pytest.fixture
def lambda_key(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "fake")
    monkeypatch.setattr(time, "sleep", no_sleep)  # connect retries back off
    ssh = Path.home() / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519.pub").write_text(PUBKEY + "\n")


@pytest.fixture
def unreachable(lambda_key):
    with respx.mock(assert_all_called=False) as router:
        route = router.route(host="cloud.lambda.ai").mock(
            side_effect=httpx.ConnectError("[Errno -3] Temporary failure in name resolution"))
        yield route


@pytest.fixture
def rejected(lambda_key):
    body = json.loads((FIXTURES / "error_invalid_api_key_401.json").read_text())
    with respx.mock(assert_all_called=False) as router:
        yield router.route(host="cloud.lambda.ai").mock(return_value=httpx.Response(401, json=body))


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_create_with_no_network_is_a_connection_error_not_no_offer(unreachable):
    result = cli("create", "--gpu", "h100", "--count", "8", "--yes")
    assert result.exit_code == 10, result.output
    assert "lambda" in result.stderr and "connection" in result.stderr
    assert "no offer" not in result.stderr
    assert unreachable.called
    as_json = json.loads(cli("create", "--gpu", "h100", "--count", "8", "--yes", "--json").stdout)
    assert as_json["error"]["code"] == "connection_error"
    assert as_json["error"]["exit_code"] == 10 and as_json["error"]["hint"]


def test_create_with_a_rejected_key_is_exit_4(rejected):
    result = cli("create", "--gpu", "h100", "--count", "8", "--yes")
    assert result.exit_code == 4, result.output
    assert "lambda" in result.stderr and "no offer" not in result.stderr


def test_sdk_raises_on_a_rejected_key_instead_of_catalog_prices(rejected):
    with pytest.raises(AuthenticationError):
        Client(providers=["lambda"], sleep=no_sleep).offers(gpu="h100", count=8)
    with pytest.raises(AuthenticationError):
        Client(providers=["lambda"], sleep=no_sleep).estimate(gpu="h100", count=8)


def test_a_rejected_key_among_several_providers_is_named_not_replaced(rejected):
    client = Client(providers=["lambda", "sandbox"], sleep=no_sleep)
    offers = client.offers(gpu="h100", count=8)
    assert offers and {o.provider for o in offers} == {"sandbox"}
    assert any(w.startswith("lambda: credentials rejected") for w in client.warnings)
    result = cli("offers", "--gpu", "h100", "--count", "8", "--provider", "lambda")
    assert result.exit_code == 4


def test_catalog_fallback_is_the_same_and_visible_everywhere(unreachable):
    common = ("--gpu", "h100", "--count", "8", "--provider", "lambda")
    offers = json.loads(cli("offers", *common, "--json").stdout)
    estimate = json.loads(cli("estimate", *common, "--json").stdout)
    plan = json.loads(cli("create", *common, "--dry-run", "--json").stdout)
    for doc in (offers, estimate, plan):
        assert any(w.startswith("lambda: live prices unavailable") for w in doc["warnings"]), doc
    cheapest = offers["offers"][0]
    assert cheapest["source"] == "catalog"
    assert estimate["offer"]["source"] == "catalog"
    assert plan["plan"]["offer"]["source"] == "catalog"
    assert estimate["offer"]["price_per_hour"] == plan["plan"]["offer"]["price_per_hour"] \
        == cheapest["price_per_hour"]
    for args in (("offers", *common), ("estimate", *common), ("create", *common, "--dry-run")):
        result = cli(*args)
        assert result.exit_code == 0, result.output
        assert "warning: lambda: live prices unavailable" in result.stderr


def test_create_never_launches_a_catalog_row(unreachable):
    client = Client(providers=["lambda"], sleep=no_sleep)
    plan = client.plan(gpu="h100", count=8)
    assert plan.offer.source == "catalog"
    with pytest.raises(APIConnectionError) as err:
        client.create(gpu="h100", count=8, plan=plan)
    assert err.value.provider == "lambda"
    assert not [r for r in unreachable.calls if r.request.url.path.endswith("/launch")]


def test_a_provider_missing_from_the_catalog_is_named():
    client = Client()
    offers = client.offers(gpu="h100", count=7)  # only RunPod lists 7x H100
    assert {o.provider for o in offers} == {"runpod"}
    named = {w.split(":")[0] for w in client.warnings}
    assert named == {"fluidstack", "hyperstack", "lambda", "shadeform", "vastai", "verda"}
    assert all("bundled catalog" in w for w in client.warnings)
    result = cli("offers", "--gpu", "h100", "--count", "7")
    # The CLI says them in one line (the SDK and --json keep one warning each).
    assert result.stderr.count("bundled catalog") == 1
    assert "no 7x H100 in the bundled catalog of fluidstack, hyperstack, lambda, shadeform, " \
        "vastai, verda; add credentials " \
        "for live offers" in result.stderr
