"""Vast.ai's part of the adapter tests (test_vastai_*.py), on tests/adapters/support.py:
bodies derived from the official OpenAPI document (tests/fixtures/vastai),
requests checked against the trimmed spec, the offer, instance and page shapes.

The fixtures api, provider, sleeps and run are defined as api_fixture,
provider_fixture, sleeps_fixture and run_fixture, so that importing them into a
test module shadows no test argument."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from typing import Any

import respx
from pydantic import SecretStr

from gpucloud.providers.vastai import VastProvider
from gpucloud.providers.vastai._wire import DEFAULT_DISK_GB
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from gpucloud.models import InstanceSpec
from tests.adapters import support
from tests.adapters.support import run_fixture, sleeps_fixture  # noqa: F401

_FILES = support.Fixtures("vastai")
FIXTURES = _FILES.path
SPEC = FIXTURES / "openapi.json"
API = "https://console.vast.ai"
KEY = "vast-secret-key-123"
ASK = "12345678"
NEW = "1234568"  # create_instance_200's new_contract
SHOWN = "883"  # show_instance_200's id
LIST = "/api/v1/instances/"
KEY_ON_FILE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOnFile me@desk"
NEW_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINewKey me@laptop"


body = _FILES.body
reply = support.replies()
api_fixture = support.checked_api(API, SPEC, KEY)
provider_fixture = support.provider_fixture(
    lambda: VastProvider(load_catalogs()["vastai"], Credential("vastai", SecretStr(KEY), "test")))


def example_offer(**changes: Any) -> dict[str, Any]:
    [offer] = body("search_offers_200_wrapped_list")["offers"]
    offer.update(changes)
    return offer


def show(instance_id: str = SHOWN, **changes: Any) -> dict[str, Any]:
    return _FILES.changed("show_instance_200_from_schema_examples", "instances",
                          id=int(instance_id), **changes)


def page(ids: list[int], token: str | None) -> dict[str, Any]:
    data = body("list_instances_v1_200_from_schema_examples")
    [template] = data["instances"]
    data["instances"] = [dict(copy.deepcopy(template), id=i) for i in ids]
    data["next_token"] = token
    return data


def sent(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)


def make_spec(**changes: Any) -> InstanceSpec:
    return support.instance_spec(
        dict(provider="vastai", instance_type="8x-H100_SXM", region="US", gpu="H100",
             gpu_count=8, disk_gb=DEFAULT_DISK_GB, price_per_hour=Decimal("17.60"),
             disk_price_per_gb_month=Decimal("0.15"), offer_id=ASK),
        changes, launch_id="lid-7f3a9c", name="gpucloud-h100-lid-7f3a9c", image="vastai/pytorch")


def create_routes(api, *answers: Any, shown: dict[str, Any] | None = None):
    put = api.on("PUT", f"/api/v0/asks/{ASK}/",
                 *(answers or (reply(200, body("create_instance_200_from_schema_examples")),)))
    get = api.on("GET", f"/api/v0/instances/{NEW}/", reply(200, shown or show(
        NEW, actual_status="loading", label="gpucloud:lid-7f3a9c gpucloud-h100-lid-7f3a9c")))
    return put, get
