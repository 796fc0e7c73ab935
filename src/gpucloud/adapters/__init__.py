"""The provider registry: the one place that names the adapters.

Third-party adapters register under the ``gpucloud.providers`` entry-point
group as ``name = "package.module:ProviderClass"``; each needs a catalog file
(``<config dir>/providers/<name>.toml``) as well.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Provider

BUILTIN: dict[str, str] = {
    "coreweave": "gpucloud.adapters.kubernetes:CoreWeaveProvider",
    "kubernetes": "gpucloud.adapters.kubernetes:KubernetesProvider",
    "lambda": "gpucloud.adapters.lambdalabs:LambdaProvider",
    "runpod": "gpucloud.adapters.runpod:RunPodProvider",
    "sandbox": "gpucloud.adapters.sandbox:SandboxProvider",
    "vastai": "gpucloud.adapters.vastai:VastProvider",
    "verda": "gpucloud.adapters.verda:VerdaProvider",
}


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="gpucloud.providers")}


def adapter_names() -> list[str]:
    """Every provider with an adapter (built in or installed)."""
    return sorted({**_entry_points(), **BUILTIN})


def adapter_class(name: str) -> type[Provider] | None:
    target = BUILTIN.get(name) or _entry_points().get(name)
    if target is None:
        return None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
