"""RunPod adapter (REST v2), contract-tested (the spec checker, the fixture
bodies, and offers): respx answers at the HTTP transport with the spec's example
bodies in tests/fixtures/runpod, every request the adapter sends is validated
against the trimmed official OpenAPI document and must carry the Bearer key,
and flows run through the real driver (retries, Retry-After, auth). Shared
helpers and fixtures live in tests/adapters/_runpod_support.py."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
import respx
from openapi_schema_validator import OAS31Validator

from gpucloud.providers.base import OfferQuery
from gpucloud.errors import APIResponseValidationError
from gpucloud.models import Offer
from tests.adapters._runpod_support import (  # noqa: F401 (fixtures)
    A100,
    API,
    FIXTURES,
    POD,
    SPEC,
    api,
    body,
    by_cloud,
    catalog_body,
    provider,
    reply,
    run,
    sleeps,
)
from tests.openapi_check import response_errors, validate_request

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
    assert response_errors(SPEC, request, httpx.Response(
        status, content=(FIXTURES / f"{name}.json").read_bytes(),
        headers={"content-type": "application/json"}, request=request)) == []


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
    response = httpx.Response(200, json=catalog_body(cloud), request=request)
    assert response_errors(SPEC, request, response) == []


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
        "disk_billed_apart": False, "hours_per_month": None, "usage_prices": (), "notes": (),
    }


def test_offers_availability_per_data_center(api, run, provider):
    offers, _ = offers_of(api, run, provider, gpu="A100-80GB", count=8)
    pcie = {o.region: o.available for o in offers if o.instance_type == f"8x {A100}"}
    assert pcie["US-KS-2"] is True and pcie["EU-RO-1"] is True  # HIGH, LOW
    assert pcie["US-TX-3"] is False  # NONE
    # The live list names every data center carrying the type (NONE: sold
    # out); the catalog's regions are never added to it.
    catalog = {r for t in provider.catalog.types_named(f"8x {A100}") for r in t.regions}
    assert catalog - {"US-KS-2", "EU-RO-1", "US-TX-3"}
    assert set(pcie) == {"US-KS-2", "EU-RO-1", "US-TX-3"}
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

