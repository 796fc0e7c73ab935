"""RunPod's offers: ``GET /v2/catalog/gpus`` with ``include=AVAILABILITY``
(which needs ``product=POD``), per GPU count and per cloud, read as offers;
and the canonical GPU name of a GpuType, which a pod's ``gpu`` is too.

Availability differs between SECURE (RunPod's data centers) and COMMUNITY
(hosted) machines, so the community list is read only when a matching GPU is
sold there. Prices are per GPU; an offer is priced for the whole pod, and
named ``"<count>x <GpuType id>"`` (``" (community)"`` appended for the
community cloud), as in providers/runpod.toml.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from gpucloud.catalog.gpus import gpu_info, normalize_gpu
from gpucloud.models import Offer
from gpucloud.providers.adapter_calls import AdapterCalls
from gpucloud.providers.base import Flow, OfferQuery
from gpucloud.providers.runpod import _wire as wire

if TYPE_CHECKING:
    import httpx


CLOUDS = ("SECURE", "COMMUNITY")


class RunPod(AdapterCalls, Protocol):
    """What the offer flows need of the adapter (adapter.py imports this module)."""

    def _field(self, response: httpx.Response, key: str) -> list[Any]: ...


def offers(provider: RunPod, query: OfferQuery) -> Flow[list[Offer]]:
    if query.spot:
        return []  # no spot pods on v2
    count = query.count or 1
    out: list[Offer] = []
    for cloud in CLOUDS:
        response = yield provider.request("GET", "/v2/catalog/gpus", params={
            "include": "AVAILABILITY", "product": "POD", "count": count, "cloud": cloud})
        offers, community = _read_catalog(provider, response, cloud, count, query)
        out.extend(offers)
        if not community:
            break  # nothing that matches is sold on the community cloud
    return out


def _read_catalog(provider: RunPod, response: httpx.Response, cloud: str, count: int,
                  query: OfferQuery) -> tuple[list[Offer], bool]:
    """Offers of one cloud, and whether the community cloud sells a match too."""
    offers: list[Offer] = []
    community = False
    for raw in provider._field(response, "gpus"):
        try:
            gpu = gpu_of(raw)
            if wire.sells(raw, cloud, count, query, gpu):
                offers.extend(_offers_of(provider.name, raw, gpu, cloud, count, query))
            community = community or wire.sells(raw, "COMMUNITY", count, query, gpu)
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
            ident = raw.get("id") if isinstance(raw, dict) else raw
            raise provider.invalid(response, f"GPU type {ident!r}: "
                                             f"{type(exc).__name__}: {exc}") from exc
    return offers, community


def gpu_of(raw: Any) -> str:
    """Canonical name of a GpuType: by its id, else its display name."""
    if not isinstance(raw, dict) or not wire.text(raw.get("id")):
        raise ValueError("a GPU type without an id")
    gpu = normalize_gpu(raw["id"])
    if gpu_info(gpu) is None and wire.text(raw.get("name")) and gpu_info(
            normalize_gpu(raw["name"])) is not None:
        return normalize_gpu(raw["name"])
    return gpu


def _offers_of(provider_name: str, raw: dict[str, Any], gpu: str, cloud: str, count: int,
               query: OfferQuery) -> list[Offer]:
    key = cloud.lower()
    name = f"{count}x {raw['id']}" + (
        wire.COMMUNITY_SUFFIX if cloud == "COMMUNITY" else "")
    price = wire.money(raw["price"][key]) * count
    memory = wire.integer(raw["memory"])
    live: dict[str, bool] = {}
    for dc in raw.get("dataCenters") or ():
        if not wire.text(dc["id"]) or not wire.text(dc["availability"]):
            raise ValueError("a data center without id or availability")
        live[dc["id"]] = dc["availability"] != "NONE"
    # The live list names every data center that carries the type (sold out
    # ones with availability NONE): no catalog region is added to it.
    return [
        Offer(provider=provider_name, instance_type=name, region=region, gpu=gpu,
              gpu_count=count, gpu_memory_gb=memory, price_per_hour=price,
              spot=False, available=available, source="live")
        for region, available in live.items()
        if query.region is None or region == query.region
    ]


__all__ = ["CLOUDS", "gpu_of", "offers"]
