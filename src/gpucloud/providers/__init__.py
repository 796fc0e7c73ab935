"""What a provider adapter is written against: the plugin surface.

A third-party adapter subclasses ``Provider`` (``gpucloud.providers.base``)
and registers under the ``gpucloud.providers`` entry-point group
(``providers/registry.py`` finds it). These names load on first use, so
``import gpucloud.providers`` costs nothing at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucloud.core.flow import Flow, OfferQuery, Sleep
    from gpucloud.providers.base import Provider, RequestKind
    from gpucloud.providers.capabilities import Capabilities

__all__ = ["Capabilities", "Flow", "OfferQuery", "Provider", "RequestKind", "Sleep"]

# Where each name is defined; base.py re-exports the flow types as well.
_HOMES = {"Capabilities": "gpucloud.providers.capabilities", "Provider": "gpucloud.providers.base",
          "RequestKind": "gpucloud.providers.base", "Flow": "gpucloud.core.flow",
          "OfferQuery": "gpucloud.core.flow", "Sleep": "gpucloud.core.flow"}
# gpucloud 0.1.0 kept the registry here (as gpucloud.adapters): its names still
# resolve, with a warning naming their new home, for one release.
_REGISTRY = ("BUILTIN", "adapter_class", "adapter_names", "has_adapter")


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    if name in _REGISTRY:
        import warnings

        warnings.warn(f"gpucloud.providers.{name} moved to gpucloud.providers.registry.{name}; "
                      "the old name goes in a later release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module("gpucloud.providers.registry"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
