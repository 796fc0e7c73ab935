"""Lambda adapter, contract-tested: respx answers at the HTTP transport with
the recorded/spec bodies in tests/fixtures/lambda, every request the adapter
sends is validated against the trimmed official OpenAPI document, and flows
run through the real driver (retries, rate limits, auth)."""

from __future__ import annotations

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

from gpucloud._http import DEFAULT_POLICY, Session
from gpucloud.adapters.base import OfferQuery
from gpucloud.adapters.lambdalabs import LambdaProvider
from gpucloud.catalog import InstanceType, ProviderCatalog
from gpucloud.credentials import Credential
from gpucloud.errors import (
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
    SpecError,
)
from gpucloud.models import Instance, InstanceSpec, InstanceStatus, Offer
from tests.openapi_check import request_errors, validate_request, validate_response

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


class FakeAPI:
    """respx routes that validate every request against the spec, then answer in turn."""

    def __init__(self, router: respx.MockRouter) -> None:
        self.router = router
        self.requests: list[httpx.Request] = []
        self.violations: list[str] = []

    def on(self, method: str, path: str, *answers: Any) -> respx.Route:
        queue = list(answers)

        def handler(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            errors = request_errors(SPEC, request)
            if errors:
                self.violations.extend(errors)
                raise AssertionError("\n".join(errors))
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
            if isinstance(answer, Exception):
                raise answer
            return answer(request)

        return self.router.route(method=method, path=path).mock(side_effect=handler)


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


# -- the spec checker itself -------------------------------------------------------


def test_checker_accepts_a_valid_launch_request():
    request = httpx.Request(
        "POST", f"{API}/api/v1/instance-operations/launch",
        headers={"Authorization": "Bearer x"},
        json={"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10",
              "ssh_key_names": ["k"]})
    validate_request(SPEC, request)


@pytest.mark.parametrize("case", ["missing region_name", "bad tag key", "unknown region",
                                  "no auth", "unknown path", "wrong method"])
def test_checker_rejects_bad_requests(case):
    launch = {"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10",
              "ssh_key_names": ["k"]}
    method, path = "POST", "/api/v1/instance-operations/launch"
    headers = {"Authorization": "Bearer x"}
    if case == "missing region_name":
        del launch["region_name"]
    elif case == "bad tag key":
        launch["tags"] = [{"key": "Launch_ID", "value": "x"}]
    elif case == "unknown region":
        launch["region_name"] = "mars-north-1"
    elif case == "no auth":
        headers = {}
    elif case == "unknown path":
        path = "/api/v1/instance-operations/launchh"
    elif case == "wrong method":
        method = "PUT"
    request = httpx.Request(method, API + path, headers=headers, json=launch)
    with pytest.raises(AssertionError) as info:
        validate_request(SPEC, request)
    assert path in str(info.value)
    if case == "missing region_name":
        assert "'region_name' is a required property" in str(info.value)


def test_checker_rejects_a_response_off_spec():
    request = httpx.Request("GET", f"{API}/api/v1/instances", headers={"Authorization": "Bearer x"})
    with pytest.raises(AssertionError, match="status"):
        validate_response(SPEC, request, httpx.Response(
            200, json={"data": [{"id": "x", "status": "exploded"}]}, request=request))


@pytest.mark.parametrize("name,method,path,status", [
    ("list_instance_types_200", "GET", "/api/v1/instance-types", 200),
    ("list_instances_200", "GET", "/api/v1/instances", 200),
    ("get_instance_200", "GET", f"/api/v1/instances/{INSTANCE_ID}", 200),
    ("launch_instance_200", "POST", "/api/v1/instance-operations/launch", 200),
    ("terminate_instance_200", "POST", "/api/v1/instance-operations/terminate", 200),
    ("list_ssh_keys_200", "GET", "/api/v1/ssh-keys", 200),
    ("error_insufficient_capacity_400", "POST", "/api/v1/instance-operations/launch", 400),
    ("error_quota_exceeded_400", "POST", "/api/v1/instance-operations/launch", 400),
    ("error_invalid_parameters_400", "POST", "/api/v1/instance-operations/launch", 400),
    ("error_invalid_api_key_401", "GET", "/api/v1/instances", 401),
    ("error_account_inactive_403", "GET", "/api/v1/instances", 403),
    ("error_instance_not_found_404", "GET", f"/api/v1/instances/{INSTANCE_ID}", 404),
])
def test_fixture_bodies_match_the_spec(name, method, path, status):
    request = httpx.Request(method, API + path, headers={"Authorization": "Bearer x"})
    validate_response(SPEC, request, httpx.Response(status, json=body(name), request=request))


# -- offers ----------------------------------------------------------------------


def offers_of(api, run, provider, **query: Any) -> list[Offer]:
    api.on("GET", "/api/v1/instance-types", reply(200, body("list_instance_types_200")))
    return run(provider.offers(OfferQuery(**query)))


def by_key(offers: list[Offer]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in offers}


def test_offers_prices_are_exact_decimals_from_cents(api, run, provider):
    offers = by_key(offers_of(api, run, provider))
    h100 = offers[("gpu_8x_h100_sxm5", "us-west-3")]
    assert isinstance(h100.price_per_hour, Decimal)
    assert h100.price_per_hour == Decimal("23.92")
    assert str(offers[("gpu_1x_a10", "us-east-1")].price_per_hour) == "0.75"
    assert offers[("gpu_8x_b200_sxm6", "us-east-1")].price_per_hour == Decimal("39.92")


def test_offer_fields(api, run, provider):
    offer = by_key(offers_of(api, run, provider))[("gpu_8x_a100_80gb_sxm4", "us-east-1")]
    assert offer.model_dump() == {
        "provider": "lambda", "instance_type": "gpu_8x_a100_80gb_sxm4", "region": "us-east-1",
        "gpu": "A100-80GB", "gpu_count": 8, "gpu_memory_gb": 80, "vcpus": 240,
        "memory_gb": 1800, "disk_gb": 20480, "price_per_hour": Decimal("14.32"), "spot": False,
        "available": True, "source": "live", "simulated": False,
        "disk_price_per_gb_month": None, "as_of": None, "offer_id": None,
    }


def test_offers_availability_live_and_catalog_regions(api, run, provider):
    offers = by_key(offers_of(api, run, provider))
    h100 = {region: o.available for (name, region), o in offers.items()
            if name == "gpu_8x_h100_sxm5"}
    # Live capacity in three regions; the catalog adds us-east-1, sold out now.
    assert h100 == {"us-west-3": True, "us-south-2": True, "us-south-3": True,
                    "us-east-1": False}
    # No capacity anywhere: only the catalog's region, unavailable.
    gh200 = [o for o in offers.values() if o.instance_type == "gpu_1x_gh200"]
    assert [(o.region, o.available) for o in gh200] == [("us-east-3", False)]
    # Neither live capacity nor catalog regions: nothing to offer.
    assert not [o for o in offers.values() if o.instance_type == "gpu_1x_rtx6000"]
    assert all(o.source == "live" and o.spot is False for o in offers.values())


def test_offers_skip_cpu_only_types(api, run, provider):
    offers = offers_of(api, run, provider)
    assert offers
    assert "cpu_4x_general" not in {o.instance_type for o in offers}
    assert all(o.gpu_count > 0 for o in offers)


def test_offers_filter_by_gpu_and_count(api, run, provider):
    offers = offers_of(api, run, provider, gpu="H100", count=8)
    assert {o.instance_type for o in offers} == {"gpu_8x_h100_sxm5"}
    ones = offers_of(api, run, provider, gpu="H100", count=1)
    assert {o.instance_type for o in ones} == {"gpu_1x_h100_sxm5", "gpu_1x_h100_pcie"}
    assert all(o.gpu == "H100" and o.gpu_count == 1 for o in ones)


def test_offers_filter_by_region(api, run, provider):
    offers = offers_of(api, run, provider, region="us-east-1")
    assert offers and {o.region for o in offers} == {"us-east-1"}
    assert ("gpu_8x_h100_sxm5", "us-east-1") in by_key(offers)


@pytest.mark.parametrize("description,gpu", [
    ("A100 (40 GB PCIe)", "A100-40GB"), ("A100 (80 GB SXM4)", "A100-80GB"),
    ("Tesla V100 (16 GB)", "V100"), ("A6000 (48 GB)", "RTX-A6000"), ("GH200 (96 GB)", "GH200"),
])
def test_offers_normalise_gpu_names(api, run, provider, description, gpu):
    offers = offers_of(api, run, provider)
    raw = body("list_instance_types_200")["data"]
    names = {k for k, v in raw.items() if v["instance_type"]["gpu_description"] == description}
    assert {o.gpu for o in offers if o.instance_type in names} <= {gpu}


def test_spot_offers_are_empty_without_a_request(api, run, provider):
    route = api.on("GET", "/api/v1/instance-types", reply(200, body("list_instance_types_200")))
    assert run(provider.offers(OfferQuery(spot=True))) == []
    assert route.call_count == 0


@pytest.mark.parametrize("mutate", [
    lambda d: d["data"]["gpu_1x_a10"]["instance_type"].update(price_cents_per_hour=0.75),
    lambda d: d["data"]["gpu_1x_a10"]["instance_type"].pop("specs"),
    lambda d: d["data"]["gpu_1x_a10"].update(regions_with_capacity_available=[{"x": 1}]),
    lambda d: d.update(data=[]),
    lambda d: d.pop("data"),
])
def test_malformed_instance_types_raise_validation_error(api, run, provider, mutate):
    raw = body("list_instance_types_200")
    mutate(raw)
    api.on("GET", "/api/v1/instance-types", reply(200, raw))
    with pytest.raises(APIResponseValidationError):
        run(provider.offers(OfferQuery()))


def test_non_json_success_body_raises_validation_error(api, run, provider):
    api.on("GET", "/api/v1/instance-types", reply(200, text="<html>ok</html>"))
    with pytest.raises(APIResponseValidationError):
        run(provider.offers(OfferQuery()))


# -- create ------------------------------------------------------------------------


def launch_routes(api, *answers: Any) -> tuple[respx.Route, respx.Route]:
    launch = api.on("POST", "/api/v1/instance-operations/launch",
                    *(answers or (reply(200, body("launch_instance_200")),)))
    get = api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(
        tags=[{"key": "gpucloud-launch-id", "value": "lid-7f3a9c"}])))
    return launch, get


def test_create_sends_exactly_the_spec_body(api, run, provider):
    launch, get = launch_routes(api)
    instance = run(provider.create(make_spec()))
    assert launch.call_count == 1 and get.call_count == 1
    assert launch_body(launch.calls.last.request) == {
        "region_name": "us-south-2",
        "instance_type_name": "gpu_8x_h100_sxm5",
        "ssh_key_names": ["my-key"],
        "name": "gpucloud-lid-7f3a9c",
        "tags": [{"key": "gpucloud-launch-id", "value": "lid-7f3a9c"}],
    }
    assert instance.id == INSTANCE_ID
    assert instance.launch_id == "lid-7f3a9c"
    assert instance.status is InstanceStatus.PENDING
    # Only names registered keys: no key listing or registration.
    assert [r.url.path for r in api.requests] == [
        "/api/v1/instance-operations/launch", f"/api/v1/instances/{INSTANCE_ID}"]


def test_create_with_image_and_deadline(api, run, provider):
    launch, _ = launch_routes(api)
    deadline = datetime(2026, 12, 1, 6, 30, 15, 123456, tzinfo=timezone.utc)
    run(provider.create(make_spec(image="lambda-stack-24-04", shutdown_at=deadline,
                                  name="x" * 80)))
    sent = launch_body(launch.calls.last.request)
    assert sent["image"] == {"family": "lambda-stack-24-04"}
    assert sent["tags"] == [{"key": "gpucloud-launch-id", "value": "lid-7f3a9c"},
                            {"key": "gpucloud-shutdown-at", "value": "2026-12-01T06:30:15Z"}]
    assert sent["name"] == "x" * 64
    assert "quantity" not in sent


def test_create_reuses_a_registered_key_with_the_same_public_key(api, run, provider):
    keys = api.on("GET", "/api/v1/ssh-keys", reply(200, body("list_ssh_keys_200")))
    add = api.on("POST", "/api/v1/ssh-keys", reply(500))
    launch, _ = launch_routes(api)
    public = " ".join(YUBIKEY.split()[:2]) + " someone@else"
    run(provider.create(make_spec(ssh_key_name="gpucloud-abc", ssh_public_key=public)))
    assert keys.call_count == 1 and add.call_count == 0
    assert launch_body(launch.calls.last.request)["ssh_key_names"] == ["yubikey"]


def test_create_registers_a_new_public_key(api, run, provider):
    def added(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        key_id = "ddf9a910ceb744a0bb95242cbba6cb50"
        return httpx.Response(200, json={"data": {"id": key_id, **sent}})

    api.on("GET", "/api/v1/ssh-keys", reply(200, body("list_ssh_keys_200")))
    add = api.on("POST", "/api/v1/ssh-keys", added)
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(ssh_key_name="gpucloud-3f2a", ssh_public_key=NEW_KEY + "\n")))
    assert add.call_count == 1
    assert json.loads(add.calls.last.request.content) == {"name": "gpucloud-3f2a",
                                                          "public_key": NEW_KEY}
    assert launch_body(launch.calls.last.request)["ssh_key_names"] == ["gpucloud-3f2a"]
    assert [r.url.path for r in api.requests][:2] == ["/api/v1/ssh-keys", "/api/v1/ssh-keys"]


def test_create_refuses_a_key_name_taken_by_another_key(api, run, provider):
    api.on("GET", "/api/v1/ssh-keys", reply(200, body("list_ssh_keys_200")))
    add = api.on("POST", "/api/v1/ssh-keys", reply(500))
    launch, _ = launch_routes(api)
    with pytest.raises(ConfigurationError, match="yubikey"):
        run(provider.create(make_spec(ssh_key_name="yubikey", ssh_public_key=NEW_KEY)))
    assert add.call_count == 0 and launch.call_count == 0


def test_create_without_any_ssh_key_fails_before_sending(api, run, provider):
    launch, _ = launch_routes(api)
    with pytest.raises(ConfigurationError) as info:
        run(provider.create(make_spec(ssh_key_name=None)))
    assert str(info.value) == "lambda needs an SSH key to launch"
    assert "--ssh-key" in info.value.hint and "id_ed25519.pub" in info.value.hint
    assert api.requests == []


def test_create_refuses_a_disk_larger_than_the_fixed_one(api, run, provider):
    launch, _ = launch_routes(api)
    with pytest.raises(SpecError, match="22528"):
        run(provider.create(make_spec(disk_gb=30000)))
    assert api.requests == []
    run(provider.create(make_spec(disk_gb=22528)))
    assert launch.call_count == 1


def test_create_disk_check_falls_back_to_the_catalog(api, run, provider):
    launch_routes(api)
    spec = make_spec(disk_gb=30000)
    spec = spec.model_copy(update={"offer": spec.offer.model_copy(update={"disk_gb": None})})
    with pytest.raises(SpecError):
        run(provider.create(spec))
    assert api.requests == []


def test_create_reports_the_machine_even_if_the_read_back_fails(api, run, provider):
    launch = api.on("POST", "/api/v1/instance-operations/launch",
                    reply(200, body("launch_instance_200")))
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}",
           reply(404, body("error_instance_not_found_404")))
    deadline = datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    instance = run(provider.create(make_spec(shutdown_at=deadline)))
    assert launch.call_count == 1
    assert (instance.id, instance.launch_id, instance.status) == (
        INSTANCE_ID, "lid-7f3a9c", InstanceStatus.PENDING)
    assert instance.price_per_hour == Decimal("23.92")
    assert instance.shutdown_at == deadline


@pytest.mark.parametrize("launched", [{"instance_ids": []}, {}, {"instance_ids": [7]}])
def test_create_rejects_a_malformed_launch_response(api, run, provider, launched):
    launch_routes(api, reply(200, {"data": launched}))
    with pytest.raises(APIResponseValidationError):
        run(provider.create(make_spec()))


def test_launch_500_is_sent_once(api, run, provider):
    launch, get = launch_routes(api, reply(500, {"error": {
        "code": "global/internal-error", "message": "Something went wrong."}}))
    with pytest.raises(InternalServerError) as info:
        run(provider.create(make_spec()))
    assert launch.call_count == 1 and get.call_count == 0
    assert info.value.status_code == 500 and info.value.provider_code == "global/internal-error"


def test_launch_read_timeout_is_sent_once(api, run, provider):
    launch, get = launch_routes(api, httpx.ReadTimeout("timed out"))
    with pytest.raises(APITimeoutError) as info:
        run(provider.create(make_spec()))
    assert info.value.sent is True
    assert launch.call_count == 1 and get.call_count == 0


def test_launch_that_never_left_is_retried(api, run, provider):
    launch, _ = launch_routes(api, httpx.ConnectError("refused"),
                              reply(200, body("launch_instance_200")))
    assert run(provider.create(make_spec())).id == INSTANCE_ID
    assert launch.call_count == 2


def test_launch_is_paced_by_the_launch_limit(api, run, provider, sleeps):
    launch_routes(api)
    run(provider.create(make_spec()))
    run(provider.create(make_spec()))
    # The second launch waits for the 12 s launch slot (less what little time passed).
    assert max(sleeps) > 11


# -- list / get / delete / verify ----------------------------------------------------


def test_list_instances_maps_fields(api, run, provider):
    api.on("GET", "/api/v1/instances", reply(200, body("list_instances_200")))
    [instance] = run(provider.list_instances())
    assert instance == Instance(
        provider="lambda", id=INSTANCE_ID, name="My Instance", status=InstanceStatus.PENDING,
        provider_status="booting", gpu="H100", gpu_count=8, instance_type="gpu_8x_h100_sxm5gdr",
        region="us-west-1", price_per_hour=Decimal("35.92"), ip="198.51.100.2",
        created_at=None, shutdown_at=None, launch_id=None,
    )


def test_list_reads_launch_id_and_deadline_from_tags(api, run, provider):
    raw = body("list_instances_200")
    raw["data"][0]["tags"] = [{"key": "gpucloud-launch-id", "value": "lid-1"},
                              {"key": "gpucloud-shutdown-at", "value": "2026-12-01T06:30:15Z"}]
    second = copy.deepcopy(raw["data"][0])
    second.update(id="1" * 32, tags=[{"key": "gpucloud-shutdown-at", "value": "tomorrow"}])
    raw["data"].append(second)
    api.on("GET", "/api/v1/instances", reply(200, raw))
    first, other = run(provider.list_instances())
    assert first.launch_id == "lid-1"
    assert first.shutdown_at == datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    assert (other.launch_id, other.shutdown_at) == (None, None)


def test_list_rejects_an_instance_without_id(api, run, provider):
    raw = body("list_instances_200")
    del raw["data"][0]["id"]
    api.on("GET", "/api/v1/instances", reply(200, raw))
    with pytest.raises(APIResponseValidationError):
        run(provider.list_instances())


@pytest.mark.parametrize("raw,status", [
    ("booting", InstanceStatus.PENDING),
    ("active", InstanceStatus.RUNNING),
    ("unhealthy", InstanceStatus.UNKNOWN),
    ("terminating", InstanceStatus.TERMINATING),
    ("terminated", InstanceStatus.TERMINATED),
    ("preempted", InstanceStatus.TERMINATED),
    ("hibernating", InstanceStatus.UNKNOWN),  # not in the spec: must not crash
])
def test_get_maps_every_status(api, run, provider, raw, status):
    route = api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(status=raw)))
    instance = run(provider.get(INSTANCE_ID))
    assert (instance.status, instance.provider_status) == (status, raw)
    assert route.call_count == 1


def test_get_quotes_the_id_into_the_path(api, run, provider):
    route = api.on("GET", "/api/v1/instances/a/b", reply(404, body(
        "error_instance_not_found_404")))
    with pytest.raises(NotFoundError):
        run(provider.get("a/b"))
    assert route.calls.last.request.url.raw_path == b"/api/v1/instances/a%2Fb"


def test_delete_terminates_by_id(api, run, provider):
    route = api.on("POST", "/api/v1/instance-operations/terminate",
                   reply(200, body("terminate_instance_200")))
    assert run(provider.delete(INSTANCE_ID)) is None
    assert json.loads(route.calls.last.request.content) == {"instance_ids": [INSTANCE_ID]}


def test_delete_is_retried_after_a_5xx(api, run, provider):
    route = api.on("POST", "/api/v1/instance-operations/terminate", reply(503, text="busy"),
                   reply(200, body("terminate_instance_200")))
    run(provider.delete(INSTANCE_ID))
    assert route.call_count == 2


def test_delete_of_a_missing_instance(api, run, provider):
    api.on("POST", "/api/v1/instance-operations/terminate",
           reply(404, body("error_instance_not_found_404")))
    with pytest.raises(NotFoundError):
        run(provider.delete(INSTANCE_ID))


def test_verify_reads_ssh_keys(api, run, provider):
    route = api.on("GET", "/api/v1/ssh-keys", reply(200, body("list_ssh_keys_200")))
    assert run(provider.verify()) is None
    assert route.call_count == 1


def test_verify_with_a_bad_key(api, run, provider):
    api.on("GET", "/api/v1/ssh-keys", reply(401, body("error_invalid_api_key_401")))
    with pytest.raises(AuthenticationError):
        run(provider.verify())


# -- errors --------------------------------------------------------------------------


ERRORS = [
    ("error_invalid_api_key_401", 401, AuthenticationError, "get"),
    ("error_account_inactive_403", 403, PermissionDeniedError, "get"),
    ("error_instance_not_found_404", 404, NotFoundError, "get"),
    ("error_invalid_parameters_400", 400, BadRequestError, "get"),
    ("error_insufficient_capacity_400", 400, InsufficientCapacityError, "launch"),
    ("error_quota_exceeded_400", 400, QuotaExceededError, "launch"),
]


def fail_with(api, run, provider, op: str, response: Any) -> BaseException:
    if op == "launch":
        launch_routes(api, response)
        flow = provider.create(make_spec())
    else:
        api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", response)
        flow = provider.get(INSTANCE_ID)
    with pytest.raises(Exception) as info:
        run(flow)
    return info.value


@pytest.mark.parametrize("name,status,cls,op", ERRORS)
def test_error_bodies_map_to_classes(api, run, provider, name, status, cls, op):
    error = body(name)["error"]
    exc = fail_with(api, run, provider, op, reply(status, body(name)))
    assert type(exc) is cls
    assert exc.status_code == status
    assert exc.provider_code == error["code"]
    assert exc.provider == "lambda"
    assert error["message"] in str(exc)
    if "suggestion" in error:
        assert exc.hint.startswith(error["suggestion"].rstrip("."))


def test_invalid_billing_address_is_permission_denied(api, run, provider):
    exc = fail_with(api, run, provider, "launch", reply(403, {"error": {
        "code": "global/invalid-address", "message": "Your billing address is invalid."}}))
    assert type(exc) is PermissionDeniedError and exc.provider_code == "global/invalid-address"


def test_unknown_code_keeps_code_and_message(api, run, provider):
    exc = fail_with(api, run, provider, "launch", reply(400, {"error": {
        "code": "instance-operations/launch/something-new", "message": "A new failure."}}))
    assert type(exc) is APIStatusError
    assert exc.provider_code == "instance-operations/launch/something-new"
    assert "A new failure." in str(exc)


def test_unknown_code_on_a_5xx_is_a_server_error(api, run, provider):
    launch, _ = launch_routes(api, reply(503, {"error": {
        "code": "provider/internal-unavailable", "message": "Provider unavailable",
        "suggestion": "Try again shortly"}}))
    with pytest.raises(InternalServerError) as info:
        run(provider.create(make_spec()))
    assert info.value.provider_code == "provider/internal-unavailable"
    assert info.value.hint == "Try again shortly"
    assert launch.call_count == 1


def test_non_json_502_maps_by_status(api, run, provider):
    route = api.on("GET", f"/api/v1/instances/{INSTANCE_ID}",
                   reply(502, text="<html><body>502 Bad Gateway</body></html>",
                         headers={"content-type": "text/html"}))
    with pytest.raises(InternalServerError) as info:
        run(provider.get(INSTANCE_ID))
    assert info.value.status_code == 502 and info.value.provider_code is None
    assert "Bad Gateway" in str(info.value)
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


def test_get_503_then_200_is_retried(api, run, provider):
    route = api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(503, text=""),
                   reply(200, instance_body(status="active")))
    assert run(provider.get(INSTANCE_ID)).status is InstanceStatus.RUNNING
    assert route.call_count == 2


def test_429_waits_for_retry_after(api, run, provider, sleeps):
    route = api.on("GET", "/api/v1/instances",
                   reply(429, {"error": {"code": "global/rate-limited", "message": "Slow down"}},
                         headers={"Retry-After": "7"}),
                   reply(200, body("list_instances_200")))
    assert len(run(provider.list_instances())) == 1
    assert route.call_count == 2
    assert sleeps[0] == 7.0


def test_429_on_launch_is_retried_because_nothing_happened(api, run, provider, sleeps):
    launch, _ = launch_routes(api, reply(429, text="", headers={"Retry-After": "3"}),
                              reply(200, body("launch_instance_200")))
    run(provider.create(make_spec()))
    assert launch.call_count == 2 and 3.0 in sleeps


@pytest.mark.parametrize("payload", [
    None,
    # A 429 is about pace whatever code comes with it, not about quota.
    {"error": {"code": "global/quota-exceeded", "message": "Too many requests."}},
])
def test_429_exhausted_is_a_rate_limit_error(api, run, provider, payload):
    route = api.on("GET", "/api/v1/instances", reply(429, payload, headers={"Retry-After": "2"}))
    with pytest.raises(RateLimitError) as info:
        run(provider.list_instances())
    assert info.value.retry_after == 2.0
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


@pytest.mark.parametrize("response", [
    reply(401, body("error_invalid_api_key_401")),
    reply(400, {"error": {"code": "global/invalid-parameters",
                          "message": f"bad key {KEY}", "suggestion": f"not {KEY}"}}),
    reply(500, text=f"trace: Authorization: Bearer {KEY}"),
    reply(200, {"nope": KEY}),
    httpx.ReadTimeout("timed out"),
])
def test_the_api_key_never_appears_in_errors(api, run, provider, response):
    exc = fail_with(api, run, provider, "get", response)
    visible = " ".join([str(exc), repr(exc), str(exc.hint), repr(exc.args),
                        repr(vars(exc).get("request"))])
    assert KEY not in visible
    assert KEY not in repr(provider) and KEY not in repr(provider.credential)


def test_requests_carry_the_bearer_key(api, run, provider):
    route = api.on("GET", "/api/v1/instances", reply(200, body("list_instances_200")))
    run(provider.list_instances())
    request = route.calls.last.request
    assert request.headers["Authorization"] == "Bearer secret-key-123"
    assert request.headers["Accept"] == "application/json"
