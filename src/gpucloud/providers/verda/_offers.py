"""Verda's offers: ``/instance-types`` (prices) joined with
``/instance-availability`` (where each type can be launched now), and the
canonical GPU name of a type or machine.

Spot is a separate availability list and ``spot_price``. A type Verda prices
is never dropped for want of capacity: with none anywhere it is offered,
unavailable, in the bundled catalog's locations for it, else in every
location ``/locations`` lists (fetched only then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from gpucloud.catalog.gpus import gpu_info, normalize_gpu
from gpucloud.models import Offer
from gpucloud.providers.adapter_calls import AdapterCalls
from gpucloud.providers.base import Flow, OfferQuery
from gpucloud.providers.verda import _wire as wire

if TYPE_CHECKING:
    import httpx



class Verda(AdapterCalls, Protocol):
    """What the offer flows need of the adapter (adapter.py imports this module)."""

    def _body(self, response: httpx.Response, expected: type) -> Any: ...


def offers(provider: Verda, query: OfferQuery) -> Flow[list[Offer]]:
    response = yield provider.request("GET", "/instance-types", params={"currency": "usd"})
    types = provider._body(response, list)
    spot = "true" if query.spot else "false"
    # sdk-python sends isSpot, the Go SDK is_spot: send both, whichever the server reads.
    response = yield provider.request("GET", "/instance-availability",
                                      params={"is_spot": spot, "isSpot": spot})
    live: dict[str, set[str]] = {}
    for entry in provider._body(response, list):
        location = wire.text(entry.get("location_code")) if isinstance(entry, dict) else None
        names = entry.get("availabilities") if isinstance(entry, dict) else None
        if location is None or not isinstance(names, list):
            raise provider.invalid(response, "an availability entry without location_code "
                                             "or availabilities")
        live.setdefault(location, set()).update(n for n in names if isinstance(n, str))
    # (offer without a region, locations with capacity, catalog locations)
    shapes: list[tuple[Offer, list[str], list[str]]] = []
    for item in types:
        try:
            shape = _offer_of(provider.name, item, query)
        except (AttributeError, KeyError, TypeError, ValueError, ArithmeticError) as exc:
            name = item.get("instance_type") if isinstance(item, dict) else None
            raise provider.invalid(response, f"instance type {name!r}: {exc}") from exc
        if shape is not None:
            name = shape.instance_type
            # Catalog locations the type is sold in but has no capacity in
            # right now are still offers, shown as unavailable.
            catalog = [r for t in provider.catalog.types_named(name) for r in t.regions
                       if not query.spot or t.spot_price is not None]
            shapes.append((shape, sorted(loc for loc, names in live.items()
                                         if name in names), catalog))
    everywhere: list[str] = []
    if any(not here and not catalog for _, here, catalog in shapes):
        # Priced, yet no capacity anywhere and not in the catalog: still an
        # offer (unavailable) in each location Verda lists, never missing.
        everywhere = yield from _locations(provider, live)
    out: list[Offer] = []
    for shape, here, catalog in shapes:
        for region in dict.fromkeys([*here, *catalog] or everywhere):
            if query.region is None or region == query.region:
                out.append(shape.model_copy(update={"region": region,
                                                    "available": region in here}))
    return out


def _locations(provider: Verda, live: dict[str, set[str]]) -> Flow[list[str]]:
    """Every location code: ``/locations`` (the SDK's locations.get()), then
    any the availability listing named that it does not."""
    response = yield provider.request("GET", "/locations")
    codes = [wire.text(entry.get("code")) if isinstance(entry, dict) else None
             for entry in provider._body(response, list)]
    if None in codes:
        raise provider.invalid(response, "a location without a code")
    return list(dict.fromkeys([*(c for c in codes if c), *sorted(live)]))


def _offer_of(provider_name: str, item: Any, query: OfferQuery) -> Offer | None:
    """The offer an instance type makes for `query`, its region still to be set;
    None when the type is not sold that way."""
    name = wire.text(item["instance_type"])
    if name is None:
        raise ValueError("no instance_type")
    gpu_count = wire.integer(item["gpu"]["number_of_gpus"])
    if gpu_count is None:
        raise TypeError("gpu.number_of_gpus is not an integer")
    if gpu_count == 0 or (query.count is not None and gpu_count != query.count):
        return None  # CPU-only types, or another count
    total_memory = wire.size_gb(item.get("gpu_memory"))
    per_gpu = total_memory // gpu_count if total_memory else None
    gpu = gpu_name(item, per_gpu)
    if query.gpu is not None and gpu != query.gpu:
        return None
    price = wire.money(item.get("spot_price") if query.spot else item.get("price_per_hour"))
    if price is None or price == 0:
        return None  # not sold this way (no spot price for this type)
    info = gpu_info(gpu)
    return Offer(provider=provider_name, instance_type=name, region="", gpu=gpu,
                 gpu_count=gpu_count,
                 gpu_memory_gb=per_gpu or (info.memory_gb if info else None),
                 vcpus=wire.integer((item.get("cpu") or {}).get("number_of_cores")),
                 memory_gb=wire.size_gb(item.get("memory")),
                 disk_gb=wire.size_gb(item.get("storage")), price_per_hour=price,
                 spot=query.spot, available=False, source="live")


def gpu_name(item: dict[str, Any], per_gpu_memory: int | None) -> str:
    """Canonical GPU name from the description ("1x H100 SXM5 80GB") or the model."""
    description = wire.text((item.get("gpu") or {}).get("description")) or ""
    model = wire.text(item.get("model")) or ""
    candidates = [description]
    if model and per_gpu_memory:
        candidates.append(f"{model} {per_gpu_memory}GB")
    candidates.append(model)
    for candidate in candidates:
        if candidate and gpu_info(normalize_gpu(candidate)) is not None:
            return normalize_gpu(candidate)
    return normalize_gpu(description or model or "unknown")


__all__ = ["gpu_name", "offers"]
