"""Verda's part of the adapter tests (test_verda_*.py), on tests/adapters/support.py:
the SDK and gpuhunt bodies in tests/fixtures/verda, and respx answers for the
OAuth2 token endpoint too. No OpenAPI document exists for Verda: request
bodies are checked against the bodies the official Python SDK builds, and the
driver's pauses are not recorded.

The fixtures api, provider and run are defined as api_fixture, provider_fixture
and run_fixture, so that importing them into a test module shadows no test
argument."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from gpucloud.transport.http import Session
from gpucloud.providers.verda import VerdaProvider
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from gpucloud.models import InstanceSpec, Offer
from gpucloud.transport.tokens import TOKEN_REQUEST_EXTENSION
from tests.adapters import support

_FILES = support.Fixtures("verda")
FIXTURES = _FILES.path
API = "https://api.verda.com/v1"
CLIENT_ID = "client-id"
CLIENT_SECRET = "client-secret"
INSTANCE_ID = "deadc0de-a5d2-4972-ae4e-d429115d055b"
KEY_ID = "12345dc1-a5d2-4972-ae4e-d429115d055b"
PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T"
              " me@laptop")
SSH_KEYS = [{"id": KEY_ID, "name": "laptop", "key": PUBLIC_KEY.rsplit(" ", 1)[0] + " old-comment"}]


body = _FILES.body
reply = support.replies()
provider_fixture = support.provider_fixture(
    lambda: VerdaProvider(load_catalogs()["verda"], Credential(
        "verda", SecretStr(CLIENT_SECRET), "test", client_id=CLIENT_ID)))


def instance_body(**changes: Any) -> dict[str, Any]:
    return _FILES.changed("get_instance_200_sdk_fixture", **changes)


def error(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}


class FakeVerda:
    """respx routes for the API and the token endpoint; records every request."""

    def __init__(self, router: respx.MockRouter) -> None:
        self.router = router
        self.requests: list[httpx.Request] = []
        self.grants: list[dict[str, Any]] = []
        self.token_answers: list[Any] = []
        # The SDK fixture's shape, with values that cannot be mistaken for words.
        router.post(f"{API}/oauth2/token").mock(side_effect=self._token)

    def _token(self, request: httpx.Request) -> httpx.Response:
        assert request.extensions.get(TOKEN_REQUEST_EXTENSION) is True
        assert "authorization" not in request.headers
        assert request.headers["content-type"] == "application/json"
        self.grants.append(json.loads(request.content))
        if self.token_answers:
            return self.token_answers.pop(0)(request)
        n = len(self.grants)
        token = body("oauth2_token_200_sdk_fixture")
        token.update(access_token=f"verda-access-{n}", refresh_token=f"verda-refresh-{n}")
        return httpx.Response(200, json=token)

    def on(self, method: str, path: str, *answers: Any) -> respx.Route:
        queue = list(answers)

        def handler(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
            if isinstance(answer, Exception):
                raise answer
            return answer(request)

        return self.router.route(method=method, url=API + path).mock(side_effect=handler)


@pytest.fixture(name="api")
def api_fixture():
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as router:
        yield FakeVerda(router)


@pytest.fixture(name="run")
def run_fixture(provider):
    session = Session(provider, sleep=lambda s: None)
    yield session.run
    session.close()


def make_spec(**changes: Any) -> InstanceSpec:
    return support.instance_spec(
        dict(provider="verda", instance_type="1V100.6V", region="FIN-01", gpu="V100",
             gpu_count=1, price_per_hour=Decimal("0.89")),
        changes, launch_id="gc-0123456789", name="gpucloud-v100-gc-0123456789",
        image="ubuntu-24.04-cuda-12.8-open-docker", ssh_public_key=PUBLIC_KEY,
        ssh_key_name="gpucloud-3f2a", disk_gb=50)


def launch_routes(api: FakeVerda, *answers: Any) -> tuple[respx.Route, respx.Route]:
    api.on("GET", "/sshkeys", reply(200, SSH_KEYS))
    launch = api.on("POST", "/instances", *(answers or (reply(202, text=INSTANCE_ID),)))
    get = api.on("GET", f"/instances/{INSTANCE_ID}",
                 reply(200, body("get_instance_200_sdk_fixture")))
    return launch, get


def offer_routes(api: FakeVerda) -> tuple[respx.Route, respx.Route, respx.Route]:
    """Types, availability and locations (asked for only when a priced type has
    no capacity anywhere and is not in the catalog)."""
    types = api.on("GET", "/instance-types", reply(200, body("list_instance_types_200")))
    avail = api.on("GET", "/instance-availability",
                   reply(200, body("list_instance_availability_200")))
    locations = api.on("GET", "/locations", reply(200, body("list_locations_200")))
    return types, avail, locations


def by_key(offers: list[Offer]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in offers}
