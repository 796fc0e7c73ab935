"""Offer operations: offers across providers (live where credentials allow,
catalog rows otherwise), and the estimate of the cheapest.

Catalog rows stay ``CatalogOffer`` in ``offer_rows`` (catalog/offer.py says
why); ``offers`` hands out ``Offer`` objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucloud.catalog import pricing
from gpucloud.core.flow import OfferQuery
from gpucloud.catalog.gaps import CatalogGap
from gpucloud.errors import (
    AuthenticationError, GpuCloudError, NoOffersError, PermissionDeniedError, SpecError, option,
)
from gpucloud.catalog.gpus import parse_gpu
from gpucloud.core.instructions import Call, Gather, Op, check_count, sort_offers

if TYPE_CHECKING:
    from gpucloud.catalog.offer import CatalogOffer
    from gpucloud.core.context import ClientContext
    from gpucloud.models import Offer
    from gpucloud.types import Hours, Money


def offers(ctx: ClientContext, gpu: str, count: int, provider: str | None = None,
           region: str | None = None, spot: bool = False,
           max_price: Money | None = None, *, live_only: bool = False,
           disk_gb: int | None = None) -> Op:
    """The offers, cheapest first, as ``Offer`` objects."""
    from gpucloud.catalog.offer import as_offers

    rows = yield from offer_rows(ctx, gpu, count, provider, region, spot, max_price,
                                 live_only=live_only, disk_gb=disk_gb)
    return as_offers(rows)


def offer_rows(ctx: ClientContext, gpu: str, count: int, provider: str | None = None,
               region: str | None = None, spot: bool = False,
               max_price: Money | None = None, *, live_only: bool = False,
               disk_gb: int | None = None) -> Op:
    """As ``offers``, catalog rows left as ``CatalogOffer`` (catalog/offer.py)."""
    canonical = parse_gpu(gpu)
    check_count(count)
    limit = pricing.to_decimal(max_price, "max price") if max_price is not None else None
    if limit is not None and limit <= 0:
        raise SpecError(f"max price must be positive, got {max_price}",
                        hint=f"{option('max_price', '--max-price')} is USD per hour for the "
                             "whole machine, e.g. 30")
    query = OfferQuery(gpu=canonical, count=count, region=region, spot=spot, disk_gb=disk_gb)
    names = ctx.scope(provider)
    no_spot: list[str] = []
    if spot:
        from gpucloud.catalog.spot import sells_spot, spot_sellers

        # Whether or not its credentials are set: a provider that sells no
        # spot has none to show, and its on-demand rows are not the answer.
        if provider is not None and not sells_spot(ctx, provider):
            sellers = ", ".join(spot_sellers(ctx)) or "none of the known providers"
            raise SpecError(f"{provider} sells no spot machines",
                            hint=f"drop {option('spot', '--spot')} for an on-demand "
                                 f"machine, or pick a provider that sells spot: {sellers}")
        no_spot = [n for n in names if not sells_spot(ctx, n)]
    live = [n for n in names if ctx.can_call(n) and n not in no_spot]
    results = yield Gather([Call(n, ctx.adapter(n).offers(query)) for n in live])
    offers: list[Offer | CatalogOffer] = []
    ctx.warnings.clear()
    ctx.failures.clear()
    ctx.catalog_gaps.clear()
    what = f"{count}x {canonical}" + (f" in {region}" if region else "")
    for name in names:
        if name in no_spot:
            ctx.warnings.append(f"{name} sells no spot machines")
            continue
        if name in live:
            result = results[live.index(name)]
            if not isinstance(result, BaseException):
                offers.extend(result)
                continue
            if not isinstance(result, GpuCloudError):
                raise result
            ctx.failures[name] = result
            if isinstance(result, (AuthenticationError, PermissionDeniedError)):
                # Rejected credentials are the user's to fix, never papered
                # over with list prices (DESIGN: "errors tell the truth").
                if len(live) == 1:
                    raise result
                ctx.warnings.append(f"{name}: credentials rejected ({result}); "
                                         "its offers are not shown")
                continue
            ctx.warnings.append(f"{name}: live prices unavailable ({result}); "
                                     "showing catalog prices")
            # An unreachable provider still shows its list prices, in every
            # command alike; create refuses to launch them (launcher).
            offers.extend(_catalog(ctx, name, canonical, count, region, spot))
            continue
        if live_only:
            continue
        rows = _catalog(ctx, name, canonical, count, region, spot)
        if not rows and not ctx.catalogs[name].simulated:
            helps = not ctx.has_credentials(name) and ctx.has_adapter(name)
            warning = (f"{name}: no {what} in the bundled catalog"
                       + ("; add credentials for live offers" if helps else ""))
            ctx.warnings.append(warning)
            ctx.catalog_gaps.append(CatalogGap(name, what, warning, helps))
        offers.extend(rows)
    if live and len(ctx.failures) == len(live) and not offers:
        # Nobody could be asked and no list price stands in: say why, never
        # "no offer" (a network or credential failure is not a sold-out cloud).
        raise next(iter(ctx.failures.values()))
    if limit is not None:
        offers = [o for o in offers if o.price_per_hour <= limit]
    return sort_offers(offers)


def _catalog(ctx: ClientContext, name: str, gpu: str, count: int, region: str | None,
             spot: bool) -> list[CatalogOffer]:
    return ctx.catalogs[name].rows(gpu=gpu, count=count, region=region, spot=spot)


def estimate(ctx: ClientContext, gpu: str, count: int, hours: Hours = 1,
             provider: str | None = None, region: str | None = None,
             disk_gb: int | None = None) -> Op:
    found = yield from offers(ctx, gpu, count, provider, region, disk_gb=disk_gb)
    if not found:
        raise no_offers(gpu, count, provider, region)
    # In sort_offers' order: fully priced first, as the plan picks them.
    usable = [o for o in found if o.available is not False] or found
    return pricing.estimate(usable[0], hours, disk_gb=disk_gb)


def no_launchable(ctx: ClientContext, gpu: str, count: int, provider: str | None,
                  region: str | None) -> GpuCloudError:
    """Why a plan found nothing to launch: no credentials, or no offer."""
    names = ctx.scope(provider)
    if not any(ctx.can_call(n) for n in names):
        return ctx.missing_credentials(names, any_provider=provider is None)
    return no_offers(gpu, count, provider, region)


def no_offers(gpu: str, count: int, provider: str | None,
              region: str | None) -> NoOffersError:
    where = f" on {provider}" if provider else ""
    where += f" in {region}" if region else ""
    return NoOffersError(f"no offer for {count}x {parse_gpu(gpu)}{where}",
                         hint=f"try another {option('count', '--count')} or "
                              f"{option('region', '--region')}, or `gpucloud offers` "
                              "without filters")


__all__ = ["estimate", "no_launchable", "no_offers", "offer_rows", "offers"]
