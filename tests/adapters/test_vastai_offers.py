"""Vast.ai adapter, contract-tested (the trimmed spec and offers):
respx answers at the HTTP transport with bodies derived from the official
OpenAPI document (tests/fixtures/vastai), every request the adapter sends is
validated against the trimmed spec and checked for the Bearer key, and flows
run through the real driver (retries, pacing, auth). Shared helpers and
fixtures live in tests/adapters/_vastai_support.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest

from gpucloud.catalog import pricing
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.vastai._wire import (
    DEFAULT_DISK_GB, VAST_GPU_NAMES, instance_type_name, search_body,
)
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.errors import APIResponseValidationError
from tests.adapters._vastai_support import (  # noqa: F401 (fixtures)
    API,
    ASK,
    LIST,
    SHOWN,
    SPEC,
    api_fixture,
    body,
    example_offer,
    provider_fixture,
    reply,
    run_fixture,
    sent,
    sleeps_fixture,
)
from tests.openapi_check import request_errors, validate_request, validate_response

# -- the trimmed spec --------------------------------------------------------------


def search_request(payload: dict[str, Any]) -> httpx.Request:
    return httpx.Request("POST", f"{API}/api/v0/bundles/", json=payload,
                         headers={"Authorization": "Bearer x"})


@pytest.mark.parametrize("kind", ["on-demand", "ondemand", "bid", "reserved"])
def test_spec_accepts_both_on_demand_spellings(kind):
    assert request_errors(SPEC, search_request({"type": kind, "limit": 5})) == []


@pytest.mark.parametrize("payload", [{"type": "spot"}, {"limit": "many"},
                                     {"order": [["dph_total", "asc"]]}])
def test_spec_rejects_bad_searches(payload):
    with pytest.raises(AssertionError):
        validate_request(SPEC, search_request(payload))


def test_spec_rejects_a_request_without_the_key():
    request = httpx.Request("GET", f"{API}{LIST}")
    with pytest.raises(AssertionError):
        validate_request(SPEC, request)


@pytest.mark.parametrize("env,ok", [({"A": "b"}, True), ("-e A=b", True), (["A=b"], False)])
def test_spec_create_env_is_an_object_or_a_string(env, ok):
    request = httpx.Request("PUT", f"{API}/api/v0/asks/{ASK}/",
                            headers={"Authorization": "Bearer x"},
                            json={"image": "vastai/pytorch", "env": env})
    assert (request_errors(SPEC, request) == []) is ok


@pytest.mark.parametrize("runtype,ok", [
    ("ssh_direc ssh_proxy", True),  # vast-cli's --ssh --direct, added to the trimmed spec
    ("ssh_direct", True), ("ssh_proxy", True),
    ("ssh_direct ssh_proxy", False), ("ssh direct", False),
])
def test_spec_create_runtype(runtype, ok):
    request = httpx.Request("PUT", f"{API}/api/v0/asks/{ASK}/",
                            headers={"Authorization": "Bearer x"},
                            json={"image": "vastai/pytorch", "runtype": runtype})
    assert (request_errors(SPEC, request) == []) is ok


@pytest.mark.parametrize("name,method,path,status", [
    ("search_offers_200_wrapped_list", "POST", "/api/v0/bundles/", 200),
    ("create_instance_200_from_schema_examples", "PUT", f"/api/v0/asks/{ASK}/", 200),
    ("create_instance_400_from_schema_examples", "PUT", f"/api/v0/asks/{ASK}/", 400),
    ("create_instance_403_from_schema_examples", "PUT", f"/api/v0/asks/{ASK}/", 403),
    ("create_instance_404_from_schema_examples", "PUT", f"/api/v0/asks/{ASK}/", 404),
    ("create_instance_410_from_schema_examples", "PUT", f"/api/v0/asks/{ASK}/", 410),
    ("create_instance_429_from_schema_examples", "PUT", f"/api/v0/asks/{ASK}/", 429),
    ("create_ssh_key_200_from_schema_examples", "POST", "/api/v0/ssh/", 200),
    ("destroy_instance_200_from_schema_examples", "DELETE", f"/api/v0/instances/{SHOWN}/", 200),
    ("destroy_instance_400_from_schema_examples", "DELETE", f"/api/v0/instances/{SHOWN}/", 400),
    ("destroy_instance_404_from_schema_examples", "DELETE", f"/api/v0/instances/{SHOWN}/", 404),
    ("destroy_instance_429_from_schema_examples", "DELETE", f"/api/v0/instances/{SHOWN}/", 429),
    ("list_instances_v1_200_from_schema_examples", "GET", LIST, 200),
    ("show_instance_200_from_schema_examples", "GET", f"/api/v0/instances/{SHOWN}/", 200),
    ("show_instance_401", "GET", f"/api/v0/instances/{SHOWN}/", 401),
])
def test_fixture_bodies_match_the_spec(name, method, path, status):
    payload = body(name)
    if name.startswith("show_instance_200"):
        # The spec's per-property example for os_version is the number 18.04; its
        # schema says string. Everything else in the assembled example is on-spec.
        assert payload["instances"]["os_version"] == 18.04
        payload["instances"]["os_version"] = "18.04"
    request = httpx.Request(method, API + path, headers={"Authorization": "Bearer x"})
    validate_response(SPEC, request, httpx.Response(status, json=payload, request=request))


def test_the_spec_example_search_reply_is_off_spec():
    # The spec's example shows "offers" as one object; its schema says a list.
    request = search_request({})
    with pytest.raises(AssertionError):
        validate_response(SPEC, request, httpx.Response(
            200, json=body("search_offers_200_as_in_spec"), request=request))


# -- offers ------------------------------------------------------------------------


def search(api, run, provider, offers: list[dict[str, Any]] | dict[str, Any], **query: Any):
    route = api.on("POST", "/api/v0/bundles/", reply(200, {"offers": offers}))
    return run(provider.offers(OfferQuery(**query))), route


def test_search_body_is_built_from_the_query(api, run, provider):
    _, route = search(api, run, provider, [], gpu="H100", count=8, region="US")
    assert sent(route) == {
        "verified": {"eq": True}, "rentable": {"eq": True}, "rented": {"eq": False},
        "direct_port_count": {"gte": 1}, "disk_space": {"gte": 32},
        "type": "on-demand", "limit": 64, "order": [["dph_total", "asc"], ["score", "desc"]],
        "allocated_storage": 32,
        "gpu_name": {"in": ["H100 SXM", "H100 PCIE", "H100 NVL"]},
        "num_gpus": {"eq": 8}, "geolocation": {"in": ["US"]},
    }
    assert route.calls.last.request.url.path == "/api/v0/bundles/"


def test_search_without_filters_asks_for_every_gpu():
    payload = search_body(OfferQuery())
    assert not {"gpu_name", "num_gpus", "geolocation", "gpu_ram"} & set(payload)


@pytest.mark.parametrize("gpu,names,ram", [
    ("A100-80GB", ["A100 SXM4", "A100 PCIE"], {"gte": 61440}),
    ("A100-40GB", ["A100 SXM4", "A100 PCIE"], {"lt": 61440}),
    ("RTX4090", ["RTX 4090"], None),
    ("MI300X", ["MI300X"], None),  # not in the table: searched under its own name
])
def test_search_names_and_memory_per_gpu(gpu, names, ram):
    payload = search_body(OfferQuery(gpu=gpu))
    assert payload["gpu_name"] == {"in": names}
    assert payload.get("gpu_ram") == ram


def test_offer_fields_from_the_spec_example(api, run, provider):
    [offer], _ = search(api, run, provider, [example_offer()])
    # The example's figures are placeholders that do not add up: dph_total
    # 0.234567 against dph_base 0.123456 + 0.987654 x 32 GB / 720 = 0.167352.
    [note] = offer.notes
    assert "$0.234567/h (dph_total)" in note and "$0.167352/h" in note
    assert offer.model_dump(exclude={"notes"}) == {
        "provider": "vastai", "instance_type": "4x-Imaginary_RTX_9999",
        "region": "AT", "gpu": "Imaginary RTX 9999", "gpu_count": 4, "gpu_memory_gb": 24,
        "vcpus": 32, "memory_gb": 64, "disk_gb": DEFAULT_DISK_GB,
        # Vast's own quote for the disk asked for, never the sum of its parts.
        "price_per_hour": Decimal("0.234567"),
        "spot": False, "available": True,
        "source": "live", "simulated": False, "disk_price_per_gb_month": Decimal("0.987654"),
        "as_of": None, "offer_id": ASK, "disk_billed_apart": True, "hours_per_month": 720,
        # Bandwidth is billed per GB used: kept apart, never in the hourly price.
        "usage_prices": (
            {"component": "egress", "price": Decimal("0.00456"), "unit": "GB"},
            {"component": "ingress", "price": Decimal("0.00123"), "unit": "GB"}),
    }


def test_prices_are_exact_decimals(api, run, provider):
    [offer], _ = search(api, run, provider, [example_offer(dph_base=1.1, storage_cost=0.36,
                                                           dph_total=1.116)])
    assert offer.price_per_hour == Decimal("1.116") and str(offer.price_per_hour) == "1.116"
    assert str(offer.disk_price_per_gb_month) == "0.36"
    assert offer.notes == ()  # 1.1 + 0.36 * 32 / 720 = 1.116: the quote adds up


def test_the_price_is_vasts_quote_and_a_disagreement_is_noted(api, run, provider):
    # dph_base 2 + storage_cost 0.45 x 32 GB / 720 = 2.02, but Vast quotes 2.5.
    [offer], _ = search(api, run, provider, [example_offer(
        dph_base=2, storage_cost=0.45, dph_total=2.5, inet_up_cost=None, inet_down_cost=None)])
    assert offer.price_per_hour == Decimal("2.5")
    [note] = offer.notes
    assert note.startswith("Vast quotes $2.5/h (dph_total) for this ask with 32 GB of disk, "
                           "but its parts add up to $2.020000/h")
    assert offer.model_dump(mode="json")["notes"] == [note]  # what --json shows
    # The estimate keeps Vast's total; storage_cost only says which part is disk.
    estimate = pricing.estimate(offer, hours=10)
    machine, disk = estimate.breakdown
    assert (machine.price_per_hour, disk.price_per_hour) == (Decimal("2.48"), Decimal("0.02"))
    assert estimate.price_per_hour == Decimal("2.5") and estimate.total == Decimal("25.00")
    assert note in estimate.notes


@pytest.mark.parametrize("quote,noted", [
    (2.02005, False),  # below the 4th decimal vast-cli shows: rounding
    (2.01995, False),
    (2.0202, True),
    (2.0198, True),
])
def test_only_a_gap_beyond_rounding_is_noted(api, run, provider, quote, noted):
    [offer], _ = search(api, run, provider, [example_offer(
        dph_base=2, storage_cost=0.45, dph_total=quote)])
    assert offer.price_per_hour == Decimal(str(quote))
    assert bool(offer.notes) is noted


def test_without_dph_total_the_parts_are_the_price(api, run, provider):
    raw = example_offer(dph_base=1.1, storage_cost=0.36)
    del raw["dph_total"]
    [offer], _ = search(api, run, provider, [raw])
    assert offer.price_per_hour == Decimal("1.116") and offer.notes == ()


def test_the_price_follows_dph_total_of_the_spec_example(api, run, provider):
    # The spec's instance example: dph_base 1.0, storage_cost 0.14933.. for 10 GB
    # gives dph_total 1.0020740740740741 (720-hour months).
    [offer], route = search(api, run, provider, [example_offer(
        dph_base=1.0, storage_cost=0.14933333333333335, dph_total=1.0020740740740741)],
        disk_gb=10)
    assert offer.price_per_hour == Decimal("1.0020740740740741") and offer.notes == ()
    assert offer.disk_gb == 10
    assert sent(route)["allocated_storage"] == 10 and sent(route)["disk_space"] == {"gte": 10}


def test_the_disk_asked_for_is_searched_and_priced(api, run, provider):
    # Vast prices each ask for the allocated_storage searched with.
    [small], _ = search(api, run, provider, [example_offer(dph_base=2, storage_cost=0.18,
                                                           dph_total=2.008)])
    [big], route = search(api, run, provider, [example_offer(dph_base=2, storage_cost=0.18,
                                                             dph_total=2.1)], disk_gb=400)
    assert sent(route)["allocated_storage"] == 400
    assert big.price_per_hour - small.price_per_hour == Decimal("0.18") * (400 - 32) / 720
    assert big.price_per_hour == Decimal("2.1")


def test_the_estimate_lists_bandwidth_by_the_gb(api, run, provider):
    [offer], _ = search(api, run, provider, [example_offer(
        dph_base=2, storage_cost=0.18, dph_total=2.008, inet_up_cost=0.02, inet_down_cost=0)])
    estimate = pricing.estimate(offer, hours=10)
    lines = {line.component: line for line in estimate.breakdown}
    assert set(lines) == {"GPU instance", f"disk ({DEFAULT_DISK_GB} GB)", "egress"}
    egress = lines["egress"]
    assert (egress.unit_price, egress.unit, egress.price_per_hour, egress.total) == (
        Decimal("0.02"), "GB egress", None, None)
    assert estimate.total == pricing.money(offer.price_per_hour * 10)  # not folded in
    assert estimate.unknown == ()
    assert any("$0.02/GB egress" in n for n in estimate.notes)


def test_without_a_storage_price_the_disk_is_unknown(api, run, provider):
    raw = example_offer(dph_base=2)
    del raw["storage_cost"]
    [offer], _ = search(api, run, provider, [raw])
    estimate = pricing.estimate(offer, hours=10)
    assert estimate.unknown == (f"disk ({DEFAULT_DISK_GB} GB)",)
    assert estimate.total is None and estimate.price_per_hour is None


def test_the_base_falls_back_to_the_search_breakdown(api, run, provider):
    raw = example_offer(search={"gpuCostPerHour": 2.5, "diskHour": 0.01, "totalHour": 2.51},
                        dph_total=2.6)
    del raw["dph_base"]
    [offer], _ = search(api, run, provider, [raw])
    assert offer.price_per_hour == Decimal("2.6")
    [note] = offer.notes
    assert "dph_base $2.5/h" in note
    del raw["dph_total"]
    [offer], _ = search(api, run, provider, [raw])
    assert offer.price_per_hour == Decimal("2.5") + Decimal("0.987654") * DEFAULT_DISK_GB / 720


def test_the_estimate_splits_machine_and_disk(api, run, provider):
    [offer], _ = search(api, run, provider, [example_offer(
        dph_base=2, storage_cost=0.45, dph_total=2.02, inet_up_cost=None, inet_down_cost=None)])
    estimate = pricing.estimate(offer, hours=10)
    machine, disk = estimate.breakdown
    assert (machine.component, machine.price_per_hour) == ("GPU instance", Decimal(2))
    assert disk.component == f"disk ({DEFAULT_DISK_GB} GB)"
    # Vast's months are 720 hours, not the usual 730.
    assert disk.price_per_hour == Decimal("0.45") * DEFAULT_DISK_GB / 720 == Decimal("0.02")
    assert estimate.price_per_hour == offer.price_per_hour
    assert estimate.total == pricing.money((Decimal(2) + disk.price_per_hour) * 10)
    assert any("720 h months" in n for n in estimate.notes)
    bigger = pricing.estimate(offer, hours=10, disk_gb=200)
    assert bigger.breakdown[1].component == "disk (200 GB)" and bigger.total > estimate.total


@pytest.mark.parametrize("geolocation,region", [
    ("Texas, US", "US"), ("Texas, US, NA", "US"), ("Atlantis, AT", "AT"), ("SE", "SE"),
    ("California, United States", "unknown"), (None, "unknown"),
])
def test_region_is_the_country_code(api, run, provider, geolocation, region):
    [offer], _ = search(api, run, provider, [example_offer(geolocation=geolocation)])
    assert offer.region == region


def test_offers_are_filtered_by_gpu_count_and_region(api, run, provider):
    asks = [
        example_offer(id=1, gpu_name="A100 SXM4", gpu_ram=81920, num_gpus=8,
                      geolocation="Ohio, US"),
        example_offer(id=2, gpu_name="A100 SXM4", gpu_ram=40960, num_gpus=8,
                      geolocation="Ohio, US"),
        example_offer(id=3, gpu_name="A100 PCIE", gpu_ram=81920, num_gpus=4,
                      geolocation="Ohio, US"),
        example_offer(id=4, gpu_name="A100 PCIE", gpu_ram=81920, num_gpus=8,
                      geolocation="Oslo, NO"),
    ]
    offers, _ = search(api, run, provider, asks, gpu="A100-80GB", count=8, region="US")
    assert [(o.offer_id, o.gpu, o.instance_type) for o in offers] == [
        ("1", "A100-80GB", "8x-A100_SXM4")]


def test_the_spec_example_shape_of_one_object_is_accepted(api, run, provider):
    offers, _ = search(api, run, provider, example_offer())
    assert [o.offer_id for o in offers] == [ASK]


@pytest.mark.parametrize("mutate", [
    lambda o: o.pop("id"),
    lambda o: o.update(num_gpus="8"),
    lambda o: o.update(gpu_name=None),
    lambda o: o.update(dph_base="cheap"),
    lambda o: o.update(dph_base=-1),
    lambda o: o.update(storage_cost=True),
])
def test_malformed_offers_raise_validation_error(api, run, provider, mutate):
    raw = example_offer()
    mutate(raw)
    with pytest.raises(APIResponseValidationError):
        search(api, run, provider, [raw])


def test_a_reply_without_offers_is_invalid(api, run, provider):
    api.on("POST", "/api/v0/bundles/", reply(200, {"success": True}))
    with pytest.raises(APIResponseValidationError):
        run(provider.offers(OfferQuery()))


def test_spot_offers_are_empty_without_a_request(api, run, provider):
    route = api.on("POST", "/api/v0/bundles/", reply(200, {"offers": []}))
    assert run(provider.offers(OfferQuery(spot=True))) == []
    assert route.call_count == 0


def test_live_names_follow_the_catalog_naming():
    catalog = load_catalogs()["vastai"]
    assert instance_type_name(8, "H100 SXM") in {t.name for t in catalog.instance_types}
    # Every GPU spelling in the catalog is one the search asks for.
    for row in catalog.instance_types:
        vast_name = row.name.split("-", 1)[1].rsplit("-", 2)[0].replace("_", " ")
        assert vast_name in VAST_GPU_NAMES[row.gpu], row.name
