"""Verda adapter, contract-tested (offers and create): respx answers at the
HTTP transport (the OAuth2 token endpoint included) with the SDK and gpuhunt
bodies in tests/fixtures/verda, and flows run through the real driver (retries,
auth). No OpenAPI document exists for Verda: request bodies are checked against
the bodies the official Python SDK builds. Shared helpers and fixtures live in
tests/adapters/_verda_support.py."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from decimal import Decimal

import httpx
import pytest
from pydantic import SecretStr

from gpucloud.transport.http import Session
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.verda import VerdaProvider
from gpucloud.catalog.bundled import InstanceType, ProviderCatalog
from gpucloud.config.credentials import Credential
from gpucloud.errors import (
    APIResponseValidationError,
    APITimeoutError,
    ConfigurationError,
    InternalServerError,
    SpecError,
)
from gpucloud.models import Instance, InstanceStatus
from tests.adapters._verda_support import (  # noqa: F401 (fixtures)
    API,
    CLIENT_ID,
    CLIENT_SECRET,
    INSTANCE_ID,
    KEY_ID,
    SSH_KEYS,
    api_fixture,
    body,
    by_key,
    error,
    launch_routes,
    make_spec,
    offer_routes,
    provider_fixture,
    reply,
    run_fixture,
)

# -- offers ------------------------------------------------------------------------



def test_offers_join_prices_and_availability(api, run, provider):
    types, avail, _ = offer_routes(api)
    offers = by_key(run(provider.offers(OfferQuery())))
    a6000 = offers[("2A6000.20V", "FIN-01")]
    assert a6000.model_dump() == {
        "provider": "verda", "instance_type": "2A6000.20V", "region": "FIN-01",
        "gpu": "RTX-A6000", "gpu_count": 2, "gpu_memory_gb": 48, "vcpus": 20, "memory_gb": 120,
        "disk_gb": None, "price_per_hour": Decimal("1.98"), "spot": False, "available": True,
        "source": "live", "simulated": False, "disk_price_per_gb_month": None, "as_of": None,
        "offer_id": None, "disk_billed_apart": False, "hours_per_month": None, "usage_prices": (),
        "notes": (),
    }
    v100 = offers[("1V100.6V", "FIN-01")]
    assert isinstance(v100.price_per_hour, Decimal) and str(v100.price_per_hour) == "0.89"
    assert v100.disk_gb == 225 and v100.gpu == "V100" and v100.gpu_memory_gb == 16
    assert types.calls.last.request.url.params["currency"] == "usd"
    params = avail.calls.last.request.url.params
    assert params["is_spot"] == "false" and params["isSpot"] == "false"


def test_offers_skip_cpu_types(api, run, provider):
    offer_routes(api)
    offers = run(provider.offers(OfferQuery()))
    assert offers and all(o.gpu_count > 0 for o in offers)
    assert "CPU.120V.480G" not in {o.instance_type for o in offers}


def test_a_priced_type_with_no_capacity_anywhere_is_offered_unavailable(api, run, provider):
    # 1H100.80S.30V is priced in /instance-types, listed in no location of
    # /instance-availability and not named in providers/verda.toml: it is still
    # an offer, unavailable, in every location /locations lists.
    _, _, locations = offer_routes(api)
    offers = by_key(run(provider.offers(OfferQuery())))
    h100 = {k: o for k, o in offers.items() if k[0] == "1H100.80S.30V"}
    assert sorted(h100) == [("1H100.80S.30V", "FIN-01"), ("1H100.80S.30V", "FIN-02"),
                            ("1H100.80S.30V", "ICE-01")]
    assert all(o.available is False and o.source == "live" for o in h100.values())
    assert h100[("1H100.80S.30V", "FIN-02")].price_per_hour == Decimal("3.95")
    assert h100[("1H100.80S.30V", "FIN-02")].gpu == "H100"
    assert locations.call_count == 1
    # Spot: the same, at Verda's spot price.
    spot = by_key(run(provider.offers(OfferQuery(spot=True, region="FIN-02"))))
    assert spot[("1H100.80S.30V", "FIN-02")].price_per_hour == Decimal("1.70")
    assert spot[("1H100.80S.30V", "FIN-02")].available is False


def test_locations_are_asked_for_only_when_a_type_has_nowhere_to_be(api, run, provider):
    _, _, locations = offer_routes(api)
    offers = run(provider.offers(OfferQuery(gpu="V100")))
    assert [(o.instance_type, o.region, o.available) for o in offers] == [
        ("1V100.6V", "FIN-01", True)]
    assert locations.call_count == 0


def test_malformed_locations_raise_validation_error(api, run, provider):
    offer_routes(api)
    api.on("GET", "/locations", reply(200, [{"name": "Finland 1"}]))
    with pytest.raises(APIResponseValidationError):
        run(provider.offers(OfferQuery()))


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
    _, avail, _ = offer_routes(api)
    offers = by_key(run(provider.offers(OfferQuery(spot=True))))
    assert offers[("1V100.6V", "FIN-01")].price_per_hour == Decimal("0.25")
    assert offers[("2A6000.20V", "FIN-01")].price_per_hour == Decimal("0.70")
    assert all(o.spot for o in offers.values())
    assert avail.calls.last.request.url.params["is_spot"] == "true"


@pytest.mark.parametrize("query,expected", [
    (OfferQuery(gpu="V100"), {("1V100.6V", "FIN-01")}),
    (OfferQuery(count=2), {("2A6000.20V", "FIN-01")}),
    (OfferQuery(gpu="V100", count=2), set()),
    (OfferQuery(region="ICE-01"), {("1H100.80S.30V", "ICE-01")}),  # unavailable there
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
    api.on("GET", f"/instances/{INSTANCE_ID}", reply(500, error("internal", "Server error")))
    instance = run(provider.create(make_spec()))
    assert instance.id == INSTANCE_ID and instance.status is InstanceStatus.PENDING
    assert instance.launch_id == "gc-0123456789" and instance.region == "FIN-01"
    assert instance.price_per_hour == Decimal("0.89")


def test_create_whose_reply_names_an_instance_verda_then_404s_is_not_created(api, run, provider):
    """The reply named a UUID Verda then has no instance for: not the machine
    (the launcher looks for the launch id instead)."""
    api.on("GET", "/sshkeys", reply(200, SSH_KEYS))
    api.on("POST", "/instances", reply(202, text=INSTANCE_ID))
    api.on("GET", f"/instances/{INSTANCE_ID}", reply(404, error("not_found", "Not found")))
    with pytest.raises(APIResponseValidationError, match="does not exist"):
        run(provider.create(make_spec()))


@pytest.mark.parametrize("reply_", [
    reply(202, text=""), reply(202, text="two words"), reply(202, {"no": "id"}),
    # Not an instance id (ids are UUIDs): an error page's word, a number, a bool.
    reply(202, text="OK"), reply(202, text="<html>"), reply(202, text="12345"),
    reply(202, True), reply(202, "deadc0de-a5d2-4972-ae4e"),
    reply(202, text="deadc0de-a5d2-4972-ae4e-d429115d055bX"),
])
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
