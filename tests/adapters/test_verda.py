"""Verda adapter, contract-tested: respx answers at the HTTP transport (the
OAuth2 token endpoint included) with the SDK and gpuhunt bodies in
tests/fixtures/verda, and flows run through the real driver (retries, auth).
No OpenAPI document exists for Verda: request bodies are checked against the
bodies the official Python SDK builds."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from gpucloud._http import DEFAULT_POLICY, AsyncSession, Session
from gpucloud.adapters.base import OfferQuery
from gpucloud.adapters.verda import VerdaProvider
from gpucloud.catalog import InstanceType, ProviderCatalog, load_catalogs
from gpucloud.credentials import Credential
from gpucloud.errors import (
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    ConflictError,
    CredentialsError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
    SpecError,
)
from gpucloud.models import Instance, InstanceSpec, InstanceStatus, Offer
from gpucloud.tokens import TOKEN_REQUEST_EXTENSION

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "verda"
API = "https://api.verda.com/v1"
CLIENT_ID = "client-id"
CLIENT_SECRET = "client-secret"
INSTANCE_ID = "deadc0de-a5d2-4972-ae4e-d429115d055b"
KEY_ID = "12345dc1-a5d2-4972-ae4e-d429115d055b"
PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T"
              " me@laptop")
SSH_KEYS = [{"id": KEY_ID, "name": "laptop", "key": PUBLIC_KEY.rsplit(" ", 1)[0] + " old-comment"}]


def body(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def instance_body(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(body("get_instance_200_sdk_fixture"))
    raw.update(changes)
    return raw


def reply(status: int = 200, payload: Any = None, *, text: str | None = None,
          headers: dict[str, str] | None = None) -> Any:
    """A factory, so that a route answering several times never reuses a Response."""
    def build(request: httpx.Request) -> httpx.Response:
        if text is not None:
            return httpx.Response(status, text=text, headers=headers)
        if payload is None:
            return httpx.Response(status, headers=headers)
        return httpx.Response(status, json=payload, headers=headers)
    return build


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


@pytest.fixture
def api():
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as router:
        yield FakeVerda(router)


@pytest.fixture
def provider() -> VerdaProvider:
    return VerdaProvider(load_catalogs()["verda"],
                         Credential("verda", SecretStr(CLIENT_SECRET), "test", client_id=CLIENT_ID))


@pytest.fixture
def run(provider):
    session = Session(provider, sleep=lambda s: None)
    yield session.run
    session.close()


def make_spec(**changes: Any) -> InstanceSpec:
    offer = Offer(provider="verda", instance_type="1V100.6V", region="FIN-01", gpu="V100",
                  gpu_count=1, price_per_hour=Decimal("0.89"), source="live", available=True)
    fields: dict[str, Any] = {
        "offer": offer, "launch_id": "gc-0123456789", "name": "gpucloud-v100-gc-0123456789",
        "image": "ubuntu-24.04-cuda-12.8-open-docker", "ssh_public_key": PUBLIC_KEY,
        "ssh_key_name": "gpucloud-3f2a", "disk_gb": 50}
    fields.update(changes)
    return InstanceSpec(**fields)


def launch_routes(api: FakeVerda, *answers: Any) -> tuple[respx.Route, respx.Route]:
    api.on("GET", "/sshkeys", reply(200, SSH_KEYS))
    launch = api.on("POST", "/instances", *(answers or (reply(202, text=INSTANCE_ID),)))
    get = api.on("GET", f"/instances/{INSTANCE_ID}", reply(200, body("get_instance_200_sdk_fixture")))
    return launch, get


# -- the token ---------------------------------------------------------------------


def test_token_request_bodies_are_exactly_the_sdks(api, run, provider):
    route = api.on("GET", "/instances", reply(200, []))
    run(provider.list_instances())
    expected = body("oauth2_token_request_client_credentials")
    expected.update(client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
    assert api.grants == [expected]
    route.side_effect = None
    route.mock(side_effect=[httpx.Response(401, json=error("unauthorized_request", "expired")),
                            httpx.Response(200, json=[])])
    run(provider.list_instances())
    refresh = body("oauth2_token_request_refresh_token")
    refresh.update(refresh_token="verda-refresh-1")
    assert api.grants[1] == refresh and list(api.grants[1]) == list(refresh)


def test_api_requests_carry_the_access_token(api, run, provider):
    route = api.on("GET", "/instances", reply(200, []))
    run(provider.list_instances())
    request = route.calls.last.request
    assert request.headers["Authorization"] == "Bearer verda-access-1"
    assert request.headers["Accept"] == "application/json"
    assert request.url == f"{API}/instances"


def test_sessions_of_one_provider_share_one_token(api, provider):
    api.on("GET", "/instances", reply(200, []))
    for _ in range(2):
        session = Session(provider, sleep=lambda s: None)
        session.run(provider.list_instances())
        session.close()
    assert len(api.grants) == 1
    assert provider.auth() is provider.auth()


def test_token_expiry_is_exposed(api, run, provider):
    assert provider.token_expires_at is None
    api.on("GET", "/locations", reply(200, body("list_locations_200")))
    before = datetime.now(timezone.utc).timestamp()
    run(provider.verify())
    assert before + 3600 - 5 <= provider.token_expires_at <= before + 3600 + 5


def test_no_credential_means_no_auth(api):
    assert VerdaProvider(load_catalogs()["verda"]).auth() is None


def test_a_credential_without_client_id_is_a_credentials_error():
    provider = VerdaProvider(load_catalogs()["verda"],
                             Credential("verda", SecretStr(CLIENT_SECRET), "test"))
    with pytest.raises(CredentialsError) as info:
        provider.auth()
    assert "GPUCLOUD_VERDA_CLIENT_ID" in info.value.hint


def test_401_refreshes_once_then_retries(api, run, provider):
    route = api.on("GET", f"/instances/{INSTANCE_ID}",
                   reply(401, error("unauthorized_request", "Invalid access token")),
                   reply(200, body("get_instance_200_sdk_fixture")))
    assert run(provider.get(INSTANCE_ID)).id == INSTANCE_ID
    assert [g["grant_type"] for g in api.grants] == ["client_credentials", "refresh_token"]
    assert [c.request.headers["Authorization"] for c in route.calls] == [
        "Bearer verda-access-1", "Bearer verda-access-2"]


def test_401_twice_is_an_authentication_error_without_a_loop(api, run, provider):
    route = api.on("GET", "/instances", reply(401, error("unauthorized_request", "Nope")))
    with pytest.raises(AuthenticationError) as info:
        run(provider.list_instances())
    assert route.call_count == 2 and len(api.grants) == 2
    assert info.value.provider_code == "unauthorized_request"


def test_refused_refresh_falls_back_to_client_credentials(api, run, provider):
    route = api.on("GET", "/instances", reply(401, error("unauthorized_request", "expired")),
                   reply(200, []))
    api.token_answers = [reply(200, {"access_token": "verda-access-1",
                                     "refresh_token": "verda-refresh-1", "expires_in": 3600}),
                         reply(400, error("invalid_request", "Invalid refresh token"))]
    run(provider.list_instances())
    assert [g["grant_type"] for g in api.grants] == [
        "client_credentials", "refresh_token", "client_credentials"]
    assert route.calls.last.request.headers["Authorization"] == "Bearer verda-access-3"


def test_wrong_client_secret_is_an_authentication_error(api, run, provider):
    api.token_answers = [reply(401, error("unauthorized_request", "Invalid client credentials"))]
    route = api.on("GET", "/locations", reply(200, []))
    with pytest.raises(AuthenticationError) as info:
        run(provider.verify())
    assert route.call_count == 0
    assert "Invalid client credentials" in str(info.value)
    assert "gpucloud providers" in info.value.hint


def test_a_token_reply_without_access_token_is_a_validation_error(api, run, provider):
    api.token_answers = [reply(200, {"token_type": "Bearer", "refresh_token": "verda-refresh-x"})]
    api.on("GET", "/instances", reply(200, []))
    with pytest.raises(APIResponseValidationError) as info:
        run(provider.list_instances())
    assert "verda-refresh-x" not in str(info.value)


# -- offers ------------------------------------------------------------------------


def offer_routes(api: FakeVerda) -> tuple[respx.Route, respx.Route]:
    types = api.on("GET", "/instance-types", reply(200, body("list_instance_types_200")))
    avail = api.on("GET", "/instance-availability",
                   reply(200, body("list_instance_availability_200")))
    return types, avail


def by_key(offers: list[Offer]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in offers}


def test_offers_join_prices_and_availability(api, run, provider):
    types, avail = offer_routes(api)
    offers = by_key(run(provider.offers(OfferQuery())))
    a6000 = offers[("2A6000.20V", "FIN-01")]
    assert a6000.model_dump() == {
        "provider": "verda", "instance_type": "2A6000.20V", "region": "FIN-01",
        "gpu": "RTX-A6000", "gpu_count": 2, "gpu_memory_gb": 48, "vcpus": 20, "memory_gb": 120,
        "disk_gb": None, "price_per_hour": Decimal("1.98"), "spot": False, "available": True,
        "source": "live", "simulated": False, "disk_price_per_gb_month": None, "as_of": None,
        "offer_id": None,
    }
    v100 = offers[("1V100.6V", "FIN-01")]
    assert isinstance(v100.price_per_hour, Decimal) and str(v100.price_per_hour) == "0.89"
    assert v100.disk_gb == 225 and v100.gpu == "V100" and v100.gpu_memory_gb == 16
    assert types.calls.last.request.url.params["currency"] == "usd"
    params = avail.calls.last.request.url.params
    assert params["is_spot"] == "false" and params["isSpot"] == "false"


def test_offers_skip_cpu_types_and_types_sold_nowhere(api, run, provider):
    offer_routes(api)
    offers = run(provider.offers(OfferQuery()))
    assert all(o.gpu_count > 0 for o in offers)
    # 1H100.80S.30V is neither available anywhere nor in the bundled catalog.
    assert {o.instance_type for o in offers} == {"2A6000.20V", "1V100.6V"}


def test_catalog_locations_without_capacity_are_unavailable_offers(api):
    catalog = ProviderCatalog(
        name="verda", display_name="Verda", api_base=API, auth="oauth2",
        instance_types=(
            InstanceType(name="1H100.80S.30V", gpu="H100", gpu_count=1,
                         regions=("FIN-02", "FIN-03"), price=Decimal("3.95"),
                         spot_price=Decimal("1.70")),
            InstanceType(name="1V100.6V", gpu="V100", gpu_count=1, regions=("FIN-01", "FIN-03"),
                         price=Decimal("0.89")),
        ))
    provider = VerdaProvider(catalog, Credential("verda", SecretStr(CLIENT_SECRET), "test",
                                                 client_id=CLIENT_ID))
    offer_routes(api)
    session = Session(provider, sleep=lambda s: None)
    offers = by_key(session.run(provider.offers(OfferQuery())))
    assert {k: o.available for k, o in offers.items()} == {
        ("2A6000.20V", "FIN-01"): True, ("1V100.6V", "FIN-01"): True,
        ("1V100.6V", "FIN-03"): False, ("1H100.80S.30V", "FIN-02"): False,
        ("1H100.80S.30V", "FIN-03"): False}
    h100 = offers[("1H100.80S.30V", "FIN-02")]
    assert h100.gpu == "H100" and h100.price_per_hour == Decimal("3.95") and h100.vcpus == 30
    # Spot: the catalog has no spot price for the V100, so FIN-03 is not offered.
    spot = by_key(session.run(provider.offers(OfferQuery(spot=True))))
    assert ("1V100.6V", "FIN-03") not in spot and ("1H100.80S.30V", "FIN-03") in spot
    session.close()


def test_spot_offers_use_spot_prices_and_spot_availability(api, run, provider):
    _, avail = offer_routes(api)
    offers = by_key(run(provider.offers(OfferQuery(spot=True))))
    assert offers[("1V100.6V", "FIN-01")].price_per_hour == Decimal("0.25")
    assert offers[("2A6000.20V", "FIN-01")].price_per_hour == Decimal("0.70")
    assert all(o.spot for o in offers.values())
    assert avail.calls.last.request.url.params["is_spot"] == "true"


@pytest.mark.parametrize("query,expected", [
    (OfferQuery(gpu="V100"), {("1V100.6V", "FIN-01")}),
    (OfferQuery(count=2), {("2A6000.20V", "FIN-01")}),
    (OfferQuery(gpu="V100", count=2), set()),
    (OfferQuery(region="ICE-01"), set()),
    (OfferQuery(gpu="RTX-A6000", region="FIN-01"), {("2A6000.20V", "FIN-01")}),
])
def test_offers_filter(api, run, provider, query, expected):
    offer_routes(api)
    assert set(by_key(run(provider.offers(query)))) == expected


@pytest.mark.parametrize("description,model,memory,gpu", [
    ("1x H100 SXM5 80GB", "H100", 80, "H100"),
    ("8x A100 SXM4 80GB", "A100", 640, "A100-80GB"),
    ("", "A100", 80, "A100-80GB"),  # model plus memory, not the bare 40 GB "A100"
    ("1x RTX PRO 6000 96GB", "RTX PRO 6000", 96, "RTX-PRO-6000"),
    ("1x Brand New X9", "X9", 99, "1x Brand New X9"),  # unknown: kept raw
])
def test_offers_normalise_gpu_names(api, run, provider, description, model, memory, gpu):
    item = copy.deepcopy(body("list_instance_types_200")[0])
    count = 8 if description.startswith("8x") else 1
    item["gpu"] = {"description": description, "number_of_gpus": count}
    item["gpu_memory"] = {"description": "", "size_in_gigabytes": memory}
    item["model"] = model
    api.on("GET", "/instance-types", reply(200, [item]))
    api.on("GET", "/instance-availability",
           reply(200, [{"location_code": "FIN-01", "availabilities": [item["instance_type"]]}]))
    [offer] = run(provider.offers(OfferQuery()))
    assert offer.gpu == gpu


@pytest.mark.parametrize("mutate", [
    lambda t: t[0].update(price_per_hour="three"),
    lambda t: t[0]["gpu"].update(number_of_gpus="1"),
    lambda t: t[0].pop("instance_type"),
    lambda t: t.append("not an object"),
])
def test_malformed_instance_types_raise_validation_error(api, run, provider, mutate):
    types = body("list_instance_types_200")
    mutate(types)
    api.on("GET", "/instance-types", reply(200, types))
    api.on("GET", "/instance-availability", reply(200, body("list_instance_availability_200")))
    with pytest.raises(APIResponseValidationError):
        run(provider.offers(OfferQuery()))


def test_malformed_availability_raises_validation_error(api, run, provider):
    api.on("GET", "/instance-types", reply(200, body("list_instance_types_200")))
    api.on("GET", "/instance-availability", reply(200, [{"availabilities": []}]))
    with pytest.raises(APIResponseValidationError):
        run(provider.offers(OfferQuery()))


# -- create ------------------------------------------------------------------------


def test_create_sends_the_sdk_body_and_reads_the_plain_text_id(api, run, provider):
    launch, get = launch_routes(api)
    instance = run(provider.create(make_spec(
        shutdown_at=datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc))))
    assert isinstance(instance, Instance) and instance.id == INSTANCE_ID
    assert get.call_count == 1
    sent = json.loads(launch.calls.last.request.content)
    sdk = body("create_instance_request_sdk")
    assert list(sent) == list(sdk)  # the same fields in the same order
    assert sent == {**sdk, "hostname": "gpucloud-v100-gc-0123456789",
                    "description": "gpucloud launch_id=gc-0123456789; "
                                   "shutdown_at=2026-12-01T12:00:00Z",
                    "os_volume": {"name": "gpucloud-v100-gc-0123456789-os", "size": 50}}
    assert launch.calls.last.request.headers["Authorization"] == "Bearer verda-access-1"


def test_create_tolerates_a_json_string_id(api, run, provider):
    launch_routes(api, reply(201, INSTANCE_ID))
    assert run(provider.create(make_spec())).id == INSTANCE_ID


def test_create_spot_without_disk(api, run, provider):
    launch, _ = launch_routes(api)
    spec = make_spec(disk_gb=None)
    spec = spec.model_copy(update={"offer": spec.offer.model_copy(update={"spot": True})})
    run(provider.create(spec))
    sent = json.loads(launch.calls.last.request.content)
    assert sent["is_spot"] is True and sent["os_volume"] is None


def test_create_reuses_a_registered_key_with_the_same_key_text(api, run, provider):
    launch, _ = launch_routes(api)
    register = api.on("POST", "/sshkeys", reply(201, text="never"))
    run(provider.create(make_spec()))
    assert register.call_count == 0
    assert json.loads(launch.calls.last.request.content)["ssh_key_ids"] == [KEY_ID]


def test_create_registers_a_new_public_key(api, run, provider):
    other = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 other@host"
    api.on("GET", "/sshkeys", reply(200, SSH_KEYS))
    register = api.on("POST", "/sshkeys", reply(201, text="new-key-id\n"))
    launch = api.on("POST", "/instances", reply(202, text=INSTANCE_ID))
    api.on("GET", f"/instances/{INSTANCE_ID}", reply(200, body("get_instance_200_sdk_fixture")))
    run(provider.create(make_spec(ssh_public_key=other, ssh_key_name="gpucloud-abc")))
    assert json.loads(register.calls.last.request.content) == {"name": "gpucloud-abc",
                                                               "key": other}
    assert json.loads(launch.calls.last.request.content)["ssh_key_ids"] == ["new-key-id"]


def test_create_with_a_registered_key_name(api, run, provider):
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(ssh_public_key=None, ssh_key_name="laptop")))
    assert json.loads(launch.calls.last.request.content)["ssh_key_ids"] == [KEY_ID]


def test_create_with_an_unknown_key_name_fails_before_launch(api, run, provider):
    launch, _ = launch_routes(api)
    with pytest.raises(ConfigurationError):
        run(provider.create(make_spec(ssh_public_key=None, ssh_key_name="nope")))
    assert launch.call_count == 0


@pytest.mark.parametrize("changes,error", [
    ({"ssh_public_key": None, "ssh_key_name": None}, ConfigurationError),
    ({"disk_gb": 20}, SpecError),
    ({"image": None}, SpecError),
])
def test_create_refuses_locally_before_any_request(api, run, provider, changes, error):
    launch_routes(api)
    with pytest.raises(error):
        run(provider.create(make_spec(**changes)))
    assert api.requests == [] and api.grants == []


@pytest.mark.parametrize("name,host", [
    ("My Box_1!", "my-box-1"),
    ("--A100 80GB--", "a100-80gb"),
    ("x" * 80, "x" * 60),
    ("!!!", "gpucloud-gc-0123456789"),
])
def test_create_derives_a_valid_hostname(api, run, provider, name, host):
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(name=name)))
    assert json.loads(launch.calls.last.request.content)["hostname"] == host


def test_create_reports_the_machine_even_if_the_read_back_fails(api, run, provider):
    api.on("GET", "/sshkeys", reply(200, SSH_KEYS))
    api.on("POST", "/instances", reply(202, text=INSTANCE_ID))
    api.on("GET", f"/instances/{INSTANCE_ID}", reply(404, error("not_found", "Not found")))
    instance = run(provider.create(make_spec()))
    assert instance.id == INSTANCE_ID and instance.status is InstanceStatus.PENDING
    assert instance.launch_id == "gc-0123456789" and instance.region == "FIN-01"
    assert instance.price_per_hour == Decimal("0.89")


@pytest.mark.parametrize("reply_", [reply(202, text=""), reply(202, text="two words"),
                                    reply(202, {"no": "id"})])
def test_create_rejects_a_reply_without_an_id(api, run, provider, reply_):
    launch_routes(api, reply_)
    with pytest.raises(APIResponseValidationError):
        run(provider.create(make_spec()))


def test_create_500_is_sent_once(api, run, provider):
    launch, get = launch_routes(api, reply(500, error("server_error", "Something broke")))
    with pytest.raises(InternalServerError):
        run(provider.create(make_spec()))
    assert launch.call_count == 1 and get.call_count == 0


def test_create_read_timeout_is_sent_once(api, run, provider):
    launch, _ = launch_routes(api, httpx.ReadTimeout("slow"))
    with pytest.raises(APITimeoutError) as info:
        run(provider.create(make_spec()))
    assert launch.call_count == 1 and info.value.sent


# -- list, get, delete -----------------------------------------------------------


def test_list_maps_the_sdk_instance(api, run, provider):
    api.on("GET", "/instances", reply(200, body("list_instances_200_sdk_fixture")))
    [instance] = run(provider.list_instances())
    assert instance.model_dump(exclude={"ref"}) == {
        "provider": "verda", "id": INSTANCE_ID, "name": "I'll be your host for today",
        "status": InstanceStatus.RUNNING, "provider_status": "running",
        "gpu": "super-duper-gpu", "gpu_count": 1, "instance_type": "1V100.6V",
        "region": "FIN-01", "price_per_hour": Decimal("0.6"), "ip": "1.2.3.4",
        "created_at": None,  # the fixture's placeholder is not a time
        "shutdown_at": None, "launch_id": None, "simulated": False,
    }


def test_list_reads_launch_id_deadline_and_iso_times(api, run, provider):
    raw = instance_body(description="gpucloud launch_id=gc-0123456789; "
                                    "shutdown_at=2026-12-01T12:00:00Z",
                        created_at="2026-11-30T10:00:00.123Z", price_per_hour="0.89",
                        gpu={"description": "1x Tesla V100 16GB", "number_of_gpus": 1},
                        ip=None, status="provisioning")
    api.on("GET", "/instances", reply(200, [raw]))
    [instance] = run(provider.list_instances())
    assert instance.launch_id == "gc-0123456789"
    assert instance.shutdown_at == datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    assert instance.created_at == datetime(2026, 11, 30, 10, 0, 0, 123000, tzinfo=timezone.utc)
    assert instance.price_per_hour == Decimal("0.89") and instance.gpu == "V100"
    assert instance.ip is None and instance.status is InstanceStatus.PENDING


def test_list_rejects_an_instance_without_id(api, run, provider):
    api.on("GET", "/instances", reply(200, [instance_body(id=None)]))
    with pytest.raises(APIResponseValidationError):
        run(provider.list_instances())


STATUSES = {
    "new": InstanceStatus.PENDING, "ordered": InstanceStatus.PENDING,
    "validating": InstanceStatus.PENDING, "pending": InstanceStatus.PENDING,
    "provisioning": InstanceStatus.PENDING, "restoring": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING, "starting_hibernation": InstanceStatus.STOPPING,
    "hibernating": InstanceStatus.STOPPED, "offline": InstanceStatus.STOPPED,
    "deleting": InstanceStatus.TERMINATING, "discontinued": InstanceStatus.TERMINATED,
    "notfound": InstanceStatus.TERMINATED, "error": InstanceStatus.FAILED,
    "no_capacity": InstanceStatus.FAILED, "unknown": InstanceStatus.UNKNOWN,
    "something_new": InstanceStatus.UNKNOWN,
}


@pytest.mark.parametrize("raw,status", sorted(STATUSES.items()))
def test_get_maps_every_status(api, run, provider, raw, status):
    api.on("GET", f"/instances/{INSTANCE_ID}", reply(200, instance_body(status=raw)))
    instance = run(provider.get(INSTANCE_ID))
    assert instance.status is status and instance.provider_status == raw


def test_get_quotes_the_id_into_the_path(api, run, provider):
    route = api.router.route(method="GET", url__startswith=f"{API}/instances/").mock(
        return_value=httpx.Response(404, json=error("not_found", "Invalid instance id")))
    with pytest.raises(NotFoundError):
        run(provider.get("a/b"))
    assert route.calls.last.request.url.raw_path == b"/v1/instances/a%2Fb"


def test_delete_puts_the_delete_action(api, run, provider):
    route = api.on("PUT", "/instances", reply(202))
    assert run(provider.delete(INSTANCE_ID)) is None
    sent = json.loads(route.calls.last.request.content)
    assert sent == {**body("instance_action_request_delete"), "id": [INSTANCE_ID]}


@pytest.mark.parametrize("status", [200, 202, 204])
def test_delete_accepts_success_statuses(api, run, provider, status):
    api.on("PUT", "/instances", reply(status))
    assert run(provider.delete(INSTANCE_ID)) is None


def test_delete_207_success_item(api, run, provider):
    api.on("PUT", "/instances", reply(207, [
        {"action": "delete", "instanceId": INSTANCE_ID, "status": "success"}]))
    assert run(provider.delete(INSTANCE_ID)) is None


@pytest.mark.parametrize("item,cls", [
    ({"error": "Can't discontinue a provisioning instance", "statusCode": 409}, ConflictError),
    ({"error": "Invalid instance id", "statusCode": 400}, NotFoundError),
    ({"error": {"code": "forbidden_action", "message": "Not yours"}, "statusCode": 403},
     PermissionDeniedError),
    ({"status": "error"}, APIStatusError),
])
def test_delete_207_failed_item_raises_the_mapped_error(api, run, provider, item, cls):
    api.on("PUT", "/instances", reply(207, [
        {"action": "delete", "instanceId": "some-other-id", "status": "success"},
        {"action": "delete", "instanceId": INSTANCE_ID, "status": "error", **item}]))
    with pytest.raises(APIStatusError) as info:
        run(provider.delete(INSTANCE_ID))
    assert type(info.value) is cls
    detail = item.get("error")
    expected = detail["message"] if isinstance(detail, dict) else detail or "failed"
    assert expected in str(info.value)


def test_delete_207_without_the_item_is_a_validation_error(api, run, provider):
    api.on("PUT", "/instances", reply(207, [{"instanceId": "other", "status": "success"}]))
    with pytest.raises(APIResponseValidationError):
        run(provider.delete(INSTANCE_ID))


def test_delete_of_a_missing_instance(api, run, provider):
    api.on("PUT", "/instances", reply(400, error("invalid_request", "Invalid instance id")))
    with pytest.raises(NotFoundError):
        run(provider.delete(INSTANCE_ID))


def test_delete_is_retried_after_a_5xx(api, run, provider):
    route = api.on("PUT", "/instances", reply(503, text="busy"), reply(202))
    run(provider.delete(INSTANCE_ID))
    assert route.call_count == 2


def test_verify_gets_a_token_and_reads_locations(api, run, provider):
    route = api.on("GET", "/locations", reply(200, body("list_locations_200")))
    assert run(provider.verify()) is None
    assert route.call_count == 1 and len(api.grants) == 1


def test_async_session(api, provider):
    offer_routes(api)
    api.on("GET", "/instances", reply(200, body("list_instances_200_sdk_fixture")))

    async def main() -> tuple[list[Offer], list[Instance]]:
        session = AsyncSession(provider, sleep=lambda s: asyncio.sleep(0))
        try:
            return (await session.run(provider.offers(OfferQuery(gpu="V100"))),
                    await session.run(provider.list_instances()))
        finally:
            await session.aclose()

    offers, instances = asyncio.run(main())
    assert [o.instance_type for o in offers] == ["1V100.6V"]
    assert [i.id for i in instances] == [INSTANCE_ID]
    assert len(api.grants) == 1


# -- errors ------------------------------------------------------------------------------


ERRORS = [
    (400, error("invalid_request", "Your existence is invalid"), BadRequestError),
    (401, error("unauthorized_request", "Invalid token"), AuthenticationError),
    (403, error("forbidden_action", "Not allowed"), PermissionDeniedError),
    (404, error("not_found", "Not found"), NotFoundError),
    (402, error("insufficient_funds", "Insufficient funds"), QuotaExceededError),
    (400, error("insufficient_funds", "Insufficient funds"), QuotaExceededError),
    (500, error("server_error", "Oops"), InternalServerError),
    (503, error("service_unavailable", "Maintenance"), InternalServerError),
    (400, error("invalid_request", "Instance type 1V100.6V is not available in FIN-01"),
     InsufficientCapacityError),
    (400, error("invalid_request", "Not enough capacity for this instance type"),
     InsufficientCapacityError),
    (400, error("invalid_request", "Operating system is not valid for this instance type"),
     BadRequestError),
    (400, error("invalid_request", "Invalid instance id"), NotFoundError),
    (418, error("brand_new_code", "Something new"), APIStatusError),
]


@pytest.mark.parametrize("status,payload,cls", ERRORS)
def test_error_bodies_map_to_classes(api, run, provider, status, payload, cls):
    launch_routes(api, reply(status, payload))
    with pytest.raises(APIStatusError) as info:
        run(provider.create(make_spec()))
    exc = info.value
    assert type(exc) is cls
    assert exc.status_code == status and exc.provider == "verda"
    assert exc.provider_code == payload["code"]
    assert payload["message"] in str(exc)


def test_the_sdk_error_fixture_is_a_bad_request(api, run, provider):
    api.on("GET", f"/instances/{INSTANCE_ID}",
           reply(400, body("error_invalid_request_400_sdk_fixture")))
    with pytest.raises(BadRequestError) as info:
        run(provider.get(INSTANCE_ID))
    assert "Your existence is invalid" in str(info.value)


def test_insufficient_funds_hints_at_the_balance(api, run, provider):
    launch_routes(api, reply(400, error("insufficient_funds", "Insufficient funds")))
    with pytest.raises(QuotaExceededError) as info:
        run(provider.create(make_spec()))
    assert "balance" in info.value.hint


def test_non_json_502_maps_by_status(api, run, provider):
    route = api.on("GET", f"/instances/{INSTANCE_ID}",
                   reply(502, text="<html><body>502 Bad Gateway</body></html>",
                         headers={"content-type": "text/html"}))
    with pytest.raises(InternalServerError) as info:
        run(provider.get(INSTANCE_ID))
    assert info.value.status_code == 502 and info.value.provider_code is None
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


def test_429_is_retried_then_a_rate_limit_error(api, run, provider):
    route = api.on("GET", "/instances", reply(429, text="", headers={"Retry-After": "2"}))
    with pytest.raises(RateLimitError) as info:
        run(provider.list_instances())
    assert info.value.retry_after == 2.0
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


SECRETS = (CLIENT_SECRET, "verda-access-1", "verda-refresh-1")


@pytest.mark.parametrize("response", [
    reply(400, error("invalid_request", f"bad {CLIENT_SECRET} verda-access-1")),
    reply(401, error("unauthorized_request", "token verda-access-1 / verda-refresh-1")),
    reply(500, text=f"trace: Authorization: Bearer verda-access-1 {CLIENT_SECRET}"),
    reply(200, {"nope": "verda-access-1"}),
    httpx.ReadTimeout("timed out"),
])
def test_secrets_never_appear_in_errors(api, run, provider, response):
    api.on("GET", f"/instances/{INSTANCE_ID}", response)
    with pytest.raises(Exception) as info:
        run(provider.get(INSTANCE_ID))
    exc = info.value
    visible = " ".join([str(exc), repr(exc), str(getattr(exc, "hint", "")), repr(exc.args),
                        repr(vars(exc).get("request")), repr(provider), repr(provider.auth()),
                        repr(provider.auth().source)])
    for secret in SECRETS:
        assert secret not in visible


def test_a_token_endpoint_error_never_shows_the_client_secret(api, run, provider):
    api.token_answers = [reply(400, error("invalid_request",
                                          f"client_secret {CLIENT_SECRET} is wrong"))]
    api.on("GET", "/instances", reply(200, []))
    with pytest.raises(BadRequestError) as info:
        run(provider.list_instances())
    assert CLIENT_SECRET not in str(info.value) and "[secure]" in str(info.value)
