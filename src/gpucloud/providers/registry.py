"""The provider registry: the one place that names the adapters.

Third-party adapters register under the ``gpucloud.providers`` entry-point
group as ``name = "package.module:ProviderClass"``; each needs a catalog file
(``<config dir>/providers/<name>.toml``) as well.

Whether a provider has an adapter is answered from these names alone; an
adapter's module (and what it imports) is loaded only when that provider's
adapter is built (``adapter_class``), so a command touches only the adapters
in its scope. Installed entry points are scanned only for a name that is not
built in.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucloud.providers.base import Provider

BUILTIN: dict[str, str] = {
    "coreweave": "gpucloud.providers.kubernetes.adapter:CoreWeaveProvider",
    "fluidstack": "gpucloud.providers.fluidstack.adapter:FluidstackProvider",
    "hyperstack": "gpucloud.providers.hyperstack.adapter:HyperstackProvider",
    "kubernetes": "gpucloud.providers.kubernetes.adapter:KubernetesProvider",
    "lambda": "gpucloud.providers.lambdalabs.adapter:LambdaProvider",
    "runpod": "gpucloud.providers.runpod.adapter:RunPodProvider",
    "sandbox": "gpucloud.providers.sandbox.adapter:SandboxProvider",
    "shadeform": "gpucloud.providers.shadeform.adapter:ShadeformProvider",
    "ssh": "gpucloud.providers.ssh.adapter:SshProvider",
    "vastai": "gpucloud.providers.vastai.adapter:VastProvider",
    "verda": "gpucloud.providers.verda.adapter:VerdaProvider",
}


@lru_cache(maxsize=1)  # one scan of the installed distributions per process
def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="gpucloud.providers")}


def adapter_names() -> list[str]:
    """Every provider with an adapter (built in or installed)."""
    return sorted({**_entry_points(), **BUILTIN})


def has_adapter(name: str) -> bool:
    """Whether `name` has an adapter, without importing its module."""
    return name in BUILTIN or name in _entry_points()


def adapter_class(name: str) -> type[Provider] | None:
    target = BUILTIN.get(name) or _entry_points().get(name)
    if target is None:
        return None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def capabilities_of(name: str) -> dict[str, bool | str] | None:
    """What `name`'s adapter declares it can do, as plain data; None without an
    adapter. Imports the adapter's module: only a listing of providers asks."""
    from dataclasses import asdict

    try:
        cls = adapter_class(name)
    except (ImportError, AttributeError):  # a broken plugin: listed, not fatal
        return None
    return None if cls is None else asdict(cls.capabilities)
