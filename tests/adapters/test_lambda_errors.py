"""Lambda adapter, contract-tested (error mapping, retries, rate limits, and the
API key's secrecy): respx answers at the HTTP transport with the recorded/spec
bodies in tests/fixtures/lambda, every request the adapter sends is validated
against the trimmed official OpenAPI document, and flows run through the real
driver. Shared helpers and fixtures live in tests/adapters/_lambda_support.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gpucloud.transport.http import DEFAULT_POLICY
from gpucloud.errors import (
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
)
from gpucloud.models import InstanceStatus
from tests.adapters._lambda_support import (  # noqa: F401 (fixtures)
    INSTANCE_ID,
    KEY,
    api,
    body,
    instance_body,
    launch_routes,
    make_spec,
    provider,
    reply,
    run,
    sleeps,
)

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
