"""Lambda adapter, contract-tested (the spec checker, the fixture bodies, and
offers): respx answers at the HTTP transport with the recorded/spec bodies in
tests/fixtures/lambda, every request the adapter sends is validated against the
trimmed official OpenAPI document, and flows run through the real driver
(retries, rate limits, auth). Shared helpers and fixtures live in
tests/adapters/_lambda_support.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest

from gpucloud.providers.base import OfferQuery
from gpucloud.errors import APIResponseValidationError
from gpucloud.models import Offer
from tests.adapters._lambda_support import (  # noqa: F401 (fixtures)
    API,
    INSTANCE_ID,
    SPEC,
    api,
    body,
    provider,
    reply,
    run,
    sleeps,
)
from tests.openapi_check import response_errors, validate_request, validate_response

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
    response = httpx.Response(status, json=body(name), request=request)
    assert response_errors(SPEC, request, response) == []


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
        "disk_billed_apart": False, "hours_per_month": None, "usage_prices": (), "notes": (),
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

