"""Vast.ai adapter, contract-tested: respx answers at the HTTP transport with
bodies derived from the official OpenAPI document (tests/fixtures/vastai),
every request the adapter sends is validated against the trimmed spec and
checked for the Bearer key, and flows run through the real driver (retries,
pacing, auth)."""

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

from gpucloud import pricing
from gpucloud._http import DEFAULT_POLICY, Session
from gpucloud.adapters.base import OfferQuery
from gpucloud.adapters.vastai import (
    DEFAULT_DISK_GB,
    VAST_GPU_NAMES,
    VastProvider,
    instance_type_name,
    search_body,
)
from gpucloud.catalog import load_catalogs
from gpucloud.credentials import Credential
from gpucloud.errors import (
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
    SpecError,
)
from gpucloud.models import InstanceSpec, InstanceStatus, Offer
from tests.openapi_check import request_errors, validate_request, validate_response

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "vastai"
SPEC = FIXTURES / "openapi.json"
API = "https://console.vast.ai"
KEY = "vast-secret-key-123"
ASK = "12345678"
NEW = "1234568"  # create_instance_200's new_contract
SHOWN = "883"  # show_instance_200's id
LIST = "/api/v1/instances/"
KEY_ON_FILE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOnFile me@desk"
NEW_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINewKey me@laptop"


def body(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def example_offer(**changes: Any) -> dict[str, Any]:
    [offer] = body("search_offers_200_wrapped_list")["offers"]
    offer.update(changes)
    return offer


def show(instance_id: str = SHOWN, **changes: Any) -> dict[str, Any]:
    data = body("show_instance_200_from_schema_examples")
    data["instances"].update(id=int(instance_id), **changes)
    return data


def page(ids: list[int], token: str | None) -> dict[str, Any]:
    data = body("list_instances_v1_200_from_schema_examples")
    [template] = data["instances"]
    data["instances"] = [dict(copy.deepcopy(template), id=i) for i in ids]
    data["next_token"] = token
    return data


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
def provider() -> VastProvider:
    return VastProvider(load_catalogs()["vastai"], Credential("vastai", SecretStr(KEY), "test"))


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def run(provider, sleeps):
    session = Session(provider, sleep=sleeps.append)
    yield session.run
    session.close()


def sent(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)


def make_spec(**changes: Any) -> InstanceSpec:
    offer = Offer(provider="vastai", instance_type="8x-H100_SXM", region="US",
                  gpu="H100", gpu_count=8, disk_gb=DEFAULT_DISK_GB,
                  price_per_hour=Decimal("17.60"), disk_price_per_gb_month=Decimal("0.15"),
                  source="live", available=True, offer_id=ASK)
    fields: dict[str, Any] = {"offer": offer, "launch_id": "lid-7f3a9c",
                                  "name": "gpucloud-h100-lid-7f3a9c", "image": "vastai/pytorch"}
    fields.update(changes)
    return InstanceSpec(**fields)


# -- the trimmed spec --------------------------------------------------------------


def search_request(payload: dict[str, Any]) -> httpx.Request:
    return httpx.Request("POST", f"{API}/api/v0/bundles/", json=payload,
                         headers={"Authorization": "Bearer x"})


@pytest.mark.parametrize("kind", ["on-demand", "ondemand", "bid", "reserved"])
def test_spec_accepts_both_on_demand_spellings(kind):
    validate_request(SPEC, search_request({"type": kind, "limit": 5}))


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
    request = httpx.Request("PUT", f"{API}/api/v0/asks/{ASK}/", headers={"Authorization": "Bearer x"},
                            json={"image": "vastai/pytorch", "env": env})
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
    assert offer.model_dump() == {
        "provider": "vastai", "instance_type": "4x-Imaginary_RTX_9999",
        "region": "AT", "gpu": "Imaginary RTX 9999", "gpu_count": 4, "gpu_memory_gb": 24,
        "vcpus": 32, "memory_gb": 64, "disk_gb": DEFAULT_DISK_GB,
        # dph_base, the machine alone; dph_total (0.234567) also holds the disk.
        "price_per_hour": Decimal("0.123456"), "spot": False, "available": True,
        "source": "live", "simulated": False, "disk_price_per_gb_month": Decimal("0.987654"),
        "as_of": None, "offer_id": ASK,
    }


def test_prices_are_exact_decimals(api, run, provider):
    [offer], _ = search(api, run, provider, [example_offer(dph_base=1.1, storage_cost=0.3)])
    assert offer.price_per_hour == Decimal("1.1") and str(offer.price_per_hour) == "1.1"
    assert str(offer.disk_price_per_gb_month) == "0.3"


def test_price_falls_back_to_the_search_breakdown(api, run, provider):
    raw = example_offer(search={"gpuCostPerHour": 2.5, "diskHour": 0.01, "totalHour": 2.51})
    del raw["dph_base"]
    [offer], _ = search(api, run, provider, [raw])
    assert offer.price_per_hour == Decimal("2.5")


def test_the_estimate_adds_the_disk(api, run, provider):
    [offer], _ = search(api, run, provider, [example_offer(dph_base=2, storage_cost=0.15)])
    estimate = pricing.estimate(offer, hours=10)
    machine, disk = estimate.breakdown
    assert (machine.component, machine.price_per_hour) == ("GPU instance", Decimal(2))
    assert disk.component == f"disk ({DEFAULT_DISK_GB} GB)"
    assert disk.price_per_hour == Decimal("0.15") * DEFAULT_DISK_GB / pricing.HOURS_PER_MONTH
    assert estimate.total == pricing.money((Decimal(2) + disk.price_per_hour) * 10)
    assert "storage is billed on top of the machine price" in estimate.notes
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
        example_offer(id=1, gpu_name="A100 SXM4", gpu_ram=81920, num_gpus=8, geolocation="Ohio, US"),
        example_offer(id=2, gpu_name="A100 SXM4", gpu_ram=40960, num_gpus=8, geolocation="Ohio, US"),
        example_offer(id=3, gpu_name="A100 PCIE", gpu_ram=81920, num_gpus=4, geolocation="Ohio, US"),
        example_offer(id=4, gpu_name="A100 PCIE", gpu_ram=81920, num_gpus=8, geolocation="Oslo, NO"),
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


# -- create ------------------------------------------------------------------------


def create_routes(api, *answers: Any, shown: dict[str, Any] | None = None):
    put = api.on("PUT", f"/api/v0/asks/{ASK}/",
                 *(answers or (reply(200, body("create_instance_200_from_schema_examples")),)))
    get = api.on("GET", f"/api/v0/instances/{NEW}/", reply(200, shown or show(
        NEW, actual_status="loading", label="gpucloud:lid-7f3a9c gpucloud-h100-lid-7f3a9c")))
    return put, get


def test_create_rents_the_ask_with_exactly_this_body(api, run, provider):
    put, get = create_routes(api)
    instance = run(provider.create(make_spec()))
    assert sent(put) == {
        "image": "vastai/pytorch", "disk": DEFAULT_DISK_GB,
        "label": "gpucloud:lid-7f3a9c gpucloud-h100-lid-7f3a9c",
        "env": {"GPUCLOUD_LAUNCH_ID": "lid-7f3a9c"}, "runtype": "ssh_direct",
    }
    assert put.call_count == 1 and get.call_count == 1
    assert (instance.id, instance.launch_id, instance.name, instance.status) == (
        NEW, "lid-7f3a9c", "gpucloud-h100-lid-7f3a9c", InstanceStatus.PENDING)
    # No key given: nothing registered.
    assert [r.url.path for r in api.requests] == [f"/api/v0/asks/{ASK}/", f"/api/v0/instances/{NEW}/"]


def test_create_with_disk_deadline_and_default_image(api, run, provider):
    put, _ = create_routes(api)
    deadline = datetime(2026, 12, 1, 6, 30, 15, 999, tzinfo=timezone.utc)
    run(provider.create(make_spec(disk_gb=200, shutdown_at=deadline, image=None)))
    payload = sent(put)
    assert payload["disk"] == 200
    assert payload["image"] == load_catalogs()["vastai"].default_image == "vastai/pytorch"
    assert payload["label"] == ("gpucloud:lid-7f3a9c shutdown:2026-12-01T06:30:15Z "
                                "gpucloud-h100-lid-7f3a9c")
    assert payload["env"] == {"GPUCLOUD_LAUNCH_ID": "lid-7f3a9c",
                              "GPUCLOUD_SHUTDOWN_AT": "2026-12-01T06:30:15Z"}


def test_create_registers_a_new_ssh_key_first(api, run, provider):
    keys = api.on("GET", "/api/v0/ssh/", reply(200, [
        {"id": 1, "user_id": 2, "key": KEY_ON_FILE, "created_at": "2026-01-01T00:00:00Z",
         "deleted_at": None}]))
    add = api.on("POST", "/api/v0/ssh/", reply(200, body("create_ssh_key_200_from_schema_examples")))
    create_routes(api)
    run(provider.create(make_spec(ssh_public_key=NEW_KEY + "\n")))
    assert keys.call_count == 1 and add.call_count == 1
    assert sent(add) == {"ssh_key": NEW_KEY}
    assert [r.url.path for r in api.requests] == [
        "/api/v0/ssh/", "/api/v0/ssh/", f"/api/v0/asks/{ASK}/", f"/api/v0/instances/{NEW}/"]


@pytest.mark.parametrize("listing", [
    [{"id": 1, "key": KEY_ON_FILE.replace("me@desk", "other comment")}],
    {"ssh_keys": [{"id": 1, "public_key": KEY_ON_FILE}]},  # vast-cli reads an object
])
def test_create_reuses_a_registered_ssh_key(api, run, provider, listing):
    api.on("GET", "/api/v0/ssh/", reply(200, listing))
    add = api.on("POST", "/api/v0/ssh/", reply(500))
    put, _ = create_routes(api)
    run(provider.create(make_spec(ssh_public_key=KEY_ON_FILE)))
    assert add.call_count == 0 and put.call_count == 1


def test_a_failed_key_registration_stops_before_renting(api, run, provider):
    api.on("GET", "/api/v0/ssh/", reply(200, []))
    api.on("POST", "/api/v0/ssh/", reply(400, {"success": False, "error": "no_ssh_key",
                                               "msg": "No ssh key provided"}))
    put, _ = create_routes(api)
    with pytest.raises(BadRequestError):
        run(provider.create(make_spec(ssh_public_key=NEW_KEY)))
    assert put.call_count == 0


@pytest.mark.parametrize("changes,message", [
    ({"offer_id": None}, "Vast offers must come from a live search"),
    ({"offer_id": "../instances/1"}, "not a Vast ask id"),
])
def test_create_refuses_offers_without_an_ask_id(api, run, provider, changes, message):
    _put, _ = create_routes(api)
    spec = make_spec()
    spec = spec.model_copy(update={"offer": spec.offer.model_copy(update=changes)})
    with pytest.raises(SpecError, match=message):
        run(provider.create(spec))
    assert api.requests == []


def test_create_reports_the_machine_even_if_the_read_back_fails(api, run, provider):
    put = api.on("PUT", f"/api/v0/asks/{ASK}/",
                 reply(200, body("create_instance_200_from_schema_examples")))
    get = api.on("GET", f"/api/v0/instances/{NEW}/",
                 reply(404, body("destroy_instance_404_from_schema_examples")))
    deadline = datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    instance = run(provider.create(make_spec(shutdown_at=deadline)))
    assert put.call_count == 1 and get.call_count == 1
    assert (instance.id, instance.launch_id, instance.status, instance.shutdown_at) == (
        NEW, "lid-7f3a9c", InstanceStatus.PENDING, deadline)
    assert instance.price_per_hour == Decimal("17.60") and instance.region == "US"


def test_create_500_is_sent_once(api, run, provider):
    put, get = create_routes(api, reply(500, {"success": False, "msg": "internal error"}))
    with pytest.raises(InternalServerError) as info:
        run(provider.create(make_spec()))
    assert put.call_count == 1 and get.call_count == 0
    assert info.value.status_code == 500


def test_create_read_timeout_is_sent_once(api, run, provider):
    put, get = create_routes(api, httpx.ReadTimeout("timed out"))
    with pytest.raises(APITimeoutError) as info:
        run(provider.create(make_spec()))
    assert info.value.sent is True and put.call_count == 1 and get.call_count == 0


def test_create_plain_text_429_is_retried(api, run, provider, sleeps):
    put, _ = create_routes(api, reply(429, text="API requests too frequent"),
                           reply(200, body("create_instance_200_from_schema_examples")))
    assert run(provider.create(make_spec())).id == NEW
    assert put.call_count == 2 and sleeps


@pytest.mark.parametrize("answer", [{"success": True}, {"success": True, "new_contract": "7"},
                                    {"success": True, "new_contract": True}])
def test_create_reply_without_new_contract_is_invalid(api, run, provider, answer):
    create_routes(api, reply(200, answer))
    with pytest.raises(APIResponseValidationError, match="lid-7f3a9c"):
        run(provider.create(make_spec()))


def test_create_200_with_success_false_is_an_error(api, run, provider):
    create_routes(api, reply(200, {"success": False, "error": "invalid_price",
                                   "msg": "Please set a bid price >= 0.001."}))
    with pytest.raises(BadRequestError, match="bid price"):
        run(provider.create(make_spec()))


def test_launches_are_paced(api, run, provider, sleeps):
    create_routes(api)
    run(provider.create(make_spec()))
    run(provider.create(make_spec()))
    assert max(sleeps) > 4  # create's 4.5 s threshold


# -- list / get / delete / stop / start / verify ----------------------------------------


def test_list_follows_next_token(api, run, provider):
    route = api.on("GET", LIST, reply(200, page([1, 2], "tok-1")), reply(200, page([3], "tok-2")),
                   reply(200, page([4], None)))
    instances = run(provider.list_instances())
    assert [i.id for i in instances] == ["1", "2", "3", "4"]
    params = [dict(call.request.url.params) for call in route.calls]
    assert [p.get("after_token") for p in params] == [None, "tok-1", "tok-2"]
    assert all(p["limit"] == "25" for p in params)


def test_list_stops_at_the_page_cap(api, run, provider):
    count = iter(range(10_000))
    api.on("GET", LIST, lambda request: httpx.Response(
        200, json=page([next(count)], f"tok-{next(count)}")))
    with pytest.raises(APIResponseValidationError, match="50 pages"):
        run(provider.list_instances())
    assert len(api.requests) == 50


def test_list_refuses_a_token_that_does_not_advance(api, run, provider):
    route = api.on("GET", LIST, reply(200, page([1], "same")))
    with pytest.raises(APIResponseValidationError, match="next_token"):
        run(provider.list_instances())
    assert route.call_count == 2


def test_list_maps_fields(api, run, provider):
    api.on("GET", LIST, reply(200, page([312], None)))
    [instance] = run(provider.list_instances())
    assert instance.model_dump(exclude={"ref"}) == {
        "provider": "vastai", "id": "312", "name": "ML Training Job 2025",
        "status": InstanceStatus.RUNNING, "provider_status": "running", "gpu": "RTX4090",
        "gpu_count": 1, "instance_type": "1x-RTX_4090",
        "region": None,  # "California, United States" has no country code
        "price_per_hour": Decimal("0.8021"), "ip": "192.0.2.45",
        "created_at": datetime.fromtimestamp(1668804745.1223178, timezone.utc),
        "shutdown_at": None, "launch_id": None, "simulated": False,
    }


def test_launch_id_and_deadline_read_back_from_label_and_env(api, run, provider):
    data = page([1, 2, 3], None)
    data["instances"][0]["label"] = "gpucloud:lid-1 shutdown:2026-12-01T06:30:15Z my box"
    # Label edited in the console: the environment still has the launch values.
    data["instances"][1].update(label="renamed", extra_env=[
        ["GPUCLOUD_LAUNCH_ID", "lid-2"], ["GPUCLOUD_SHUTDOWN_AT", "2026-12-02T00:00:00Z"]])
    data["instances"][2]["label"] = "gpucloud:lid-3 shutdown:tomorrow"
    api.on("GET", LIST, reply(200, data))
    first, second, third = run(provider.list_instances())
    assert (first.launch_id, first.name) == ("lid-1", "my box")
    assert first.shutdown_at == datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    assert (second.launch_id, second.name) == ("lid-2", "renamed")
    assert second.shutdown_at == datetime(2026, 12, 2, tzinfo=timezone.utc)
    assert (third.launch_id, third.shutdown_at, third.name) == ("lid-3", None, None)


def test_list_rejects_an_instance_without_id(api, run, provider):
    data = page([1], None)
    del data["instances"][0]["id"]
    api.on("GET", LIST, reply(200, data))
    with pytest.raises(APIResponseValidationError):
        run(provider.list_instances())


def test_get_reads_the_one_object_under_instances(api, run, provider):
    api.on("GET", f"/api/v0/instances/{SHOWN}/", reply(200, show()))
    instance = run(provider.get(SHOWN))
    assert (instance.id, instance.region, instance.gpu, instance.ip) == (
        SHOWN, "US", "RTX-A5000", "63.135.50.11")
    assert instance.price_per_hour == Decimal("1.0020740740740741")


def test_get_of_a_null_instance_is_not_found(api, run, provider):
    api.on("GET", f"/api/v0/instances/{SHOWN}/", reply(200, {"instances": None}))
    with pytest.raises(NotFoundError):
        run(provider.get(SHOWN))


def test_get_refuses_a_non_numeric_id(api, run, provider):
    with pytest.raises(SpecError):
        run(provider.get("a/b"))
    assert api.requests == []


@pytest.mark.parametrize("actual,intended,message,status", [
    (None, "running", None, InstanceStatus.PENDING),
    ("created", "running", None, InstanceStatus.PENDING),
    ("loading", "running", None, InstanceStatus.PENDING),
    ("restarting", "running", None, InstanceStatus.PENDING),
    ("rebooting", "running", None, InstanceStatus.PENDING),
    ("created", "running", "Error: OCI runtime create failed: x", InstanceStatus.FAILED),
    ("running", "running", None, InstanceStatus.RUNNING),
    ("running", "stopped", None, InstanceStatus.STOPPING),
    ("stopped", "stopped", None, InstanceStatus.STOPPED),
    ("stopped", "running", None, InstanceStatus.STOPPED),
    ("exited", "stopped", None, InstanceStatus.STOPPED),
    ("exited", "running", None, InstanceStatus.FAILED),
    ("offline", "running", None, InstanceStatus.FAILED),
    ("unknown", "running", None, InstanceStatus.FAILED),
    ("frozen", "running", None, InstanceStatus.FAILED),
    ("hibernating", "running", None, InstanceStatus.UNKNOWN),  # new: no crash
])
def test_get_maps_every_status(api, run, provider, actual, intended, message, status):
    api.on("GET", f"/api/v0/instances/{SHOWN}/", reply(200, show(
        actual_status=actual, intended_status=intended, status_msg=message)))
    instance = run(provider.get(SHOWN))
    assert (instance.status, instance.provider_status) == (status, actual)


def test_delete_destroys_by_id(api, run, provider):
    route = api.on("DELETE", f"/api/v0/instances/{SHOWN}/",
                   reply(200, body("destroy_instance_200_from_schema_examples")))
    assert run(provider.delete(SHOWN)) is None
    assert route.call_count == 1 and route.calls.last.request.content == b""


def test_delete_is_retried_after_a_5xx(api, run, provider):
    route = api.on("DELETE", f"/api/v0/instances/{SHOWN}/", reply(503, text="busy"),
                   reply(200, body("destroy_instance_200_from_schema_examples")))
    run(provider.delete(SHOWN))
    assert route.call_count == 2


@pytest.mark.parametrize("op,state,actual,status", [
    ("stop", "stopped", "exited", InstanceStatus.STOPPED),
    ("start", "running", "loading", InstanceStatus.PENDING),
])
def test_stop_and_start_set_the_state(api, run, provider, op, state, actual, status):
    put = api.on("PUT", f"/api/v0/instances/{SHOWN}/", reply(200, {"success": True}))
    api.on("GET", f"/api/v0/instances/{SHOWN}/", reply(200, show(
        actual_status=actual, intended_status=state)))
    instance = run(getattr(provider, op)(SHOWN))
    assert sent(put) == {"state": state}
    assert instance.status == status


def test_verify_reads_one_instance(api, run, provider):
    route = api.on("GET", LIST, reply(200, page([], None)))
    assert run(provider.verify()) is None
    assert dict(route.calls.last.request.url.params) == {"limit": "1"}


def test_verify_with_a_bad_key(api, run, provider):
    api.on("GET", LIST, reply(401, body("show_instance_401")))
    with pytest.raises(AuthenticationError):
        run(provider.verify())


# -- errors --------------------------------------------------------------------------


ERRORS = [
    ("create_instance_400_from_schema_examples", 400, "create", BadRequestError),
    ("create_instance_403_from_schema_examples", 403, "create", PermissionDeniedError),
    ("create_instance_404_from_schema_examples", 404, "create", InsufficientCapacityError),
    ("create_instance_410_from_schema_examples", 410, "create", InsufficientCapacityError),
    ("create_instance_429_from_schema_examples", 429, "create", RateLimitError),
    ("destroy_instance_400_from_schema_examples", 400, "delete", BadRequestError),
    ("destroy_instance_404_from_schema_examples", 404, "delete", NotFoundError),
    ("destroy_instance_429_from_schema_examples", 429, "delete", RateLimitError),
    ("show_instance_401", 401, "get", AuthenticationError),
]


def fail_with(api, run, provider, op: str, *responses: Any) -> BaseException:
    if op == "create":
        create_routes(api, *responses)
        flow = provider.create(make_spec())
    elif op == "delete":
        api.on("DELETE", f"/api/v0/instances/{SHOWN}/", *responses)
        flow = provider.delete(SHOWN)
    elif op == "list":
        api.on("GET", LIST, *responses)
        flow = provider.list_instances()
    elif op == "offers":
        api.on("POST", "/api/v0/bundles/", *responses)
        flow = provider.offers(OfferQuery())
    else:
        api.on("GET", f"/api/v0/instances/{SHOWN}/", *responses)
        flow = provider.get(SHOWN)
    with pytest.raises(Exception) as info:
        run(flow)
    return info.value


@pytest.mark.parametrize("name,status,op,cls", ERRORS)
def test_every_example_error_body(api, run, provider, name, status, op, cls):
    payload = body(name)
    exc = fail_with(api, run, provider, op, reply(status, payload))
    assert type(exc) is cls
    assert exc.status_code == status and exc.provider == "vastai"
    assert exc.provider_code == payload.get("error")
    assert (payload.get("msg") or payload.get("detail")) in str(exc)
    if cls is RateLimitError:
        assert exc.retry_after is None  # Vast sends no Retry-After


def test_search_404_with_invalid_user_key_is_an_auth_error(api, run, provider):
    # The search's documented answer to a bad key: a 404 with only this text.
    exc = fail_with(api, run, provider, "offers", reply(404, {"msg": "Invalid user key"}))
    assert type(exc) is AuthenticationError


def test_any_410_on_create_is_the_capacity_race(api, run, provider):
    exc = fail_with(api, run, provider, "create", reply(410, {"success": False,
                                                              "msg": "no longer available"}))
    assert type(exc) is InsufficientCapacityError


def test_a_bad_pagination_token_is_a_bad_request_not_a_bad_key(api, run, provider):
    exc = fail_with(api, run, provider, "list", reply(400, {
        "success": False, "error": "invalid_token", "msg": "Invalid pagination token"}))
    assert type(exc) is BadRequestError and exc.provider_code == "invalid_token"


@pytest.mark.parametrize("payload", [
    {"success": False, "msg": "Insufficient credit"},
    {"success": False, "error": "insufficient_balance", "msg": "Not enough"},
])
def test_insufficient_credit_moves_failover_on_with_a_hint(api, run, provider, payload):
    exc = fail_with(api, run, provider, "create", reply(402, payload))
    assert type(exc) is QuotaExceededError  # per-provider, like quota: another cloud may take it
    assert "cloud.vast.ai/billing" in exc.hint


def test_no_such_instance_is_not_found(api, run, provider):
    exc = fail_with(api, run, provider, "delete", reply(400, {
        "success": False, "error": "no_such_instance", "msg": "Instance with that ID does not exist."}))
    assert type(exc) is NotFoundError


def test_unknown_code_keeps_code_and_message(api, run, provider):
    exc = fail_with(api, run, provider, "create", reply(418, {
        "success": False, "error": "teapot", "message": "A new failure."}))
    assert type(exc) is APIStatusError
    assert exc.provider_code == "teapot" and "A new failure." in str(exc)


def test_plain_text_429_is_retried_with_backoff(api, run, provider, sleeps):
    route = api.on("GET", LIST, reply(429, text="API requests too frequent"),
                   reply(200, page([1], None)))
    assert [i.id for i in run(provider.list_instances())] == ["1"]
    assert route.call_count == 2 and any(s > 0 for s in sleeps)


def test_429_exhausted_is_a_rate_limit_error(api, run, provider):
    exc = fail_with(api, run, provider, "list", reply(
        429, text="API requests too frequent: endpoint threshold=2.0"))
    assert type(exc) is RateLimitError and exc.retry_after is None
    assert "API requests too frequent" in str(exc)
    assert len(api.requests) == DEFAULT_POLICY.max_retries + 1


def test_non_json_502_is_a_server_error(api, run, provider):
    exc = fail_with(api, run, provider, "get", reply(502, text="<html>502 Bad Gateway</html>"))
    assert type(exc) is InternalServerError and exc.provider_code is None
    assert len(api.requests) == DEFAULT_POLICY.max_retries + 1


@pytest.mark.parametrize("response", [
    reply(401, body("show_instance_401")),
    reply(400, {"success": False, "error": "invalid_args", "msg": f"bad key {KEY}"}),
    reply(500, text=f"trace: Authorization: Bearer {KEY}"),
    reply(429, {"detail": f"too frequent for {KEY}"}),
    reply(200, {"nope": KEY}),
    httpx.ReadTimeout("timed out"),
])
def test_the_api_key_never_appears_in_errors(api, run, provider, response):
    exc = fail_with(api, run, provider, "get", response)
    visible = " ".join([str(exc), repr(exc), str(getattr(exc, "hint", "")), repr(exc.args),
                        repr(vars(exc).get("request"))])
    assert KEY not in visible
    assert KEY not in repr(provider) and KEY not in repr(provider.credential)
