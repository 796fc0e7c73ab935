"""Lambda's filesystems as gpucloud volumes, and how a job's machines mount
them: the requests and parsing behind the adapter's list_volumes,
create_volume, delete_volume and a job's mounts.

The contract is Lambda's OpenAPI 1.8.3 (GET /api/v1/file-systems, POST
/api/v1/filesystems, DELETE /api/v1/filesystems/{id}): shared NFS storage of
one region. A create takes a name and a region, no size: a filesystem grows
with what is written and is billed per GiB used, so ``size_gb`` is
``bytes_used`` rounded up to GiB (0 until Lambda's estimate, "updated every
few hours", says more). ``is_in_use`` names no machines, so ``attached_to``
stays empty. Lambda publishes no current storage rate in its API (its billing
page gives one "for example purposes" only): ``price_per_gb_month`` is None.

A launch names the filesystems it mounts (``file_system_names``); Lambda
mounts each at /lambda/nfs/<name> on the host, and the job's runner binds that
directory into the container at the job's mount path. One filesystem mounts
on many instances at once (``Filesystem.mount_point``: "where on instances
the filesystem will be mounted"), so every node of a multi-node job is
launched with the job's filesystems.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from gpucloud.errors import SpecError
from gpucloud.models import Volume, VolumeMount, VolumeSpec
from gpucloud.providers.adapter_calls import AdapterCalls
from gpucloud.providers.base import Flow, parse_utc
from gpucloud.providers.lambdalabs import _wire as wire

if TYPE_CHECKING:
    import httpx


class Lambda(AdapterCalls, Protocol):
    """What the filesystem flows need of the adapter (adapter.py imports this module)."""

    def _data(self, response: httpx.Response, expected: type) -> Any: ...


def list_volumes(provider: Lambda) -> Flow[list[Volume]]:
    response = yield provider.request("GET", "/api/v1/file-systems")
    return [_volume(provider, response, raw) for raw in provider._data(response, list)]


def create_volume(provider: Lambda, spec: VolumeSpec) -> Flow[Volume]:
    check_name(spec.name)
    # FilesystemCreateRequest has no size: the filesystem grows as it is used.
    response = yield provider.request("POST", "/api/v1/filesystems",
                                      json={"name": spec.name, "region": spec.region},
                                      kind="unsafe")
    return _volume(provider, response, provider._data(response, dict))


def delete_volume(provider: Lambda, volume_id: str) -> Flow[None]:
    response = yield provider.request(
        "DELETE", f"/api/v1/filesystems/{quote(volume_id, safe='')}", kind="idempotent")
    provider._data(response, dict)


def launch_names(volumes: Sequence[VolumeMount]) -> list[str]:
    """The launch's ``file_system_names`` for a job's volumes."""
    for volume in volumes:
        check_name(volume.name)
    return [volume.name for volume in volumes]


def host_mounts(volumes: Sequence[VolumeMount]) -> list[tuple[str, str]]:
    """(host directory, container path): where Lambda mounts each filesystem, and
    where the job's container sees it."""
    return [(f"{wire.NFS_ROOT}/{name}", volume.mount)
            for name, volume in zip(launch_names(volumes), volumes, strict=True)]


def check_name(name: str) -> None:
    # The name is also the host directory /lambda/nfs/<name>: checked, never guessed.
    if len(name) > wire.FILESYSTEM_NAME_MAX or not wire.FILESYSTEM_NAME.fullmatch(name):
        raise SpecError(f"{name!r} cannot be a Lambda filesystem name",
                        hint="use up to 60 letters, digits and '-', starting with a letter")


def _volume(provider: Lambda, response: httpx.Response, raw: Any) -> Volume:
    if not isinstance(raw, dict) or not wire.text(raw.get("id")) \
            or not wire.text(raw.get("name")):
        raise provider.invalid(response, "a filesystem without id or name")
    found = raw.get("region")
    region: dict[str, Any] = found if isinstance(found, dict) else {}
    used = raw.get("bytes_used")
    used = used if isinstance(used, int) and not isinstance(used, bool) and used > 0 else 0
    in_use = raw.get("is_in_use")
    try:
        return Volume(
            provider=provider.name, id=raw["id"], name=raw["name"],
            # Billed per GiB used; -(-a // b): rounded up, so a byte is a GiB.
            size_gb=-(-used // wire.GIB),
            region=wire.text(region.get("name")),
            status=("in use" if in_use else "not in use") if isinstance(in_use, bool)
            else None,
            created_at=parse_utc(raw.get("created")))
    except ValueError as exc:
        raise provider.invalid(response, f"filesystem {raw['id']!r}: {exc}") from exc
