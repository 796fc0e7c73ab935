"""Shadeform's part of the adapter tests (test_shadeform_*.py), on
tests/adapters/support.py: the bodies derived from Shadeform's OpenAPI document
(tests/fixtures/shadeform, SOURCE.txt), every request checked against that
document and for the X-API-KEY header."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from gpucloud.models import InstanceSpec
from gpucloud.providers.shadeform.adapter import ShadeformProvider
from tests.adapters import support
from tests.adapters.support import run_fixture as run, sleeps_fixture as sleeps
from tests.openapi_check import SpecCheckedAPI

_FILES = support.Fixtures("shadeform")
FIXTURES = _FILES.path
SPEC = FIXTURES / "openapi.yaml"
API = "https://api.shadeform.ai/v1"
KEY = "sf-secret-key-123"
INSTANCE_ID = "d290f1ee-6c54-4b01-90e6-d701748f0851"  # the document's example id
KEY_ID = "78a0dd5a-dbb1-4568-b55c-5e7e0a8b0c40"  # the example SSH key's id
EXAMPLE_KEY = _FILES.body("sshkeys_200")["ssh_keys"][0]["public_key"]
NEW_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T"
           " me@laptop")

body = _FILES.body
reply = support.replies()


@pytest.fixture
def api() -> Any:
    """respx under the API base; each request checked against the document, and
    signed with X-API-KEY only (never a bearer header)."""
    checked = type("FakeShadeform", (SpecCheckedAPI,), {"spec": SPEC})
    with respx.mock(base_url=API, assert_all_called=False, assert_all_mocked=True) as router:
        fake = checked(router)
        yield fake
    assert not fake.violations
    for request in fake.requests:
        assert request.headers["X-API-KEY"] == KEY
        assert "Authorization" not in request.headers


provider = support.provider_fixture(lambda: ShadeformProvider(
    load_catalogs()["shadeform"], Credential("shadeform", SecretStr(KEY), "argument")))


def info_body(**changes: Any) -> dict[str, Any]:
    return _FILES.changed("instance_info_200", **changes)


def sent(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)


def make_spec(**changes: Any) -> InstanceSpec:
    return support.instance_spec(
        dict(provider="shadeform", instance_type="hyperstack_A6000", region="canada-1",
             gpu="RTX-A6000", gpu_count=1, price_per_hour=Decimal("2.10")),
        changes, launch_id="gc-3a1a2245a7", name="train-a")


def paths(api: Any) -> list[str]:
    return [f"{r.method} {r.url.path}" for r in api.requests]


__all__ = ["API", "EXAMPLE_KEY", "INSTANCE_ID", "KEY", "KEY_ID", "NEW_KEY", "api", "body",
           "httpx", "info_body", "make_spec", "paths", "provider", "reply", "run", "sent",
           "sleeps"]
