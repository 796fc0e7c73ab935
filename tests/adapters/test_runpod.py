"""RunPod adapter (REST v2), contract-tested: respx answers at the HTTP
transport with the spec's example bodies in tests/fixtures/runpod, every
request the adapter sends is validated against the trimmed official OpenAPI
document and must carry the Bearer key, and flows run through the real driver
(retries, Retry-After, auth)."""

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
from openapi_schema_validator import OAS31Validator
from pydantic import SecretStr

from gpucloud._http import DEFAULT_POLICY, Session
from gpucloud.adapters.base import OfferQuery
from gpucloud.adapters.runpod import RunPodProvider
from gpucloud.catalog import load_catalogs
from gpucloud.credentials import Credential
from gpucloud.errors import (
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
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

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "runpod"
SPEC = FIXTURES / "openapi-v2.json"
API = "https://api.runpod.io"
KEY = "rpa_secret-key-123"
POD_ID = "7h9k2m4n6p"
POD = f"/v2/pods/{POD_ID}"
PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T"
              " me@laptop")
A100 = "NVIDIA A100 80GB PCIe"


def body(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def pod_body(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(body("v2_get_pod_200_pod"))
    raw.update(changes)
    return raw


def gpu_type(gpu_id: str, name: str, memory: int, secure: float, community: float,
             max_secure: int, max_community: int, dcs: list[tuple[str, str]]) -> dict[str, Any]:
    """A GpuType shaped like the spec's example (v2_list_gpu_types_200_gpus.json)."""
    raw = copy.deepcopy(body("v2_list_gpu_types_200_gpus")["gpus"][0])
    raw.update(id=gpu_id, name=name, memory=memory, secure=secure > 0, community=community > 0,
               price={"secure": secure, "community": community},
               maxCount={"secure": max_secure, "community": max_community},
               availability="HIGH" if dcs else "NONE")
    raw["dataCenters"] = [{"id": i, "name": i, "availability": a} for i, a in dcs]
    if not dcs:
        del raw["dataCenters"]  # "omitted entirely when unavailable everywhere"
    return raw


def catalog_body(cloud: str) -> dict[str, Any]:
    """GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&cloud=<cloud>."""
    example = body("v2_list_gpu_types_200_gpus")["gpus"][0]  # RTX 4090, 0.44 / 0.31
    if cloud == "SECURE":
        return {"gpus": [
            example,
            gpu_type(A100, "A100 PCIe", 80, 1.39, 1.19, 8, 4,
                     [("US-KS-2", "HIGH"), ("EU-RO-1", "LOW"), ("US-TX-3", "NONE")]),
            gpu_type("NVIDIA A100-SXM4-80GB", "A100 SXM", 80, 1.1, 0, 8, 0,
                     [("US-KS-2", "MEDIUM")]),
            gpu_type("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.69, 0, 8, 0, []),
            gpu_type("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000", 96,
                     1.79, 0, 8, 0, [("EU-SE-1", "HIGH")]),
            gpu_type("Mystery GPU 9000", "Mystery", 12, 0.2, 0, 1, 0, [("US-KS-2", "LOW")]),
        ]}
    return {"gpus": [
        gpu_type("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.44, 0.31, 8, 4,
                 [("EU-SE-1", "MEDIUM"), ("US-KS-2", "NONE")]),
        gpu_type(A100, "A100 PCIe", 80, 1.39, 1.19, 8, 4, [("CA-MTL-1", "HIGH")]),
        gpu_type("NVIDIA A100-SXM4-80GB", "A100 SXM", 80, 1.1, 0, 8, 0, []),
    ]}


def reply(status: int = 200, payload: Any = None, *, text: str | None = None,
          headers: dict[str, str] | None = None) -> Any:
    """A factory, so that a route answering several times never reuses a Response."""
    def build(request: httpx.Request) -> httpx.Response:
        if text is not None:
            return httpx.Response(status, text=text, headers=headers)
        if payload is None:
            return httpx.Response(status, headers=headers)
        if status >= 400:
            return httpx.Response(status, content=json.dumps(payload).encode(), headers={
                "content-type": "application/problem+json", **(headers or {})})
        return httpx.Response(status, json=payload, headers=headers)
    return build


def problem(status: int, title: str, detail: str, **extra: Any) -> Any:
    return reply(status, {"title": title, "status": status, "detail": detail, **extra})


def by_cloud(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=catalog_body(request.url.params["cloud"]))


def echo_pod(request: httpx.Request) -> httpx.Response:
    """A 201 shaped like the spec's example, carrying what the create asked for."""
    sent = json.loads(request.content)
    pod = copy.deepcopy(body("v2_create_pod_201_pod"))
    pod.update(name=sent["name"], image=sent["image"], env=sent["env"], gpu=sent["gpu"],
               cloud=sent["cloud"], dataCenterId=sent["dataCenterIds"][0],
               ports=sent["ports"], disk=sent.get("disk", 50))
    return httpx.Response(201, json=pod)


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
def provider() -> RunPodProvider:
    return RunPodProvider(load_catalogs()["runpod"], Credential("runpod", SecretStr(KEY), "test"))


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def run(provider, sleeps):
    session = Session(provider, sleep=sleeps.append)
    yield session.run
    session.close()


def make_spec(instance_type: str = f"2x {A100}", region: str = "US-KS-2", count: int = 2,
              **changes: Any) -> InstanceSpec:
    offer = Offer(provider="runpod", instance_type=instance_type, region=region,
                  gpu="A100-80GB", gpu_count=count, price_per_hour=Decimal("2.78"),
                  source="live", available=True)
    fields: dict[str, Any] = {"offer": offer, "launch_id": "gc-7f3a9c01",
                              "name": "gpucloud-gc-7f3a9c01", "image": "runpod/pytorch:2.4"}
    fields.update(changes)
    return InstanceSpec(**fields)


def sent_json(request: httpx.Request) -> Any:
    return json.loads(request.content)


# -- the spec checker and the fixture bodies --------------------------------------------


def test_checker_accepts_the_spec_example_create_body():
    request = httpx.Request("POST", f"{API}/v2/pods", headers={"Authorization": "Bearer x"},
                            json=body("v2_create_pod_request_gpuPod"))
    validate_request(SPEC, request)


@pytest.mark.parametrize("case", ["unknown field", "no image", "bad cloud", "spot field",
                                  "no auth", "v1 path", "bad product"])
def test_checker_rejects_bad_requests(case):
    pod: dict[str, Any] = dict(body("v2_create_pod_request_gpuPod"))
    method, path, params = "POST", "/v2/pods", None
    headers = {"Authorization": "Bearer x"}
    if case == "unknown field":
        pod["gpu"] = {**pod["gpu"], "minVcpuCountPerGpu": 8}  # SkyPilot's, not in the spec
    elif case == "no image":
        del pod["image"]
    elif case == "bad cloud":
        pod["cloud"] = "ALL"
    elif case == "spot field":
        pod["interruptible"] = True  # v1 only
    elif case == "no auth":
        headers = {}
    elif case == "v1 path":
        path = "/v1/pods"
    elif case == "bad product":
        method, path, pod = "GET", "/v2/catalog/gpus", None
        params = {"include": "AVAILABILITY", "product": "PODS"}
    request = httpx.Request(method, API + path, headers=headers, json=pod, params=params)
    with pytest.raises(AssertionError) as info:
        validate_request(SPEC, request)
    assert path in str(info.value)


@pytest.mark.parametrize("name,method,path,status", [
    ("v2_list_gpu_types_200_gpus", "GET", "/v2/catalog/gpus", 200),
    ("v2_create_pod_201_pod", "POST", "/v2/pods", 201),
    ("v2_list_pods_200_pods", "GET", "/v2/pods", 200),
    ("v2_get_pod_200_pod", "GET", POD, 200),
    ("v2_pod_action_200_pod", "POST", f"{POD}/action", 200),
])
def test_fixture_bodies_match_the_spec(name, method, path, status):
    request = httpx.Request(method, API + path, headers={"Authorization": "Bearer x"})
    validate_response(SPEC, request, httpx.Response(
        status, content=(FIXTURES / f"{name}.json").read_bytes(),
        headers={"content-type": "application/json"}, request=request))


@pytest.mark.parametrize("name", [
    "v2_error_400_badRequest", "v2_error_400_no_capacity", "v2_error_401_missingBearerToken",
    "v2_error_403_insufficientAccess", "v2_error_404_notFound", "v2_error_405_methodNotAllowed",
    "v2_error_422_validationFailed", "v2_error_429_rateLimited",
])
def test_error_bodies_match_the_problem_schema(name):
    # openapi-core does not parse application/problem+json bodies, so the
    # ErrorResponse schema is applied directly.
    spec = json.loads(SPEC.read_text())
    schema = {**spec["components"]["schemas"]["ErrorResponse"], "unevaluatedProperties": False}
    OAS31Validator(schema).validate(body(name))
    assert body(name)["status"] == int(name.split("_")[2])


@pytest.mark.parametrize("cloud", ["SECURE", "COMMUNITY"])
def test_built_catalog_bodies_match_the_spec(cloud):
    request = httpx.Request("GET", f"{API}/v2/catalog/gpus", headers={"Authorization": "Bearer x"})
    validate_response(SPEC, request, httpx.Response(200, json=catalog_body(cloud), request=request))


# -- offers ----------------------------------------------------------------------------


def offers_of(api, run, provider, **query: Any) -> tuple[list[Offer], respx.Route]:
    route = api.on("GET", "/v2/catalog/gpus", by_cloud)
    return run(provider.offers(OfferQuery(**query))), route


def by_key(offers: list[Offer]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in offers}


def test_offers_ask_for_pod_availability_per_cloud_and_count(api, run, provider):
    _, route = offers_of(api, run, provider, gpu="A100-80GB", count=4)
    assert [dict(c.request.url.params) for c in route.calls] == [
        {"include": "AVAILABILITY", "product": "POD", "count": "4", "cloud": cloud}
        for cloud in ("SECURE", "COMMUNITY")]


def test_offer_price_is_per_gpu_times_count_as_exact_decimal(api, run, provider):
    offers, _ = offers_of(api, run, provider, count=3)
    keyed = by_key(offers)
    # 1.1 * 3 is 3.3000000000000003 in float arithmetic.
    sxm = keyed[("3x NVIDIA A100-SXM4-80GB", "US-KS-2")].price_per_hour
    assert isinstance(sxm, Decimal) and str(sxm) == "3.3"
    assert keyed[(f"3x {A100}", "US-KS-2")].price_per_hour == Decimal("4.17")
    assert keyed[(f"3x {A100} (community)", "CA-MTL-1")].price_per_hour == Decimal("3.57")
    assert str(keyed[("3x NVIDIA GeForce RTX 4090", "US-KS-2")].price_per_hour) == "1.32"


def test_offer_fields(api, run, provider):
    offers, _ = offers_of(api, run, provider, gpu="A100-80GB", count=8)
    assert by_key(offers)[(f"8x {A100}", "EU-RO-1")].model_dump() == {
        "provider": "runpod", "instance_type": f"8x {A100}", "region": "EU-RO-1",
        "gpu": "A100-80GB", "gpu_count": 8, "gpu_memory_gb": 80, "vcpus": None,
        "memory_gb": None, "disk_gb": None, "price_per_hour": Decimal("11.12"), "spot": False,
        "available": True, "source": "live", "simulated": False,
        "disk_price_per_gb_month": None, "as_of": None, "offer_id": None,
    }


def test_offers_availability_per_data_center(api, run, provider):
    offers, _ = offers_of(api, run, provider, gpu="A100-80GB", count=8)
    pcie = {o.region: o.available for o in offers if o.instance_type == f"8x {A100}"}
    assert pcie["US-KS-2"] is True and pcie["EU-RO-1"] is True  # HIGH, LOW
    assert pcie["US-TX-3"] is False  # NONE
    # Data centers the bundled catalog sells this type in, absent from the
    # live list, are offered as unavailable.
    catalog = {r for t in provider.catalog.types_named(f"8x {A100}") for r in t.regions}
    assert catalog - {"US-KS-2", "EU-RO-1"}
    assert all(pcie[r] is False for r in catalog - {"US-KS-2", "EU-RO-1"})
    assert {r for r, up in pcie.items() if up} == {"US-KS-2", "EU-RO-1"}
    assert all(o.source == "live" and o.spot is False for o in offers)


def test_community_offers_are_named_and_priced_apart(api, run, provider):
    offers, _ = offers_of(api, run, provider, gpu="RTX4090", count=2)
    keyed = by_key(offers)
    assert keyed[("2x NVIDIA GeForce RTX 4090", "US-KS-2")].price_per_hour == Decimal("0.88")
    community = {o.region: o for o in offers if o.instance_type.endswith(" (community)")}
    assert {r: o.available for r, o in community.items()} == {"EU-SE-1": True, "US-KS-2": False}
    assert all(o.instance_type == "2x NVIDIA GeForce RTX 4090 (community)"
               and o.price_per_hour == Decimal("0.62") for o in community.values())


def test_max_count_limits_each_cloud(api, run, provider):
    # Community A100 PCIe machines hold at most 4 GPUs: no 8x community offer,
    # and no community request at all since nothing else matches.
    offers, route = offers_of(api, run, provider, gpu="A100-80GB", count=8)
    assert offers and not [o for o in offers if "(community)" in o.instance_type]
    assert route.call_count == 1
    offers, _ = offers_of(api, run, provider, gpu="A100-80GB", count=16)
    assert offers == []


def test_community_is_not_read_when_nothing_matching_is_sold_there(api, run, provider):
    offers, route = offers_of(api, run, provider, gpu="H100", count=8)
    assert route.call_count == 1 and route.calls.last.request.url.params["cloud"] == "SECURE"
    # Unavailable everywhere (dataCenters omitted): only catalog regions, if any, as unavailable.
    assert all(o.available is False for o in offers)


def test_offers_filter_by_gpu(api, run, provider):
    offers, _ = offers_of(api, run, provider, gpu="A100-80GB", count=1)
    assert {o.instance_type for o in offers if o.available} == {
        f"1x {A100}", "1x NVIDIA A100-SXM4-80GB", f"1x {A100} (community)"}
    assert all(o.gpu == "A100-80GB" and o.gpu_count == 1 for o in offers)


def test_offers_without_count_are_for_one_gpu(api, run, provider):
    offers, route = offers_of(api, run, provider, gpu="RTX4090")
    assert route.calls[0].request.url.params["count"] == "1"
    assert offers and all(o.gpu_count == 1 for o in offers)
    assert by_key(offers)[("1x NVIDIA GeForce RTX 4090", "US-KS-2")].price_per_hour == \
        Decimal("0.44")


def test_offers_filter_by_region(api, run, provider):
    offers, _ = offers_of(api, run, provider, region="EU-SE-1")
    assert {o.region for o in offers} == {"EU-SE-1"}
    assert {o.instance_type for o in offers if o.available} == {
        "1x NVIDIA RTX PRO 6000 Blackwell Server Edition", "1x NVIDIA GeForce RTX 4090 (community)"}


def test_gpu_names_fall_back_to_the_display_name(api, run, provider):
    offers, _ = offers_of(api, run, provider)
    gpus = {o.instance_type: o.gpu for o in offers}
    assert gpus["1x NVIDIA RTX PRO 6000 Blackwell Server Edition"] == "RTX-PRO-6000"
    assert gpus["1x NVIDIA A100-SXM4-80GB"] == "A100-80GB"  # not the name's "A100 SXM"
    assert gpus["1x Mystery GPU 9000"] == "Mystery GPU 9000"  # unknown: kept raw


def test_spot_offers_are_empty_without_a_request(api, run, provider):
    route = api.on("GET", "/v2/catalog/gpus", by_cloud)
    assert run(provider.offers(OfferQuery(gpu="RTX4090", spot=True))) == []
    assert route.call_count == 0


def test_a_malformed_type_that_does_not_match_is_ignored(api, run, provider):
    raw = catalog_body("SECURE")
    raw["gpus"][0]["price"]["secure"] = "0.44"  # RTX 4090, not asked for
    api.on("GET", "/v2/catalog/gpus", reply(200, raw))
    assert run(provider.offers(OfferQuery(gpu="A100-80GB", count=8)))


@pytest.mark.parametrize("mutate", [
    lambda d: d["gpus"][1]["price"].update(secure="1.39"),  # a string price
    lambda d: d["gpus"][1].pop("memory"),
    lambda d: d["gpus"][1]["maxCount"].update(secure=None),
    lambda d: d["gpus"][1]["dataCenters"].append({"id": "X"}),
    lambda d: d["gpus"].append({"name": "no id"}),
    lambda d: d.update(gpus={}),
    lambda d: d.pop("gpus"),
])
def test_malformed_catalog_raises_validation_error(api, run, provider, mutate):
    raw = catalog_body("SECURE")
    mutate(raw)
    api.on("GET", "/v2/catalog/gpus", reply(200, raw))
    with pytest.raises(APIResponseValidationError):
        run(provider.offers(OfferQuery(gpu="A100-80GB", count=8)))


def test_non_json_catalog_raises_validation_error(api, run, provider):
    api.on("GET", "/v2/catalog/gpus", reply(200, text="<html>ok</html>"))
    with pytest.raises(APIResponseValidationError):
        run(provider.offers(OfferQuery()))


# -- create ----------------------------------------------------------------------------


def test_create_sends_exactly_the_spec_body(api, run, provider):
    route = api.on("POST", "/v2/pods", echo_pod)
    deadline = datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    instance = run(provider.create(make_spec(disk_gb=80, ssh_public_key=PUBLIC_KEY + "\n",
                                             shutdown_at=deadline)))
    assert route.call_count == 1
    assert sent_json(route.calls.last.request) == {
        "name": "gpucloud-gc-7f3a9c01",
        "image": "runpod/pytorch:2.4",
        "gpu": {"id": A100, "count": 2},
        "cloud": "SECURE",
        "dataCenterIds": ["US-KS-2"],
        "ports": ["22/tcp"],
        "env": {"GPUCLOUD_LAUNCH_ID": "gc-7f3a9c01",
                "GPUCLOUD_SHUTDOWN_AT": "2026-12-01T06:30:15Z", "PUBLIC_KEY": PUBLIC_KEY},
        "disk": 80,
    }
    assert instance == Instance(
        provider="runpod", id=POD_ID, name="gpucloud-gc-7f3a9c01", status=InstanceStatus.PENDING,
        provider_status="PROVISIONING", gpu="A100-80GB", gpu_count=2,
        instance_type=f"2x {A100}", region="US-KS-2", price_per_hour=Decimal("0.44"), ip=None,
        created_at=datetime(2026, 6, 1, 12, tzinfo=timezone.utc), shutdown_at=deadline,
        launch_id="gc-7f3a9c01")
    # One request: the 201 carries the pod, no read-back.
    assert [r.url.path for r in api.requests] == ["/v2/pods"]


def test_create_minimal_uses_catalog_image_and_account_keys(api, run, provider):
    route = api.on("POST", "/v2/pods", echo_pod)
    run(provider.create(make_spec(image=None)))
    sent = sent_json(route.calls.last.request)
    assert sent["image"] == provider.catalog.default_image
    assert sent["env"] == {"GPUCLOUD_LAUNCH_ID": "gc-7f3a9c01"}
    assert "disk" not in sent
    # Without a key of ours, RunPod injects the account's registered keys.
    assert sent["startSsh"] is True


def test_create_never_rewrites_the_account_keys(api, run, provider):
    api.on("POST", "/v2/pods", echo_pod)
    run(provider.create(make_spec(ssh_public_key=PUBLIC_KEY, ssh_key_name="gpucloud-abc")))
    assert [(r.method, r.url.path) for r in api.requests] == [("POST", "/v2/pods")]
    assert "startSsh" not in sent_json(api.requests[0])


def test_create_community_type(api, run, provider):
    route = api.on("POST", "/v2/pods", echo_pod)
    instance = run(provider.create(make_spec(f"4x {A100} (community)", "CA-MTL-1", 4)))
    sent = sent_json(route.calls.last.request)
    assert (sent["cloud"], sent["gpu"], sent["dataCenterIds"]) == (
        "COMMUNITY", {"id": A100, "count": 4}, ["CA-MTL-1"])
    assert instance.instance_type == f"4x {A100} (community)"


@pytest.mark.parametrize("itype,count", [
    ("gpu_8x_h100_sxm5", 8), (f"2x {A100}", 4), (A100, 1), ("2x", 2)])
def test_create_refuses_a_foreign_instance_type(api, run, provider, itype, count):
    route = api.on("POST", "/v2/pods", echo_pod)
    with pytest.raises(SpecError, match="RunPod instance type"):
        run(provider.create(make_spec(itype, count=count)))
    assert route.call_count == 0


def test_created_pod_read_back_that_fails_is_still_created(api, run, provider):
    pod = body("v2_create_pod_201_pod")
    del pod["status"]
    api.on("POST", "/v2/pods", reply(201, pod))
    instance = run(provider.create(make_spec()))
    assert (instance.id, instance.launch_id, instance.status) == (
        POD_ID, "gc-7f3a9c01", InstanceStatus.PENDING)
    assert instance.price_per_hour == Decimal("2.78")


@pytest.mark.parametrize("payload", [{"name": "x"}, [], {"id": 7}])
def test_create_without_a_pod_id_is_invalid(api, run, provider, payload):
    api.on("POST", "/v2/pods", reply(201, payload))
    with pytest.raises(APIResponseValidationError):
        run(provider.create(make_spec()))


def test_launch_500_is_sent_exactly_once(api, run, provider):
    route = api.on("POST", "/v2/pods", problem(500, "Internal Server Error", "upstream failed"))
    with pytest.raises(InternalServerError) as info:
        run(provider.create(make_spec()))
    assert route.call_count == 1
    assert info.value.status_code == 500 and info.value.provider_code == "Internal Server Error"


def test_launch_read_timeout_is_sent_exactly_once(api, run, provider):
    route = api.on("POST", "/v2/pods", httpx.ReadTimeout("timed out"))
    with pytest.raises(APITimeoutError) as info:
        run(provider.create(make_spec()))
    assert info.value.sent is True and route.call_count == 1


def test_launch_that_never_left_is_retried(api, run, provider):
    route = api.on("POST", "/v2/pods", httpx.ConnectError("refused"), echo_pod)
    assert run(provider.create(make_spec())).id == POD_ID
    assert route.call_count == 2


def test_launch_429_is_retried_after_retry_after(api, run, provider, sleeps):
    route = api.on("POST", "/v2/pods", reply(429, body("v2_error_429_rateLimited"),
                                             headers={"Retry-After": "12"}), echo_pod)
    run(provider.create(make_spec()))
    assert route.call_count == 2 and sleeps == [12.0]


def test_capacity_400_on_launch(api, run, provider):
    route = api.on("POST", "/v2/pods", reply(400, body("v2_error_400_no_capacity")))
    with pytest.raises(InsufficientCapacityError) as info:
        run(provider.create(make_spec()))
    assert route.call_count == 1
    assert "no longer any instances available" in str(info.value)
    assert info.value.provider_code == "Bad Request" and info.value.status_code == 400
    assert "data center" in info.value.hint


def test_insufficient_balance_402_skips_runpod_with_a_hint(api, run, provider):
    api.on("POST", "/v2/pods", problem(402, "Payment Required", "insufficient balance"))
    with pytest.raises(QuotaExceededError) as info:  # failover moves to another provider
        run(provider.create(make_spec()))
    assert info.value.status_code == 402 and "balance" in info.value.hint


def test_validation_422_lists_the_errors(api, run, provider):
    api.on("POST", "/v2/pods", problem(422, "Unprocessable Entity", "Request validation failed.",
                                       errors=["$: additional properties 'bogus' not allowed",
                                               "$.gpu.count: minimum 1"]))
    with pytest.raises(BadRequestError) as info:
        run(provider.create(make_spec()))
    assert str(info.value) == (
        "runpod: Request validation failed.: $: additional properties 'bogus' not allowed; "
        "$.gpu.count: minimum 1 (HTTP 422, Unprocessable Entity)")


# -- list / get / delete / stop / start / verify -------------------------------------------


def test_list_instances_maps_fields(api, run, provider):
    route = api.on("GET", "/v2/pods", reply(200, body("v2_list_pods_200_pods")))
    [instance] = run(provider.list_instances())
    assert instance == Instance(
        provider="runpod", id=POD_ID, name="pytorch-training", status=InstanceStatus.RUNNING,
        provider_status="RUNNING", gpu="RTX4090", gpu_count=1,
        instance_type="1x NVIDIA GeForce RTX 4090", region="US-KS-2",
        price_per_hour=Decimal("0.44"), ip="195.26.233.3",
        created_at=datetime(2026, 6, 1, 12, tzinfo=timezone.utc), shutdown_at=None,
        launch_id=None)
    assert route.calls.last.request.url.query == b""


def test_list_reads_launch_id_and_deadline_from_env(api, run, provider):
    raw = body("v2_list_pods_200_pods")
    first = raw["pods"][0]
    first["env"] = {"GPUCLOUD_LAUNCH_ID": "gc-1", "GPUCLOUD_SHUTDOWN_AT": "2026-12-01T06:30:15Z"}
    second = copy.deepcopy(first)
    second.update(id="p2", cloud="COMMUNITY", env={"GPUCLOUD_SHUTDOWN_AT": "tomorrow"})
    raw["pods"].append(second)
    api.on("GET", "/v2/pods", reply(200, raw))
    one, two = run(provider.list_instances())
    assert one.launch_id == "gc-1"
    assert one.shutdown_at == datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    assert (two.launch_id, two.shutdown_at) == (None, None)
    assert two.instance_type == "1x NVIDIA GeForce RTX 4090 (community)"


@pytest.mark.parametrize("mutate", [
    lambda d: d["pods"][0].pop("id"),
    lambda d: d["pods"][0].update(status=None),
    lambda d: d.update(pods=None),
    lambda d: d["pods"].append("pod"),
])
def test_list_rejects_malformed_pods(api, run, provider, mutate):
    raw = body("v2_list_pods_200_pods")
    mutate(raw)
    api.on("GET", "/v2/pods", reply(200, raw))
    with pytest.raises(APIResponseValidationError):
        run(provider.list_instances())


@pytest.mark.parametrize("raw,status", [
    ("PROVISIONING", InstanceStatus.PENDING),
    ("STARTING", InstanceStatus.PENDING),
    ("RUNNING", InstanceStatus.RUNNING),
    ("EXITED", InstanceStatus.STOPPED),
    ("ERROR", InstanceStatus.FAILED),
    ("TERMINATED", InstanceStatus.TERMINATED),
    ("MIGRATING", InstanceStatus.UNKNOWN),  # not in the spec: must not crash
])
def test_get_maps_every_status(api, run, provider, raw, status):
    route = api.on("GET", POD, reply(200, pod_body(status=raw)))
    instance = run(provider.get(POD_ID))
    assert (instance.status, instance.provider_status) == (status, raw)
    assert route.call_count == 1


def test_ip_falls_back_to_direct_ssh_then_none(api, run, provider):
    stopped = pod_body(status="EXITED", runtime=None, cost=0.0)
    api.on("GET", POD, reply(200, stopped))
    instance = run(provider.get(POD_ID))
    assert instance.ip == "195.26.233.3"  # ssh.direct.host
    assert instance.price_per_hour == Decimal("0.0")
    provisioning = pod_body(runtime={}, ssh={"proxy": None, "direct": None})
    api.on("GET", POD, reply(200, provisioning))
    assert run(provider.get(POD_ID)).ip is None


def test_get_quotes_the_id_into_the_path(api, run, provider):
    route = api.on("GET", "/v2/pods/a/b", reply(404, body("v2_error_404_notFound")))
    with pytest.raises(NotFoundError):
        run(provider.get("a/b"))
    assert route.calls.last.request.url.raw_path == b"/v2/pods/a%2Fb"


def test_delete_terminates_with_204(api, run, provider):
    route = api.on("DELETE", POD, reply(204))
    assert run(provider.delete(POD_ID)) is None
    assert route.call_count == 1 and route.calls.last.request.content == b""


def test_delete_is_retried_after_a_5xx(api, run, provider):
    route = api.on("DELETE", POD, reply(503, text="busy"), reply(204))
    run(provider.delete(POD_ID))
    assert route.call_count == 2


@pytest.mark.parametrize("status,payload,cls", [
    (404, body("v2_error_404_notFound"), NotFoundError),
    (409, {"title": "Conflict", "status": 409,
           "detail": "pod belongs to a cluster"}, ConflictError),
])
def test_delete_errors(api, run, provider, status, payload, cls):
    api.on("DELETE", POD, reply(status, payload))
    with pytest.raises(cls):
        run(provider.delete(POD_ID))


@pytest.mark.parametrize("action,answer,status", [
    ("stop", pod_body(status="EXITED", runtime=None, cost=0.0), InstanceStatus.STOPPED),
    ("start", body("v2_pod_action_200_pod"), InstanceStatus.RUNNING),
])
def test_stop_and_start_post_the_action(api, run, provider, action, answer, status):
    route = api.on("POST", f"{POD}/action", reply(200, answer))
    flow = provider.stop(POD_ID) if action == "stop" else provider.start(POD_ID)
    instance = run(flow)
    assert sent_json(route.calls.last.request) == {"action": action}
    assert instance.id == POD_ID and instance.status is status
    assert route.call_count == 1


@pytest.mark.parametrize("action,current,ok", [
    ("stop", "EXITED", True), ("stop", "RUNNING", False),
    ("start", "RUNNING", True), ("start", "EXITED", False),
])
def test_action_409_is_success_only_when_already_done(api, run, provider, action, current, ok):
    api.on("POST", f"{POD}/action", problem(409, "Conflict", "action not valid for status"))
    get = api.on("GET", POD, reply(200, pod_body(status=current)))
    flow = provider.stop(POD_ID) if action == "stop" else provider.start(POD_ID)
    if ok:
        assert run(flow).provider_status == current
    else:
        with pytest.raises(ConflictError, match="action not valid"):
            run(flow)
    assert get.call_count == 1


def test_verify_reads_pods(api, run, provider):
    route = api.on("GET", "/v2/pods", reply(200, body("v2_list_pods_200_pods")))
    assert run(provider.verify()) is None
    assert route.call_count == 1


def test_verify_with_a_bad_key(api, run, provider):
    api.on("GET", "/v2/pods", reply(401, body("v2_error_401_missingBearerToken")))
    with pytest.raises(AuthenticationError) as info:
        run(provider.verify())
    assert "missing bearer token" in str(info.value)


# -- errors ----------------------------------------------------------------------------


ERRORS = [
    ("v2_error_400_badRequest", BadRequestError),
    ("v2_error_400_no_capacity", InsufficientCapacityError),
    ("v2_error_401_missingBearerToken", AuthenticationError),
    ("v2_error_403_insufficientAccess", PermissionDeniedError),
    ("v2_error_404_notFound", NotFoundError),
    ("v2_error_405_methodNotAllowed", APIStatusError),
    ("v2_error_422_validationFailed", BadRequestError),
    ("v2_error_429_rateLimited", RateLimitError),
]


@pytest.mark.parametrize("name,cls", ERRORS)
def test_every_example_error_body_maps_to_its_class(api, run, provider, name, cls):
    error = body(name)
    api.on("POST", "/v2/pods", reply(error["status"], error))
    with pytest.raises(APIStatusError) as info:
        run(provider.create(make_spec()))
    exc = info.value
    assert type(exc) is cls
    assert (exc.status_code, exc.provider_code, exc.provider) == (
        error["status"], error["title"], "runpod")
    assert error["detail"] in str(exc)


@pytest.mark.parametrize("detail", [
    body("v2_error_400_no_capacity")["detail"],
    "There are no instances currently available",
    "create pod: There are no\n  instances currently available",
    "Not enough capacity for 8x NVIDIA H100 80GB HBM3 in US-KS-2",
    "insufficient GPU capacity",
    "This GPU and data center combination could not be placed.",
    "No GPUs available in the requested data center",
])
def test_capacity_400s_are_recognised_by_their_detail(api, run, provider, detail):
    api.on("POST", "/v2/pods", problem(400, "Bad Request", detail))
    with pytest.raises(InsufficientCapacityError):
        run(provider.create(make_spec()))


@pytest.mark.parametrize("status,detail,cls", [
    (400, "gpu and cpu are mutually exclusive", BadRequestError),
    (400, "persistent mount capacity must be at least 10 GB", BadRequestError),
    (400, "allowedCudaVersions and minCudaVersion are mutually exclusive", BadRequestError),
    # Capacity words outside a 400 keep the status's meaning: a 5xx on a
    # launch stays ambiguous and is reconciled, never taken as "nothing made".
    (500, "There are no instances currently available", InternalServerError),
    (403, "no longer any instances available in this pool", PermissionDeniedError),
])
def test_other_details_keep_their_status_class(api, run, provider, status, detail, cls):
    api.on("POST", "/v2/pods", problem(status, "Error", detail))
    with pytest.raises(APIStatusError) as info:
        run(provider.create(make_spec()))
    assert type(info.value) is cls


def test_non_json_502_maps_by_status_and_reads_are_retried(api, run, provider):
    route = api.on("GET", POD, reply(502, text="<html><body>502 Bad Gateway</body></html>",
                                     headers={"content-type": "text/html"}))
    with pytest.raises(InternalServerError) as info:
        run(provider.get(POD_ID))
    assert info.value.status_code == 502 and info.value.provider_code is None
    assert "Bad Gateway" in str(info.value)
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


def test_non_json_400_is_a_bad_request(api, run, provider):
    api.on("POST", "/v2/pods", reply(400, text="nope"))
    with pytest.raises(BadRequestError):
        run(provider.create(make_spec()))


def test_429_waits_for_retry_after(api, run, provider, sleeps):
    route = api.on("GET", "/v2/pods", reply(429, body("v2_error_429_rateLimited"), headers={
        "Retry-After": "12", "RateLimit": '"minute";r=0;t=12',
        "RateLimit-Policy": '"minute";q=60;w=60'}), reply(200, body("v2_list_pods_200_pods")))
    assert len(run(provider.list_instances())) == 1
    assert route.call_count == 2 and sleeps == [12.0]


def test_429_exhausted_is_a_rate_limit_error(api, run, provider):
    route = api.on("GET", "/v2/pods", reply(429, body("v2_error_429_rateLimited"),
                                            headers={"Retry-After": "2"}))
    with pytest.raises(RateLimitError) as info:
        run(provider.list_instances())
    assert info.value.retry_after == 2.0
    assert "minute window" in str(info.value)
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


@pytest.mark.parametrize("response", [
    reply(401, body("v2_error_401_missingBearerToken")),
    problem(400, f"Bad {KEY}", f"invalid key {KEY}", errors=[f"$.env: {KEY}"]),
    problem(400, "Bad Request", f"no longer any instances available for {KEY}"),
    reply(500, text=f"trace: Authorization: Bearer {KEY}"),
    reply(200, {"nope": KEY}),
    httpx.ReadTimeout("timed out"),
])
def test_the_api_key_never_appears_in_errors(api, run, provider, response):
    api.on("POST", "/v2/pods", response)
    with pytest.raises(Exception) as info:
        run(provider.create(make_spec()))
    exc = info.value
    visible = " ".join([str(exc), repr(exc), str(getattr(exc, "hint", "")), repr(exc.args),
                        str(getattr(exc, "provider_code", "")), repr(vars(exc).get("request"))])
    assert KEY not in visible
    assert KEY not in repr(provider) and KEY not in repr(provider.credential)


def test_requests_carry_the_bearer_key(api, run, provider):
    route = api.on("GET", "/v2/pods", reply(200, body("v2_list_pods_200_pods")))
    run(provider.list_instances())
    request = route.calls.last.request
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["Accept"] == "application/json"
    assert request.url.host == "api.runpod.io" and request.url.path.startswith("/v2/")


def test_capabilities():
    caps = RunPodProvider.capabilities
    assert (caps.spot, caps.stop_start, caps.custom_disk, caps.needs_ssh_key,
            caps.native_shutdown) == (False, True, True, False, False)
    assert RunPodProvider.name == "runpod" and RunPodProvider.min_interval == {}
