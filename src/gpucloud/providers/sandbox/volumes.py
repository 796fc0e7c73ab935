"""The sandbox adapter's side of /v1/volumes: the requests and the
translation of the simulated cloud's volumes into ``Volume`` (the cloud's
side is volume_sim.py)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from gpucloud.models import Volume, VolumeSpec
from gpucloud.providers.base import Flow
from gpucloud.providers.times import parse_utc

if TYPE_CHECKING:
    import httpx

    from gpucloud.providers.base import Provider


def list_volumes(adapter: Provider) -> Flow[list[Volume]]:
    response = yield adapter.request("GET", "/v1/volumes")
    adapter.raise_for_error(response)
    body = adapter.json(response)
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise adapter.invalid(response, 'expected {"data": [...]}')
    return [_volume(adapter, response, item) for item in body["data"]]


def create_volume(adapter: Provider, spec: VolumeSpec) -> Flow[Volume]:
    response = yield adapter.request(
        "POST", "/v1/volumes", json={"name": spec.name, "size_gb": spec.size_gb,
                                     "region": spec.region}, kind="launch")
    adapter.raise_for_error(response)
    return _volume(adapter, response, adapter.json(response))


def delete_volume(adapter: Provider, volume_id: str) -> Flow[None]:
    response = yield adapter.request("DELETE", f"/v1/volumes/{quote(volume_id, safe='')}",
                                     kind="idempotent")
    adapter.raise_for_error(response)


def _volume(adapter: Provider, response: httpx.Response, item: Any) -> Volume:
    try:
        price = item.get("price_per_gb_month")
        return Volume(
            provider=adapter.name, id=str(item["id"]), name=str(item["name"]),
            size_gb=int(item["size_gb"]), region=item.get("region"),
            price_per_gb_month=Decimal(str(price)) if price is not None else None,
            status=item.get("status"), attached_to=tuple(item.get("attached_to") or ()),
            created_at=parse_utc(item.get("created_at")), simulated=True)
    except (KeyError, TypeError, ValueError, InvalidOperation, AttributeError) as exc:
        raise adapter.invalid(response, f"bad volume: {exc!r}") from exc


__all__ = ["create_volume", "delete_volume", "list_volumes"]
