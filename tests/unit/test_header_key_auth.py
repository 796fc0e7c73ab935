"""A key in a header the provider names (Shadeform's X-API-KEY, Hyperstack's
api_key): sent on the request, never shown by the auth object itself."""

from __future__ import annotations

import httpx
import pytest
from pydantic import SecretStr

from gpucloud.transport.bearer_auth import HeaderKeyAuth


@pytest.mark.parametrize("header", ["X-API-KEY", "api_key"])
def test_the_key_goes_in_the_named_header_and_nowhere_else(header):
    auth = HeaderKeyAuth(SecretStr("sk-live-123"), header)
    request = next(auth.auth_flow(httpx.Request("GET", "https://example.test/v1/x")))
    assert request.headers[header] == "sk-live-123"
    assert "authorization" not in request.headers
    assert "sk-live-123" not in repr(auth) and header in repr(auth)

