"""RunPod network volumes (REST v2 ``/v2/network-volumes``) and how a pod or a
cluster mounts one: the requests and parsing behind the adapter's
list_volumes, create_volume and delete_volume.

The contract is RunPod's OpenAPI 2.0.0 (tests/fixtures/runpod/openapi-v2.json).
A NetworkVolume is {id, name, size (GB, 10..4096), dataCenter, type
(STANDARD | HIGH_PERFORMANCE)}: no status, no creation time, no price and no
list of the pods using it. Those pods are found from the pods' own
``mounts.network[].volumeId``. A pod or cluster takes at most one network
volume (``Mounts.network`` has ``maxItems: 1``) as {volumeId, path}, in the
same data center.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from gpucloud.errors import SpecError
from gpucloud.models import Volume, VolumeMount, VolumeSpec
from gpucloud.providers.adapter_calls import AdapterCalls
from gpucloud.providers.base import Flow

if TYPE_CHECKING:
    import httpx


MIN_GB, MAX_GB = 10, 4096  # CreateNetworkVolumeRequest.size

# USD per GB-month, from RunPod's pricing of network volumes
# (https://docs.runpod.io/storage/network-volumes, "Pricing" and "High
# performance storage"; runpod/docs storage/network-volumes.mdx): standard
# $0.07 for the first 1 TB and $0.05 after that, high performance $0.14.
# Above 1000 GB the standard rate depends on where "1 TB" ends (1000 or 1024
# GB, the page does not say), so no figure is given there.
STANDARD_PRICE = Decimal("0.07")
STANDARD_FLAT_UP_TO_GB = 1000
HIGH_PERFORMANCE_PRICE = Decimal("0.14")
NEW_TIER = "STANDARD"  # what create_volume asks for
PRICE_SOURCE = "https://docs.runpod.io/storage/network-volumes"


class RunPod(AdapterCalls, Protocol):
    """What the volume flows need of the adapter (adapter.py imports this module)."""

    def _object(self, response: httpx.Response) -> dict[str, Any]: ...

    def _field(self, response: httpx.Response, key: str) -> list[Any]: ...

    def _pods(self) -> Flow[httpx.Response]: ...


def list_volumes(provider: RunPod) -> Flow[list[Volume]]:
    response = yield provider.request("GET", "/v2/network-volumes")
    listed = provider._field(response, "networkVolumes")
    # The volume says nothing of its pods; the pods name their volume.
    pods = yield from provider._pods()
    attached = attachments(provider._field(pods, "pods"))
    return [_volume(provider, response, raw, attached) for raw in listed]


def new_volume_rate(size_gb: int) -> Decimal | None:
    """The rate of a volume create_volume makes (always the standard tier)."""
    return price_per_gb_month(NEW_TIER, size_gb)


def create_volume(provider: RunPod, spec: VolumeSpec) -> Flow[Volume]:
    # The tier is named, not left to RunPod's default (the contract gives
    # none), so the rate the estimate used is the one billed.
    body = {"name": spec.name, "size": checked_size(spec.size_gb),
            "dataCenter": spec.region, "type": NEW_TIER}
    response = yield provider.request("POST", "/v2/network-volumes", json=body, kind="launch")
    return _volume(provider, response, provider._object(response), {})


def delete_volume(provider: RunPod, volume_id: str) -> Flow[None]:
    response = yield provider.request("DELETE", volume_path(volume_id), kind="idempotent")
    provider.raise_for_error(response)


def _volume(provider: RunPod, response: httpx.Response, raw: Any,
            attached: dict[str, list[str]]) -> Volume:
    try:
        ident = raw.get("id") if isinstance(raw, dict) else None
        return volume_of(provider.name, raw, attached.get(ident, ()) if ident else ())
    except ValueError as exc:  # pydantic's ValidationError included
        raise provider.invalid(response, f"network volume: {exc}") from exc


def volume_path(volume_id: str) -> str:
    return f"/v2/network-volumes/{quote(volume_id, safe='')}"


def price_per_gb_month(tier: Any, size_gb: int) -> Decimal | None:
    if tier == "HIGH_PERFORMANCE":
        return HIGH_PERFORMANCE_PRICE
    if tier == "STANDARD" and size_gb <= STANDARD_FLAT_UP_TO_GB:
        return STANDARD_PRICE
    return None


def checked_size(size_gb: int) -> int:
    if not MIN_GB <= size_gb <= MAX_GB:
        raise SpecError(f"a RunPod network volume is {MIN_GB} to {MAX_GB} GB, not {size_gb}",
                        hint=f"give a size between {MIN_GB} and {MAX_GB} GB")
    return size_gb


def attachments(pods: Iterable[Any]) -> dict[str, list[str]]:
    """Volume id -> ids of the pods that mount it, from the pods' own mounts."""
    found: dict[str, list[str]] = {}
    for pod in pods:
        if not isinstance(pod, dict) or not isinstance(pod.get("id"), str):
            continue
        mounts = pod.get("mounts")
        network = mounts.get("network") if isinstance(mounts, dict) else None
        for mount in network if isinstance(network, list) else ():
            if isinstance(mount, dict) and isinstance(mount.get("volumeId"), str):
                found.setdefault(mount["volumeId"], []).append(pod["id"])
    return found


def volume_of(provider: str, raw: Any, attached: Sequence[str] = ()) -> Volume:
    """A NetworkVolume read as a Volume; ValueError when it lacks what the spec
    requires (the caller reports the reply as unreadable)."""
    if not isinstance(raw, dict):
        raise ValueError("a network volume that is not an object")
    ident, name, size = raw.get("id"), raw.get("name"), raw.get("size")
    if not isinstance(ident, str) or not ident or not isinstance(name, str) \
            or not isinstance(size, int) or isinstance(size, bool):
        raise ValueError("a network volume without id, name or size")
    region = raw.get("dataCenter")
    return Volume(provider=provider, id=ident, name=name, size_gb=size,
                  region=region if isinstance(region, str) and region else None,
                  price_per_gb_month=price_per_gb_month(raw.get("type"), size),
                  attached_to=tuple(attached))


def mounts(volumes: Sequence[VolumeMount], job: str) -> dict[str, Any] | None:
    """``mounts`` of a pod or cluster create for the job's volumes: RunPod takes
    one network volume per pod, so a second one is refused before any request."""
    if not volumes:
        return None
    if len(volumes) > 1:
        names = ", ".join(v.name for v in volumes)
        raise SpecError(f"job {job!r} mounts {len(volumes)} volumes ({names}); a RunPod pod "
                        "mounts one network volume",
                        hint="keep one volume in the job file's volumes on RunPod")
    volume = volumes[0]
    if not volume.volume_id:
        raise SpecError(f"job {job!r}: volume {volume.name!r} has no RunPod volume id",
                        hint="`gpucloud volumes list --provider runpod` shows the volumes")
    return {"network": [{"volumeId": volume.volume_id, "path": volume.mount}]}


__all__ = ["HIGH_PERFORMANCE_PRICE", "MAX_GB", "MIN_GB", "PRICE_SOURCE", "STANDARD_PRICE",
           "attachments", "checked_size", "create_volume", "delete_volume", "list_volumes",
           "mounts", "price_per_gb_month", "volume_of", "volume_path"]
