"""Shared test support for the Lambda adapter tests (test_lambda_*.py): respx
answers at the HTTP transport with the recorded/spec bodies in
tests/fixtures/lambda, every request the adapter sends is validated against
the trimmed official OpenAPI document, and flows run through the real driver
(retries, rate limits, auth).

The fixtures here (api, provider, sleeps, run) are imported by each test module."""

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
from gpucloud.providers.lambdalabs.adapter import LambdaProvider
from gpucloud.catalog.bundled import InstanceType, ProviderCatalog
from gpucloud.config.credentials import Credential
from gpucloud.models import InstanceSpec, Offer
from tests.openapi_check import SpecCheckedAPI

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lambda"
SPEC = FIXTURES / "openapi.json"
API = "https://cloud.lambda.ai"
KEY = "secret-key-123"
INSTANCE_ID = "0920582c7ff041399e34823a0be62549"
# The first two fields match the "yubikey" entry of list_ssh_keys_200.json; the comment differs.
YUBIKEY = json.loads((FIXTURES / "list_ssh_keys_200.json").read_text())["data"][0]["public_key"]
NEW_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T"
           " me@laptop")

CATALOG = ProviderCatalog(
    name="lambda", display_name="Lambda Cloud", api_base=API,
    instance_types=(
        # us-east-1 is sold but has no capacity in the live fixture.
        InstanceType(name="gpu_8x_h100_sxm5", gpu="H100", gpu_count=8,
                     regions=("us-south-2", "us-east-1"), price=Decimal("23.92"), disk_gb=22528),
        # No live capacity anywhere: only the catalog knows where it is sold.
        InstanceType(name="gpu_1x_gh200", gpu="GH200", gpu_count=1,
                     regions=("us-east-3",), price=Decimal("1.49")),
        InstanceType(name="gpu_1x_a10", gpu="A10", gpu_count=1,
                     regions=("us-west-1",), price=Decimal("0.75")),
        InstanceType(name="cpu_4x_general", gpu="N/A", gpu_count=0,
                     regions=("us-east-1",), price=Decimal("0.20")),
    ),
)


def body(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def instance_body(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(body("get_instance_200"))
    raw["data"].update(changes)
    return raw


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


@pytest.fixture
def api():
    with respx.mock(base_url=API, assert_all_called=False, assert_all_mocked=True) as router:
        fake = FakeAPI(router)
        yield fake
    assert not fake.violations
    for request in fake.requests:
        assert request.headers["Authorization"] == f"Bearer {KEY}"


@pytest.fixture
def provider() -> LambdaProvider:
    return LambdaProvider(CATALOG, Credential("lambda", SecretStr(KEY), "argument"))


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def run(provider, sleeps):
    session = Session(provider, sleep=sleeps.append)
    yield session.run
    session.close()


def launch_body(request: httpx.Request) -> dict[str, Any]:
    return json.loads(request.content)


def make_spec(**changes: Any) -> InstanceSpec:
    offer = Offer(provider="lambda", instance_type="gpu_8x_h100_sxm5", region="us-south-2",
                  gpu="H100", gpu_count=8, disk_gb=22528, price_per_hour=Decimal("23.92"),
                  source="live", available=True)
    fields: dict[str, Any] = dict(offer=offer, launch_id="lid-7f3a9c", name="gpucloud-lid-7f3a9c",
                                  ssh_key_name="my-key")
    fields.update(changes)
    return InstanceSpec(**fields)


def launch_routes(api, *answers: Any) -> tuple[respx.Route, respx.Route]:
    launch = api.on("POST", "/api/v1/instance-operations/launch",
                    *(answers or (reply(200, body("launch_instance_200")),)))
    get = api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(
        tags=[{"key": "gpucloud-launch-id", "value": "lid-7f3a9c"}])))
    return launch, get
