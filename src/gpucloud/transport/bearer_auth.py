"""The httpx.Auths for a long-lived key: a bearer token (an API key, a
service-account token), or a key in a header the provider names. Their own
module so that resolving credentials never imports httpx: a catalog-only
command finds keys without building a request."""

from __future__ import annotations

from collections.abc import Generator

import httpx
from pydantic import SecretStr


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer <key>`` for a long-lived API key."""

    def __init__(self, secret: SecretStr) -> None:
        self._secret = secret

    def __repr__(self) -> str:
        return "BearerAuth([secure])"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._secret.get_secret_value()}"
        yield request


class HeaderKeyAuth(httpx.Auth):
    """A long-lived API key in a header the provider names (``X-API-KEY``,
    ``api_key``), as its OpenAPI security scheme of type apiKey says."""

    def __init__(self, secret: SecretStr, header: str) -> None:
        self._secret = secret
        self._header = header

    def __repr__(self) -> str:
        return f"HeaderKeyAuth({self._header}: [secure])"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[self._header] = self._secret.get_secret_value()
        yield request
