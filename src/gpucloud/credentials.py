"""Where credentials come from, and the httpx.Auth classes that use them.

Order: explicit argument, then ``GPUCLOUD_<PROVIDER>_API_KEY`` in the
environment, then the system keyring (service ``gpucloud``, user = provider
name). Nothing secret is ever written to a plain file. Secrets are pydantic
``SecretStr``: their repr is ``SecretStr('**********')``.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field

import httpx
from pydantic import SecretStr

from .errors import CredentialsError

KEYRING_SERVICE = "gpucloud"


@dataclass(frozen=True)
class Credential:
    provider: str
    secret: SecretStr = field(repr=False)
    source: str  # "argument", "env:NAME", "keyring"

    def __repr__(self) -> str:
        return f"Credential(provider={self.provider!r}, secret=[secure], source={self.source!r})"


def env_var(provider: str) -> str:
    return f"GPUCLOUD_{provider.upper()}_API_KEY"


def how_to_set(provider: str) -> str:
    return (f"set {env_var(provider)}, or store the key in the system keyring: "
            f"`keyring set {KEYRING_SERVICE} {provider}`")


def _keyring_get(provider: str) -> str | None:
    try:
        import keyring
        from keyring.errors import KeyringError, NoKeyringError
    except ImportError:  # pragma: no cover - keyring is a dependency
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, provider)
    except NoKeyringError:
        # A headless machine without a backend: the env var is the way.
        return None
    except KeyringError:
        return None
    except Exception:  # noqa: BLE001 - a broken backend must not crash a listing
        return None


class CredentialStore:
    """Resolves a provider's credential: argument, environment, keyring."""

    def __init__(self, explicit: Mapping[str, str] | None = None,
                 environ: Mapping[str, str] | None = None, use_keyring: bool = True):
        self._explicit = dict(explicit or {})
        self._environ = os.environ if environ is None else environ
        self._use_keyring = use_keyring

    def find(self, provider: str) -> Credential | None:
        if provider in self._explicit:
            return Credential(provider, SecretStr(self._explicit[provider]), "argument")
        name = env_var(provider)
        value = self._environ.get(name)
        if value:
            return Credential(provider, SecretStr(value.strip()), f"env:{name}")
        if self._use_keyring:
            stored = _keyring_get(provider)
            if stored:
                return Credential(provider, SecretStr(stored), "keyring")
        return None

    def require(self, provider: str) -> Credential:
        cred = self.find(provider)
        if cred is None:
            raise CredentialsError(f"no credentials for {provider}", hint=how_to_set(provider))
        return cred


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer <key>`` for a long-lived API key."""

    def __init__(self, secret: SecretStr) -> None:
        self._secret = secret

    def __repr__(self) -> str:
        return "BearerAuth([secure])"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._secret.get_secret_value()}"
        yield request
