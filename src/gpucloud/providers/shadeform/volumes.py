"""Shadeform's volumes as gpucloud volumes: the requests and their parsing
behind the adapter's list_volumes, create_volume and delete_volume.

The contract is Shadeform's OpenAPI 3 document (tests/fixtures/shadeform/
openapi.yaml): ``GET /volumes``, ``POST /volumes/create`` {cloud, region,
size_in_gb, name} answered with the new id, ``GET /volumes/{id}/info``,
``POST /volumes/{id}/delete`` and ``GET /volumes/types`` [{cloud, region,
price_per_gb_per_hour}]. A volume belongs to one upstream cloud and region:
a create names the cloud, found from ``/volumes/types`` for the region asked
for ("<cloud>:<region>" picks one where several clouds sell volumes there).
The price is that list's ``price_per_gb_per_hour`` times the catalog's hours
per month; a volume whose cloud and region it does not list has none
(unknown). A Volume has no status in the contract; ``mounted_by`` names the
machine using it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from gpucloud.catalog.pricing import HOURS_PER_MONTH
from gpucloud.errors import SpecError
from gpucloud.models import Volume, VolumeSpec
from gpucloud.providers.adapter_calls import AdapterCalls
from gpucloud.providers.base import Flow
from gpucloud.providers.shadeform import _wire as wire

if TYPE_CHECKING:
    import httpx



class Shadeform(AdapterCalls, Protocol):
    """What the volume flows need of the adapter (adapter.py imports this module)."""

    def _body(self, response: httpx.Response) -> dict[str, Any]: ...


def list_volumes(provider: Shadeform) -> Flow[list[Volume]]:
    response = yield provider.request("GET", "/volumes")
    raw = provider._body(response).get("volumes")
    if not isinstance(raw, list):
        raise provider.invalid(response, "no volumes list")
    prices = yield from _prices(provider)
    return [_volume(provider, response, item, prices) for item in raw]


def create_volume(provider: Shadeform, spec: VolumeSpec) -> Flow[Volume]:
    prices = yield from _prices(provider)
    wanted_cloud, sep, region = spec.region.partition(":")
    if not sep:
        wanted_cloud, region = "", spec.region
    clouds = sorted({c for c, r in prices if r == region
                     and (not wanted_cloud or c == wanted_cloud)})
    if len(clouds) != 1:
        sold = ", ".join(sorted(f"{c}:{r}" for c, r in prices)) or "none listed"
        why = "no cloud sells" if not clouds else f"{', '.join(clouds)} sell"
        raise SpecError(f"{why} Shadeform volumes in {spec.region!r}",
                        hint=f"name one as <cloud>:<region> ({sold})")
    body = {"cloud": clouds[0], "region": region, "size_in_gb": spec.size_gb,
            "name": spec.name}
    response = yield provider.request("POST", "/volumes/create", json=body, kind="unsafe")
    volume_id = wire.text(provider._body(response).get("id"))
    if not volume_id:
        raise provider.invalid(response, "no volume id in the reply")
    response = yield provider.request("GET", volume_path(volume_id, "info"))
    return _volume(provider, response, provider._body(response), prices)


def delete_volume(provider: Shadeform, volume_id: str) -> Flow[None]:
    response = yield provider.request("POST", volume_path(volume_id, "delete"),
                                      kind="idempotent")
    provider.raise_for_error(response)


def volume_path(volume_id: str, action: str) -> str:
    return f"/volumes/{quote(volume_id, safe='')}/{action}"


def _prices(provider: Shadeform) -> Flow[dict[tuple[str, str], Decimal | None]]:
    """(cloud, region) -> USD per GB-month, for each volume type listed."""
    response = yield provider.request("GET", "/volumes/types")
    types = provider._body(response).get("volume_types")
    if not isinstance(types, list) or not all(isinstance(t, dict) for t in types):
        raise provider.invalid(response, "no volume_types list")
    month = Decimal(provider.catalog.hours_per_month or HOURS_PER_MONTH)
    return {(c, r): wire.per_gb_month(t.get("price_per_gb_per_hour"), month)
            for t in types
            if (c := wire.text(t.get("cloud"))) and (r := wire.text(t.get("region")))}


def _volume(provider: Shadeform, response: httpx.Response, raw: Any,
            prices: dict[tuple[str, str], Decimal | None]) -> Volume:
    if not isinstance(raw, dict) or not wire.text(raw.get("id")):
        raise provider.invalid(response, "a volume without id")
    cloud, region = wire.text(raw.get("cloud")), wire.text(raw.get("region"))
    mounted_by = wire.text(raw.get("mounted_by"))
    size = raw.get("size_in_gb")
    if not isinstance(size, int) or isinstance(size, bool):
        raise provider.invalid(response, f"volume {raw['id']!r}: size_in_gb is not an integer")
    try:
        return Volume(
            provider=provider.name, id=raw["id"], name=wire.text(raw.get("name")) or "",
            size_gb=size, region=region,
            price_per_gb_month=prices.get((cloud or "", region or "")),
            attached_to=(mounted_by,) if mounted_by else ())
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError included
        raise provider.invalid(response, f"volume {raw['id']!r}: {exc}") from exc


__all__ = ["create_volume", "delete_volume", "list_volumes", "volume_path"]
