"""Short-lived service-account tokens through the TokenRequest API.

``gpucloud auth token kubernetes --service-account NAME`` (and
``client.provider("kubernetes").service_account_token``) gives a CI job or a
worker a token that expires by itself (at least 10 minutes: the API's
minimum) instead of a long-lived secret.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pydantic import SecretStr

from gpucloud.errors import SpecError, option
from gpucloud.models import ServiceAccountToken
from gpucloud.transport.tokens import TOKEN_REQUEST_EXTENSION
from gpucloud.providers.base import Flow, Provider, parse_utc

MIN_TTL = 600  # ValidateTokenRequest: "may not specify a duration less than 10 minutes"
MAX_TTL = 2 ** 32


def check_ttl(ttl_seconds: Any) -> int:
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int) or not (
            MIN_TTL <= ttl_seconds <= MAX_TTL):
        raise SpecError(f"a token's lifetime must be 10 minutes to {MAX_TTL} s, got "
                        f"{ttl_seconds!r} s",
                        hint=f"e.g. {option('ttl', '--ttl', repr('1h'), '1h')} "
                             "(the API's minimum is 10m)")
    return ttl_seconds


def mint(provider: Provider, service_account: str, namespace: str,
         ttl_seconds: int) -> Flow[ServiceAccountToken]:
    ttl = check_ttl(ttl_seconds)
    if not service_account:
        flag = option('service_account', '--service-account', repr('NAME'), 'NAME')
        raise SpecError("a service account name is needed", hint=f"give {flag}")
    path = (f"/api/v1/namespaces/{quote(namespace, safe='')}/serviceaccounts/"
            f"{quote(service_account, safe='')}/token")
    # Empty audiences: the API server's own, as kubectl create token does.
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": [], "expirationSeconds": ttl}}
    # Each answer is a fresh token and minting twice costs nothing: safe to retry.
    request = provider.request("POST", path, json=body, kind="idempotent")
    request.extensions[TOKEN_REQUEST_EXTENSION] = True
    response = yield request
    provider.raise_for_error(response)
    raw = provider.json(response)
    status = raw.get("status") if isinstance(raw, dict) else None
    token = status.get("token") if isinstance(status, dict) else None
    expires = parse_utc(status.get("expirationTimestamp")) if isinstance(status, dict) else None
    if not isinstance(token, str) or not token or expires is None:
        raise provider.invalid(response, "no status.token and status.expirationTimestamp")
    return ServiceAccountToken(provider=provider.name, namespace=namespace,
                               service_account=service_account, token=SecretStr(token),
                               expires_at=expires)
