"""Shared test support for the Vast.ai adapter tests (test_vastai_*.py): respx
answers at the HTTP transport with bodies derived from the official OpenAPI
document (tests/fixtures/vastai), every request the adapter sends is validated
against the trimmed spec and checked for the Bearer key, and flows run through
the real driver (retries, pacing, auth).

The fixtures api, provider, sleeps and run are defined as api_fixture,
provider_fixture, sleeps_fixture and run_fixture, so that importing them into a
test module shadows no test argument."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from gpucloud.transport.http import Session
from gpucloud.providers.vastai import VastProvider
from gpucloud.providers.vastai._wire import DEFAULT_DISK_GB
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from gpucloud.models import InstanceSpec, Offer
from tests.openapi_check import SpecCheckedAPI

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "vastai"
SPEC = FIXTURES / "openapi.json"
API = "https://console.vast.ai"
KEY = "vast-secret-key-123"
ASK = "12345678"
NEW = "1234568"  # create_instance_200's new_contract
SHOWN = "883"  # show_instance_200's id
LIST = "/api/v1/instances/"
KEY_ON_FILE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOnFile me@desk"
NEW_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINewKey me@laptop"


def body(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def example_offer(**changes: Any) -> dict[str, Any]:
    [offer] = body("search_offers_200_wrapped_list")["offers"]
    offer.update(changes)
    return offer


def show(instance_id: str = SHOWN, **changes: Any) -> dict[str, Any]:
    data = body("show_instance_200_from_schema_examples")
    data["instances"].update(id=int(instance_id), **changes)
    return data


def page(ids: list[int], token: str | None) -> dict[str, Any]:
    data = body("list_instances_v1_200_from_schema_examples")
    [template] = data["instances"]
    data["instances"] = [dict(copy.deepcopy(template), id=i) for i in ids]
    data["next_token"] = token
    return data


def reply(status: int = 200, payload: Any = None, *, text: str | None = None,
          headers: dict[str, str] | None = None) -> Any:
    """A factory, so that a route answering several times never reuses a Response."""
    def build(request: httpx.Request) -> httpx.Response:
        if text is not None:
            return httpx.Response(status, text=text, headers=headers)
        return httpx.Response(status, json=payload, headers=headers)
    return build


class FakeAPI(SpecCheckedAPI):
    spec = SPEC


@pytest.fixture(name="api")
def api_fixture():
    with respx.mock(base_url=API, assert_all_called=False, assert_all_mocked=True) as router:
        fake = FakeAPI(router)
        yield fake
    assert not fake.violations
    for request in fake.requests:
        assert request.headers["Authorization"] == f"Bearer {KEY}"


@pytest.fixture(name="provider")
def provider_fixture() -> VastProvider:
    return VastProvider(load_catalogs()["vastai"], Credential("vastai", SecretStr(KEY), "test"))


@pytest.fixture(name="sleeps")
def sleeps_fixture() -> list[float]:
    return []


@pytest.fixture(name="run")
def run_fixture(provider, sleeps):
    session = Session(provider, sleep=sleeps.append)
    yield session.run
    session.close()


def sent(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)


def make_spec(**changes: Any) -> InstanceSpec:
    offer = Offer(provider="vastai", instance_type="8x-H100_SXM", region="US",
                  gpu="H100", gpu_count=8, disk_gb=DEFAULT_DISK_GB,
                  price_per_hour=Decimal("17.60"), disk_price_per_gb_month=Decimal("0.15"),
                  source="live", available=True, offer_id=ASK)
    fields: dict[str, Any] = {"offer": offer, "launch_id": "lid-7f3a9c",
                                  "name": "gpucloud-h100-lid-7f3a9c", "image": "vastai/pytorch"}
    fields.update(changes)
    return InstanceSpec(**fields)



def create_routes(api, *answers: Any, shown: dict[str, Any] | None = None):
    put = api.on("PUT", f"/api/v0/asks/{ASK}/",
                 *(answers or (reply(200, body("create_instance_200_from_schema_examples")),)))
    get = api.on("GET", f"/api/v0/instances/{NEW}/", reply(200, shown or show(
        NEW, actual_status="loading", label="gpucloud:lid-7f3a9c gpucloud-h100-lid-7f3a9c")))
    return put, get
