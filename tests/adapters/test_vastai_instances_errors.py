"""Vast.ai adapter, contract-tested (list, get, delete, stop, start, verify,
and error mapping): respx answers at the HTTP transport with bodies derived from the official
OpenAPI document (tests/fixtures/vastai), every request the adapter sends is
validated against the trimmed spec and checked for the Bearer key, and flows
run through the real driver (retries, pacing, auth). Shared helpers and
fixtures live in tests/adapters/_vastai_support.py."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import httpx
import pytest

from gpucloud.transport.http import DEFAULT_POLICY
from gpucloud.providers.base import OfferQuery
from gpucloud.errors import (
    APIResponseValidationError,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    OfferRefusedError,
    QuotaExceededError,
    RateLimitError,
    SpecError,
)
from gpucloud.models import InstanceStatus
from tests.adapters._vastai_support import (  # noqa: F401 (fixtures)
    KEY,
    LIST,
    SHOWN,
    api_fixture,
    body,
    create_routes,
    make_spec,
    page,
    provider_fixture,
    reply,
    run_fixture,
    sent,
    show,
    sleeps_fixture,
)

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
        "private_ip": None, "batch": None,
        "created_at": datetime.fromtimestamp(1668804745.1223178, timezone.utc),
        "shutdown_at": None, "launch_id": None, "simulated": False,
        "connection": {"method": "ssh", "host": "192.0.2.45", "port": 20000, "user": "root"},
        "terminated_at": None, "final_cost": None,
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
    # Frozen: Vast paused the contract; the machine and its disk are still there.
    ("frozen", "running", None, InstanceStatus.STOPPED),
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
    # "Offer ... is not your own": this host refuses this renter, another may not.
    ("create_instance_403_from_schema_examples", 403, "create", OfferRefusedError),
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
        "success": False, "error": "no_such_instance",
        "msg": "Instance with that ID does not exist."}))
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
