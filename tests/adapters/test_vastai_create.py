"""Vast.ai adapter, contract-tested (create):
respx answers at the HTTP transport with bodies derived from the official
OpenAPI document (tests/fixtures/vastai), every request the adapter sends is
validated against the trimmed spec and checked for the Bearer key, and flows
run through the real driver (retries, pacing, auth). Shared helpers and
fixtures live in tests/adapters/_vastai_support.py."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import httpx
import pytest

from gpucloud.providers.vastai._wire import DEFAULT_DISK_GB
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.errors import (
    APIResponseValidationError,
    APITimeoutError,
    BadRequestError,
    InternalServerError,
    SpecError,
)
from gpucloud.providers.vastai._guard import onstart
from gpucloud.models import InstanceStatus
from tests.adapters._vastai_support import (  # noqa: F401 (fixtures)
    ASK,
    KEY_ON_FILE,
    NEW,
    NEW_KEY,
    api_fixture,
    body,
    create_routes,
    make_spec,
    provider_fixture,
    reply,
    run_fixture,
    sent,
    sleeps_fixture,
)

# -- create ------------------------------------------------------------------------



def test_create_rents_the_ask_with_exactly_this_body(api, run, provider):
    put, get = create_routes(api)
    instance = run(provider.create(make_spec()))
    assert sent(put) == {
        "image": "vastai/pytorch", "disk": DEFAULT_DISK_GB,
        "label": "gpucloud:lid-7f3a9c gpucloud-h100-lid-7f3a9c",
        "env": {"GPUCLOUD_LAUNCH_ID": "lid-7f3a9c"}, "runtype": "ssh_direc ssh_proxy",
        "onstart": onstart(),
    }
    assert put.call_count == 1 and get.call_count == 1
    assert (instance.id, instance.launch_id, instance.name, instance.status) == (
        NEW, "lid-7f3a9c", "gpucloud-h100-lid-7f3a9c", InstanceStatus.PENDING)
    # No key given: nothing registered.
    assert [r.url.path for r in api.requests] == [f"/api/v0/asks/{ASK}/",
                                                  f"/api/v0/instances/{NEW}/"]


def test_create_asks_for_direct_ssh_with_the_proxy_as_fallback(api, run, provider):
    # Exactly what vast-cli's get_runtype sends for `create instance --ssh --direct`
    # (vast-ai/vast-python vast.py), its "ssh_direc" spelling included; the spec's
    # list example reads it back as image_runtype "ssh ssh_direc ssh_proxy".
    put, _ = create_routes(api)
    run(provider.create(make_spec()))
    assert sent(put)["runtype"] == "ssh_direc ssh_proxy"
    runtype = body("list_instances_v1_200_from_schema_examples")["instances"][0]["image_runtype"]
    assert runtype.split()[1:] == sent(put)["runtype"].split()


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
    add = api.on("POST", "/api/v0/ssh/",
                 reply(200, body("create_ssh_key_200_from_schema_examples")))
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
                 reply(500, {"success": False, "msg": "internal error"}))
    deadline = datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    instance = run(provider.create(make_spec(shutdown_at=deadline)))
    assert put.call_count == 1 and get.call_count >= 1  # a 5xx read is retried
    assert (instance.id, instance.launch_id, instance.status, instance.shutdown_at) == (
        NEW, "lid-7f3a9c", InstanceStatus.PENDING, deadline)
    assert instance.price_per_hour == Decimal("17.60") and instance.region == "US"


def test_create_whose_reply_names_an_instance_vast_then_404s_is_not_created(api, run, provider):
    """new_contract named an instance Vast then does not have: not the machine
    (the launcher looks for the launch id instead)."""
    api.on("PUT", f"/api/v0/asks/{ASK}/",
           reply(200, body("create_instance_200_from_schema_examples")))
    api.on("GET", f"/api/v0/instances/{NEW}/",
           reply(404, body("destroy_instance_404_from_schema_examples")))
    with pytest.raises(APIResponseValidationError, match="does not exist"):
        run(provider.create(make_spec()))


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


def test_a_host_refusing_the_rental_fails_over_to_the_next_ask(monkeypatch):
    """Through Client: a 403 on one ask (the spec's body) moves on to the next ask."""
    import respx

    from gpucloud import Client
    from tests.adapters._vastai_support import example_offer, show

    monkeypatch.setenv("GPUCLOUD_VASTAI_API_KEY", "vast-key")
    asks = [example_offer(id=111, gpu_name="H100 SXM", gpu_ram=81920, num_gpus=8,
                          dph_base=16.0, geolocation="Texas, US"),
            example_offer(id=222, gpu_name="H100 SXM", gpu_ram=81920, num_gpus=8,
                          dph_base=17.0, geolocation="Ohio, US")]
    rented = []

    def api(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v0/bundles/":
            return httpx.Response(200, json={"offers": asks})
        if path.startswith("/api/v0/asks/"):
            rented.append(path)
            if path == "/api/v0/asks/111/":
                return httpx.Response(403, json=body("create_instance_403_from_schema_examples"))
            return httpx.Response(200, json={"success": True, "new_contract": 5550})
        if path == "/api/v0/instances/5550/":
            return httpx.Response(200, json=show("5550", label=None))
        raise AssertionError(f"unexpected {request.method} {path}")

    with respx.mock(assert_all_called=False) as router:
        router.route(host="console.vast.ai").mock(side_effect=api)
        client = Client(providers=["vastai"], sleep=lambda s: None)
        machine = client.create(gpu="h100", count=8)
    assert rented == ["/api/v0/asks/111/", "/api/v0/asks/222/"]
    assert [(a.outcome, a.error_code) for a in client.last_attempts] == [
        ("failed", "offer_refused"), ("created", None)]
    assert machine.id == "5550"
