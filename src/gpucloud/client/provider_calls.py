"""``client.provider(NAME)``: one provider, its facts and the calls only it has.

The client's own methods work on every provider; a call that exists because
one kind of provider has it (a Kubernetes cluster's service-account tokens)
is made here, so the client's surface stays the same for every cloud:

    token = client.provider("kubernetes").service_account_token("ci-runner", ttl="1h")

A provider that has no such call gives a namespace without any; asking for
one it lacks is a SpecError (exit 2 in the CLI) with a hint naming the calls
it has, and also an AttributeError (``hasattr`` answers False).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gpucloud.core import provider_calls

if TYPE_CHECKING:
    from datetime import timedelta

    from gpucloud.core.context import ClientContext
    from gpucloud.core.instructions import Op
    from gpucloud.models import ServiceAccountToken
    from gpucloud.types import Duration


class _Facts:
    """What both namespaces say about the provider; nothing here sends a request."""

    def __init__(self, ctx: ClientContext, name: str) -> None:
        ctx.check_known(name)  # an unknown name fails here, with the known ones as hint
        self._ctx = ctx
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    def calls(self) -> tuple[str, ...]:
        """The provider-specific calls this provider offers (none for most)."""
        return provider_calls.calls(self._ctx, self._name)

    @property
    def auth_kind(self) -> str:
        """How it authenticates: "api_key", "oauth2", "kubeconfig", "hosts" or "none"."""
        return self._ctx.auth_kind(self._name)

    @property
    def has_adapter(self) -> bool:
        """False for a provider this version knows by its catalog prices only."""
        return self._ctx.has_adapter(self._name)

    @property
    def deadline_precision(self) -> timedelta:
        """The step in which the provider keeps a deadline (a deadline is rounded
        up to it); needs the provider's credentials like any call to it."""
        self._ctx.require_callable(self._name)
        return self._ctx.adapter(self._name).deadline_precision

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy, pickle and the like probe for these
            raise AttributeError(name)
        raise provider_calls.UnknownProviderCall(self._name, name, self.calls)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name}: calls {list(self.calls)}>"


class ProviderCalls(_Facts):
    """``Client.provider(NAME)``."""

    def __init__(self, ctx: ClientContext, name: str, run: Callable[[Op], Any]) -> None:
        super().__init__(ctx, name)
        self._run = run

    def service_account_token(self, service_account: str, *, namespace: str | None = None,
                              ttl: Duration = "1h") -> ServiceAccountToken:
        """A short-lived service-account token from the cluster's TokenRequest API
        (at least 10 minutes; Kubernetes and CoreWeave): a ServiceAccountToken
        whose ``token`` is a SecretStr. `namespace`: default, the kubeconfig's."""
        token: ServiceAccountToken = self._run(provider_calls.service_account_token(
            self._ctx, self._name, service_account, namespace, ttl))
        return token

    def read_lease(self, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        """The cluster's coordination.k8s.io/v1 Lease `name` as stored (a dict),
        or None when there is none. `namespace`: default, the kubeconfig's."""
        lease: dict[str, Any] | None = self._run(provider_calls.read_lease(
            self._ctx, self._name, name, namespace))
        return lease

    def write_lease(self, name: str, spec: dict[str, Any], *,
                    resource_version: str | None = None,
                    namespace: str | None = None) -> dict[str, Any] | None:
        """Create the Lease (no `resource_version`) or replace the one read at
        `resource_version`: the Lease as stored, or None when another writer
        got there first (409 Conflict)."""
        lease: dict[str, Any] | None = self._run(provider_calls.write_lease(
            self._ctx, self._name, name, spec, resource_version, namespace))
        return lease


class AsyncProviderCalls(_Facts):
    """``AsyncClient.provider(NAME)``: the calls of ProviderCalls, as coroutines."""

    def __init__(self, ctx: ClientContext, name: str,
                 run: Callable[[Op], Awaitable[Any]]) -> None:
        super().__init__(ctx, name)
        self._run = run

    async def service_account_token(self, service_account: str, *,
                                    namespace: str | None = None,
                                    ttl: Duration = "1h") -> ServiceAccountToken:
        """As ProviderCalls.service_account_token."""
        token: ServiceAccountToken = await self._run(provider_calls.service_account_token(
            self._ctx, self._name, service_account, namespace, ttl))
        return token

    async def read_lease(self, name: str, *,
                         namespace: str | None = None) -> dict[str, Any] | None:
        """As ProviderCalls.read_lease."""
        lease: dict[str, Any] | None = await self._run(provider_calls.read_lease(
            self._ctx, self._name, name, namespace))
        return lease

    async def write_lease(self, name: str, spec: dict[str, Any], *,
                          resource_version: str | None = None,
                          namespace: str | None = None) -> dict[str, Any] | None:
        """As ProviderCalls.write_lease."""
        lease: dict[str, Any] | None = await self._run(provider_calls.write_lease(
            self._ctx, self._name, name, spec, resource_version, namespace))
        return lease


__all__ = ["AsyncProviderCalls", "ProviderCalls"]
