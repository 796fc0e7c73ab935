"""Which providers sell spot (interruptible) machines.

The provider's catalog file is the one answer: a provider sells spot where its
catalog prices spot (a ``spot_price`` on an instance type). The bundled files
record it from their sources (Lambda's price list has no spot prices, RunPod's
REST v2 and Vast.ai's create sell none; Verda prices spot per type). Reading
the catalog keeps a catalog-only ``offers --spot`` from importing any adapter;
tests/unit/test_spot_sellers.py checks that each adapter's
``Capabilities.spot`` says the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext


def sells_spot(ctx: ClientContext, name: str) -> bool:
    catalog = ctx.catalogs.get(name)
    return catalog is not None and any(t.spot_price is not None for t in catalog.instance_types)


def spot_sellers(ctx: ClientContext) -> list[str]:
    """Every real (not simulated) provider that sells spot, for a hint."""
    return [n for n, c in sorted(ctx.catalogs.items()) if not c.simulated and sells_spot(ctx, n)]
