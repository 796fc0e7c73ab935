"""Lambda's part of the adapter tests (test_lambda_*.py), on tests/adapters/support.py:
the recorded/spec bodies in tests/fixtures/lambda, requests checked against the
trimmed official OpenAPI document, the catalog the offers are read with.

The fixtures here (api, provider, sleeps, run) are imported by each test module."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import respx
from pydantic import SecretStr

from gpucloud.providers.lambdalabs.adapter import LambdaProvider
from gpucloud.catalog.bundled import InstanceType, ProviderCatalog
from gpucloud.config.credentials import Credential
from gpucloud.models import InstanceSpec
from tests.adapters import support
from tests.adapters.support import run_fixture as run, sleeps_fixture as sleeps  # noqa: F401

_FILES = support.Fixtures("lambda")
FIXTURES = _FILES.path
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

body = _FILES.body
reply = support.replies()
api = support.checked_api(API, SPEC, KEY)
provider = support.provider_fixture(
    lambda: LambdaProvider(CATALOG, Credential("lambda", SecretStr(KEY), "argument")))


def instance_body(**changes: Any) -> dict[str, Any]:
    return _FILES.changed("get_instance_200", "data", **changes)


def launch_body(request: httpx.Request) -> dict[str, Any]:
    return json.loads(request.content)


def make_spec(**changes: Any) -> InstanceSpec:
    return support.instance_spec(
        dict(provider="lambda", instance_type="gpu_8x_h100_sxm5", region="us-south-2",
             gpu="H100", gpu_count=8, disk_gb=22528, price_per_hour=Decimal("23.92")),
        changes, launch_id="lid-7f3a9c", name="gpucloud-lid-7f3a9c", ssh_key_name="my-key")


def launch_routes(api, *answers: Any) -> tuple[respx.Route, respx.Route]:
    launch = api.on("POST", "/api/v1/instance-operations/launch",
                    *(answers or (reply(200, body("launch_instance_200")),)))
    get = api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(
        tags=[{"key": "gpucloud-launch-id", "value": "lid-7f3a9c"}])))
    return launch, get
