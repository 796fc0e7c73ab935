"""The httpx.Auth for a long-lived bearer token (an API key, a service-account
token). Its own module so that resolving credentials never imports httpx: a
catalog-only command finds keys without building a request."""

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
