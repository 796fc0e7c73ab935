"""Credential checks: does a provider's credential work, and the state of every
provider's (``Client.verify``, ``Client.auth_status``, ``gpucloud auth``)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from gpucloud.config.credentials import how_to_set
from gpucloud.core.instructions import Call, Gather, Op
from gpucloud.errors import GpuCloudError

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.providers.base import Provider


def verify(ctx: ClientContext, name: str) -> Op:
    """Prove a provider's credential works with a cheap read; the token expiry if known."""
    ctx.require_callable(name)
    adapter = ctx.adapter(name)
    yield Call(name, adapter.verify())
    return expiry(adapter)


def auth_status(ctx: ClientContext) -> Op:
    """Every provider with an adapter: where its credential comes from and
    whether it works (each checked at once)."""
    from gpucloud.models import AuthStatus

    names = [n for n in ctx.known if ctx.has_adapter(n)]
    checked = [n for n in names
               if ctx.auth_kind(n) != "none" and ctx.credential(n) is not None]
    results = yield Gather([Call(n, ctx.adapter(n).verify()) for n in checked])
    out = []
    for name in names:
        kind = ctx.auth_kind(name)
        if kind == "none":
            out.append(AuthStatus(provider=name, source="none needed"))
            continue
        if name not in checked:
            out.append(AuthStatus(provider=name, hint=how_to_set(name, kind)))
            continue
        result = results[checked.index(name)]
        failed = isinstance(result, BaseException)
        if failed and not isinstance(result, GpuCloudError):
            raise result
        out.append(AuthStatus(
            provider=name, source=ctx.credential(name).source, works=not failed,
            error=str(result) if failed else None,
            hint=getattr(result, "hint", None) if failed else None,
            token_expires_at=None if failed else expiry(ctx.adapter(name))))
    return out


def expiry(adapter: Provider) -> datetime | None:
    """When the adapter's current token expires, if it says."""
    expires = getattr(adapter.auth(), "token_expires_at", None)
    if isinstance(expires, (int, float)):
        return datetime.fromtimestamp(expires, timezone.utc)
    found: datetime | None = expires  # a datetime or None, as the auth keeps it
    return found


__all__ = ["auth_status", "expiry", "verify"]
