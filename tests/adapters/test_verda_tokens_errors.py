"""Verda adapter, contract-tested (the OAuth2 token, error mapping, retries and
secrets): respx answers at the HTTP transport (the token endpoint included)
with the SDK bodies in tests/fixtures/verda, and flows run through the real
driver (retries, auth). Shared helpers and fixtures live in
tests/adapters/_verda_support.py."""

from __future__ import annotations

from datetime import datetime, timezone

import httpx
import pytest
from pydantic import SecretStr

from gpucloud.transport.http import DEFAULT_POLICY, Session
from gpucloud.providers.verda import VerdaProvider
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from gpucloud.errors import (
    APIResponseValidationError,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    CredentialsError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
)
from tests.adapters._verda_support import (  # noqa: F401 (fixtures)
    API,
    CLIENT_ID,
    CLIENT_SECRET,
    INSTANCE_ID,
    api_fixture,
    body,
    error,
    launch_routes,
    make_spec,
    provider_fixture,
    reply,
    run_fixture,
)

# -- the token ---------------------------------------------------------------------


def test_token_request_bodies_are_exactly_the_sdks(api, run, provider):
    route = api.on("GET", "/instances", reply(200, []))
    run(provider.list_instances())
    expected = body("oauth2_token_request_client_credentials")
    expected.update(client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
    assert api.grants == [expected]
    route.side_effect = None
    route.mock(side_effect=[httpx.Response(401, json=error("unauthorized_request", "expired")),
                            httpx.Response(200, json=[])])
    run(provider.list_instances())
    refresh = body("oauth2_token_request_refresh_token")
    refresh.update(refresh_token="verda-refresh-1")
    assert api.grants[1] == refresh and list(api.grants[1]) == list(refresh)


def test_api_requests_carry_the_access_token(api, run, provider):
    route = api.on("GET", "/instances", reply(200, []))
    run(provider.list_instances())
    request = route.calls.last.request
    assert request.headers["Authorization"] == "Bearer verda-access-1"
    assert request.headers["Accept"] == "application/json"
    assert request.url == f"{API}/instances"


def test_sessions_of_one_provider_share_one_token(api, provider):
    api.on("GET", "/instances", reply(200, []))
    for _ in range(2):
        session = Session(provider, sleep=lambda s: None)
        session.run(provider.list_instances())
        session.close()
    assert len(api.grants) == 1
    assert provider.auth() is provider.auth()


def test_token_expiry_is_exposed(api, run, provider):
    assert provider.token_expires_at is None
    api.on("GET", "/locations", reply(200, body("list_locations_200")))
    before = datetime.now(timezone.utc).timestamp()
    run(provider.verify())
    assert before + 3600 - 5 <= provider.token_expires_at <= before + 3600 + 5


def test_no_credential_means_no_auth(api):
    assert VerdaProvider(load_catalogs()["verda"]).auth() is None


def test_a_credential_without_client_id_is_a_credentials_error():
    provider = VerdaProvider(load_catalogs()["verda"],
                             Credential("verda", SecretStr(CLIENT_SECRET), "test"))
    with pytest.raises(CredentialsError) as info:
        provider.auth()
    assert "GPUCLOUD_VERDA_CLIENT_ID" in info.value.hint


def test_401_refreshes_once_then_retries(api, run, provider):
    route = api.on("GET", f"/instances/{INSTANCE_ID}",
                   reply(401, error("unauthorized_request", "Invalid access token")),
                   reply(200, body("get_instance_200_sdk_fixture")))
    assert run(provider.get(INSTANCE_ID)).id == INSTANCE_ID
    assert [g["grant_type"] for g in api.grants] == ["client_credentials", "refresh_token"]
    assert [c.request.headers["Authorization"] for c in route.calls] == [
        "Bearer verda-access-1", "Bearer verda-access-2"]


def test_401_twice_is_an_authentication_error_without_a_loop(api, run, provider):
    route = api.on("GET", "/instances", reply(401, error("unauthorized_request", "Nope")))
    with pytest.raises(AuthenticationError) as info:
        run(provider.list_instances())
    assert route.call_count == 2 and len(api.grants) == 2
    assert info.value.provider_code == "unauthorized_request"


def test_refused_refresh_falls_back_to_client_credentials(api, run, provider):
    route = api.on("GET", "/instances", reply(401, error("unauthorized_request", "expired")),
                   reply(200, []))
    api.token_answers = [reply(200, {"access_token": "verda-access-1",
                                     "refresh_token": "verda-refresh-1", "expires_in": 3600}),
                         reply(400, error("invalid_request", "Invalid refresh token"))]
    run(provider.list_instances())
    assert [g["grant_type"] for g in api.grants] == [
        "client_credentials", "refresh_token", "client_credentials"]
    assert route.calls.last.request.headers["Authorization"] == "Bearer verda-access-3"


def test_wrong_client_secret_is_an_authentication_error(api, run, provider):
    api.token_answers = [reply(401, error("unauthorized_request", "Invalid client credentials"))]
    route = api.on("GET", "/locations", reply(200, []))
    with pytest.raises(AuthenticationError) as info:
        run(provider.verify())
    assert route.call_count == 0
    assert "Invalid client credentials" in str(info.value)
    assert "gpucloud providers" in info.value.hint


def test_a_token_reply_without_access_token_is_a_validation_error(api, run, provider):
    api.token_answers = [reply(200, {"token_type": "Bearer", "refresh_token": "verda-refresh-x"})]
    api.on("GET", "/instances", reply(200, []))
    with pytest.raises(APIResponseValidationError) as info:
        run(provider.list_instances())
    assert "verda-refresh-x" not in str(info.value)


# -- errors ------------------------------------------------------------------------------


ERRORS = [
    (400, error("invalid_request", "Your existence is invalid"), BadRequestError),
    (401, error("unauthorized_request", "Invalid token"), AuthenticationError),
    (403, error("forbidden_action", "Not allowed"), PermissionDeniedError),
    (404, error("not_found", "Not found"), NotFoundError),
    (402, error("insufficient_funds", "Insufficient funds"), QuotaExceededError),
    (400, error("insufficient_funds", "Insufficient funds"), QuotaExceededError),
    (500, error("server_error", "Oops"), InternalServerError),
    (503, error("service_unavailable", "Maintenance"), InternalServerError),
    (400, error("invalid_request", "Instance type 1V100.6V is not available in FIN-01"),
     InsufficientCapacityError),
    (400, error("invalid_request", "Not enough capacity for this instance type"),
     InsufficientCapacityError),
    (400, error("invalid_request", "Operating system is not valid for this instance type"),
     BadRequestError),
    # "not available" about the image is a wrong request (exit 2), not capacity.
    (400, error("invalid_request", "Image not available for this instance type"),
     BadRequestError),
    (400, error("invalid_request", "OS image ubuntu-20.04 is not available"), BadRequestError),
    (400, error("invalid_request", "Instance type 8H100.80S.176V is currently unavailable"),
     InsufficientCapacityError),
    (400, error("invalid_request", "Not available in FIN-03"), InsufficientCapacityError),
    (400, error("invalid_request", "Sold out"), InsufficientCapacityError),
    (400, error("invalid_request", "Invalid instance id"), NotFoundError),
    (418, error("brand_new_code", "Something new"), APIStatusError),
]


@pytest.mark.parametrize("status,payload,cls", ERRORS)
def test_error_bodies_map_to_classes(api, run, provider, status, payload, cls):
    launch_routes(api, reply(status, payload))
    with pytest.raises(APIStatusError) as info:
        run(provider.create(make_spec()))
    exc = info.value
    assert type(exc) is cls
    assert exc.status_code == status and exc.provider == "verda"
    assert exc.provider_code == payload["code"]
    assert payload["message"] in str(exc)


def test_the_sdk_error_fixture_is_a_bad_request(api, run, provider):
    api.on("GET", f"/instances/{INSTANCE_ID}",
           reply(400, body("error_invalid_request_400_sdk_fixture")))
    with pytest.raises(BadRequestError) as info:
        run(provider.get(INSTANCE_ID))
    assert "Your existence is invalid" in str(info.value)


def test_insufficient_funds_hints_at_the_balance(api, run, provider):
    launch_routes(api, reply(400, error("insufficient_funds", "Insufficient funds")))
    with pytest.raises(QuotaExceededError) as info:
        run(provider.create(make_spec()))
    assert "balance" in info.value.hint


def test_non_json_502_maps_by_status(api, run, provider):
    route = api.on("GET", f"/instances/{INSTANCE_ID}",
                   reply(502, text="<html><body>502 Bad Gateway</body></html>",
                         headers={"content-type": "text/html"}))
    with pytest.raises(InternalServerError) as info:
        run(provider.get(INSTANCE_ID))
    assert info.value.status_code == 502 and info.value.provider_code is None
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


def test_429_is_retried_then_a_rate_limit_error(api, run, provider):
    route = api.on("GET", "/instances", reply(429, text="", headers={"Retry-After": "2"}))
    with pytest.raises(RateLimitError) as info:
        run(provider.list_instances())
    assert info.value.retry_after == 2.0
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


SECRETS = (CLIENT_SECRET, "verda-access-1", "verda-refresh-1")


@pytest.mark.parametrize("response", [
    reply(400, error("invalid_request", f"bad {CLIENT_SECRET} verda-access-1")),
    reply(401, error("unauthorized_request", "token verda-access-1 / verda-refresh-1")),
    reply(500, text=f"trace: Authorization: Bearer verda-access-1 {CLIENT_SECRET}"),
    reply(200, {"nope": "verda-access-1"}),
    httpx.ReadTimeout("timed out"),
])
def test_secrets_never_appear_in_errors(api, run, provider, response):
    api.on("GET", f"/instances/{INSTANCE_ID}", response)
    with pytest.raises(Exception) as info:
        run(provider.get(INSTANCE_ID))
    exc = info.value
    visible = " ".join([str(exc), repr(exc), str(getattr(exc, "hint", "")), repr(exc.args),
                        repr(vars(exc).get("request")), repr(provider), repr(provider.auth()),
                        repr(provider.auth().source)])
    for secret in SECRETS:
        assert secret not in visible


def test_a_token_endpoint_error_never_shows_the_client_secret(api, run, provider):
    api.token_answers = [reply(400, error("invalid_request",
                                          f"client_secret {CLIENT_SECRET} is wrong"))]
    api.on("GET", "/instances", reply(200, []))
    with pytest.raises(BadRequestError) as info:
        run(provider.list_instances())
    assert CLIENT_SECRET not in str(info.value) and "[secure]" in str(info.value)
