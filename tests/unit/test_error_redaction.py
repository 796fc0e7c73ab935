"""Errors hold no credentials: the request an APIError keeps is a copy with the
Authorization header and a token request's secrets redacted, so an exception
can be pickled, logged or sent to an error tracker safely."""

from __future__ import annotations

import json
import pickle
from urllib.parse import parse_qs

import httpx
import pytest
import respx

from gpucloud import Client
from gpucloud.errors import APIError, AuthenticationError, RateLimitError
from tests.adapters._verda_support import (  # noqa: F401 (fixtures)
    CLIENT_ID,
    CLIENT_SECRET,
    api_fixture,
    error,
    provider_fixture,
    reply,
    run_fixture,
)

KEY = "sk-live-0123456789abcdef"


@pytest.mark.parametrize("provider, base", [
    ("lambda", "https://cloud.lambda.ai"),
    ("runpod", "https://api.runpod.io"),
    ("vastai", "https://console.vast.ai"),
])
def test_a_bearer_key_is_not_in_the_error(provider, base, monkeypatch):
    monkeypatch.setenv(f"GPUCLOUD_{provider.upper()}_API_KEY", KEY)
    with respx.mock(assert_all_mocked=True) as router:
        route = router.route(host=httpx.URL(base).host).mock(
            return_value=httpx.Response(401, json={"error": "unauthorized"}))
        with pytest.raises(AuthenticationError) as info:
            Client(sleep=lambda s: None).list(provider=provider)
    assert route.calls.last.request.headers["Authorization"] == f"Bearer {KEY}"  # it was sent
    exc = info.value
    assert KEY.encode() not in pickle.dumps(exc)
    assert exc.request.headers["Authorization"] == "[redacted]"
    assert exc.request.url.host == httpx.URL(base).host  # the rest is kept for debugging


def test_a_refused_client_credentials_request_keeps_no_secret(api, run, provider):
    api.token_answers = [reply(401, error("unauthorized_request", "Invalid client credentials"))]
    with pytest.raises(AuthenticationError) as info:
        run(provider.verify())
    exc = info.value
    assert exc.request.url.path.endswith("/oauth2/token")
    assert CLIENT_SECRET.encode() not in pickle.dumps(exc)
    body = json.loads(exc.request.content)
    assert body["client_secret"] == "[redacted]" and body["client_id"] == CLIENT_ID
    assert body["grant_type"] == "client_credentials"


def test_a_refresh_token_in_a_form_body_is_redacted():
    request = httpx.Request("POST", "https://auth.example/token?api_key=k-123&page=2",
                            data={"grant_type": "refresh_token", "refresh_token": "rt-secret-9"},
                            headers={"Authorization": "Basic Y2xpZW50OnNlY3JldA==",
                                     "X-Api-Key": "k-456", "Accept": "application/json"})
    exc = RateLimitError("slow down", provider="p", status_code=429, request=request)
    dumped = pickle.dumps(exc)
    for secret in (b"rt-secret-9", b"Y2xpZW50OnNlY3JldA==", b"k-123", b"k-456"):
        assert secret not in dumped
    kept = exc.request
    assert parse_qs(kept.content.decode()) == {"grant_type": ["refresh_token"],
                                               "refresh_token": ["[redacted]"]}
    assert kept.headers["Accept"] == "application/json" and kept.url.params["page"] == "2"
    assert request.headers["X-Api-Key"] == "k-456"  # the caller's request is untouched


def test_anything_but_an_httpx_request_is_not_kept():
    assert APIError("x", provider="p", request={"Authorization": "Bearer k"}).request is None
    exc = APIError("x", provider="p")
    exc.request = httpx.Request("GET", "https://a.example", headers={"Cookie": "session=s3"})
    assert b"s3" not in pickle.dumps(exc)
