"""Calls only some providers answer, behind ``client.provider(NAME)``.

Most of the SDK is the same for every cloud; a few calls exist because one
kind of provider has them (a Kubernetes cluster mints service-account
tokens through its TokenRequest API). Each such call names the adapter method
it needs, so a provider offers exactly the calls its adapter can make.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucloud.core.instructions import Call, Op
from gpucloud.errors import SpecError

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.types import Duration

# The call on the namespace -> the adapter method that makes it.
CALLS = {"service_account_token": "mint_token", "read_lease": "read_lease",
         "write_lease": "write_lease"}


def calls(ctx: ClientContext, provider: str) -> tuple[str, ...]:
    """The provider-specific calls `provider` offers (none for most)."""
    from gpucloud.providers.registry import adapter_class

    ctx.check_known(provider)
    cls = adapter_class(provider) if ctx.has_adapter(provider) else None
    return tuple(c for c, method in CALLS.items() if cls is not None and hasattr(cls, method))


class UnknownProviderCall(SpecError, AttributeError):
    """A call `client.provider(NAME)` does not offer: a SpecError (exit 2 with a
    hint in the CLI) that is also an AttributeError, so hasattr() and getattr()
    with a default work as on any object."""

    def __init__(self, provider: str, name: str, offered: tuple[str, ...]) -> None:
        hint = (f"its calls: {', '.join(offered)}" if offered
                else f"{provider} has no provider-specific calls; the client's own methods "
                     "work on every provider")
        SpecError.__init__(self, f"{provider} has no provider call {name!r}", hint=hint)
        self.name = name


def service_account_token(ctx: ClientContext, provider: str, service_account: str,
                          namespace: str | None, ttl: Duration) -> Op:
    """A short-lived token of `service_account` from the cluster's TokenRequest API."""
    from gpucloud.catalog.pricing import parse_duration
    from gpucloud.providers.registry import adapter_class

    seconds = int(parse_duration(ttl).total_seconds())
    check = getattr(adapter_class(provider) if ctx.has_adapter(provider) else None,
                    "check_token_ttl", None)
    if check is not None:
        check(seconds)
    ctx.require_callable(provider)
    adapter = ctx.adapter(provider)
    mint = getattr(adapter, "mint_token", None)
    if mint is None:
        raise SpecError(f"{provider} is not a Kubernetes cluster: it mints no service-account "
                        "tokens", hint="use provider kubernetes or coreweave")
    return (yield Call(provider, mint(service_account, namespace, seconds)))


def read_lease(ctx: ClientContext, provider: str, name: str, namespace: str | None) -> Op:
    """The cluster's coordination.k8s.io/v1 Lease `name` (a dict), or None."""
    read = _cluster_call(ctx, provider, "read_lease")
    return (yield Call(provider, read(name, namespace)))


def write_lease(ctx: ClientContext, provider: str, name: str, spec: dict[str, Any],
                resource_version: str | None, namespace: str | None) -> Op:
    """Create (no resource_version) or replace the Lease; None when another
    writer won."""
    write = _cluster_call(ctx, provider, "write_lease")
    return (yield Call(provider, write(name, spec, resource_version, namespace)))


def _cluster_call(ctx: ClientContext, provider: str, method: str) -> Any:
    ctx.require_callable(provider)
    found = getattr(ctx.adapter(provider), method, None)
    if found is None:
        raise SpecError(f"{provider} is not a Kubernetes cluster: it keeps no Leases",
                        hint="use provider kubernetes or coreweave")
    return found


__all__ = ["CALLS", "UnknownProviderCall", "calls", "read_lease", "service_account_token",
           "write_lease"]
