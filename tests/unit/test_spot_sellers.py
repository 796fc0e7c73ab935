"""Which providers sell spot is read from their catalog files (spot.py); each
adapter's Capabilities.spot must say the same, or offers and create disagree."""

from __future__ import annotations

from gpucloud import Client
from gpucloud.providers.registry import adapter_class
from gpucloud.catalog.spot import sells_spot, spot_sellers


def test_the_catalogs_and_the_adapters_agree_on_spot():
    ctx = Client()._ctx
    checked = 0
    for name in ctx.catalogs:
        cls = adapter_class(name)
        if cls is not None:
            assert sells_spot(ctx, name) == cls.capabilities.spot, name
            checked += 1
    assert checked >= 5


def test_verda_alone_sells_spot_among_the_bundled_providers():
    assert spot_sellers(Client()._ctx) == ["verda"]
