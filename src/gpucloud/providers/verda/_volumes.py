"""Verda's volumes as gpucloud volumes, and how a job's VM mounts them: the
requests and parsing behind the adapter's list_volumes, create_volume,
delete_volume and a job's volume mounts.

The contract is sdk-python's ``VolumesService`` / ``VolumeTypesService``
(verda/volumes/_volumes.py, verda/volume_types/_volume_types.py): ``GET
/volumes`` (a bare list), ``GET /volumes/{id}``, ``POST /volumes`` {type, name,
size, instance_id, location_code} answered with the new id as plain text,
``DELETE /volumes/{id}`` {is_permanent}, ``GET /volume-types`` [{type, price:
{currency, price_per_month_per_gb}}].

gpucloud makes shared filesystems (type ``NVMe_Shared``): the one Verda volume
type several machines use at once, over NFS, which a multi-node job needs. A
machine's own OS volume is part of that machine, never listed as a volume.

A job's VM gets its volumes attached at launch (``existing_volumes``), but
Verda mounts nothing in the OS: the start-up script mounts each shared
filesystem with the NFS source of the volume's own ``mount_command`` (at
/mnt/gpucloud/<id>), then binds it into the container. A block volume
(NVMe, HDD) would need a file system made on it first: a job refuses it.
"""

from __future__ import annotations

import shlex
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from gpucloud.errors import SpecError
from gpucloud.models import JobRun, Volume, VolumeSpec
from gpucloud.providers.adapter_calls import AdapterCalls
from gpucloud.providers.base import Flow
from gpucloud.providers.verda import _wire as wire

if TYPE_CHECKING:
    import httpx


SHARED = "NVMe_Shared"  # sdk-python VolumeTypes.SFS
HOST_ROOT = "/mnt/gpucloud"


class Verda(AdapterCalls, Protocol):
    """What the volume flows need of the adapter (adapter.py imports this module)."""

    def _body(self, response: httpx.Response, expected: type) -> Any: ...


def list_volumes(provider: Verda) -> Flow[list[Volume]]:
    response = yield provider.request("GET", "/volumes")
    listed = provider._body(response, list)
    prices = yield from _type_prices(provider)
    return [_volume(provider, response, raw, prices) for raw in listed
            if not (isinstance(raw, dict) and raw.get("is_os_volume") is True)]


def create_volume(provider: Verda, spec: VolumeSpec) -> Flow[Volume]:
    # The body sdk-python's volumes.create() sends, field for field.
    response = yield provider.request("POST", "/volumes", kind="unsafe", json={
        "type": SHARED, "name": spec.name, "size": spec.size_gb,
        "instance_id": None, "location_code": spec.region})
    provider.raise_for_error(response)
    volume_id = wire.plain_id(response)
    if volume_id is None:
        raise provider.invalid(response, "no volume id in the reply")
    response = yield provider.request("GET", f"/volumes/{quote(volume_id, safe='')}")
    raw = provider._body(response, dict)
    prices = yield from _type_prices(provider)
    return _volume(provider, response, raw, prices)


def delete_volume(provider: Verda, volume_id: str) -> Flow[None]:
    # is_permanent: a volume in Verda's trash is out of gpucloud's sight.
    response = yield provider.request("DELETE", f"/volumes/{quote(volume_id, safe='')}",
                                      json={"is_permanent": True}, kind="idempotent")
    provider.raise_for_error(response)


def job_volumes(provider: Verda, job: JobRun
                ) -> Flow[tuple[list[tuple[str, str]], list[str]]]:
    """(host directory, container path) binds and the setup shell mounting
    each of the job's volumes; each is read for its type and NFS source."""
    mounts: list[tuple[str, str]] = []
    setup: list[str] = []
    for volume in job.volumes:
        if not volume.volume_id:
            raise SpecError(f"job {job.name!r}: volume {volume.name!r} has no verda id yet",
                            hint="create it first (`gpucloud volumes create`)")
        response = yield provider.request("GET",
                                          f"/volumes/{quote(volume.volume_id, safe='')}")
        host, lines = nfs_mount(provider._body(response, dict), volume.name)
        mounts.append((host, volume.mount))
        setup += lines
    return mounts, setup


def _type_prices(provider: Verda) -> Flow[dict[str, Any]]:
    response = yield provider.request("GET", "/volume-types")
    return type_prices(provider._body(response, list))


def _volume(provider: Verda, response: httpx.Response, raw: Any,
            prices: dict[str, Any]) -> Volume:
    if not isinstance(raw, dict) or not wire.text(raw.get("id")):
        raise provider.invalid(response, "a volume without an id")
    size = wire.integer(raw.get("size"))
    if size is None:
        raise provider.invalid(response, f"volume {raw['id']!r}: size is not an integer")
    try:
        return Volume(
            provider=provider.name, id=raw["id"], name=wire.text(raw.get("name")) or "",
            size_gb=size, region=wire.text(raw.get("location")),
            price_per_gb_month=price_per_gb_month(raw, prices),
            status=wire.text(raw.get("status")), attached_to=attached_ids(raw),
            created_at=wire.parse_utc(raw.get("created_at")))
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError included
        raise provider.invalid(response, f"volume {raw['id']!r}: {exc}") from exc


def price_per_gb_month(raw: dict[str, Any], types: dict[str, Decimal]) -> Decimal | None:
    """USD per GB-month: the volume's own monthly_price over its size when it is
    in USD (its contract's rate), else its type's USD rate from /volume-types;
    None when neither is in USD."""
    size = wire.integer(raw.get("size"))
    if raw.get("currency") == "usd" and size:
        try:
            monthly = wire.money(raw.get("monthly_price"))
        except (TypeError, ValueError):
            monthly = None
        if monthly is not None:
            return monthly / size
    kind = wire.text(raw.get("type"))
    return types.get(kind) if kind else None


def type_prices(raw: Any) -> dict[str, Decimal]:
    """/volume-types: type -> USD per GB-month, for the types priced in USD."""
    out: dict[str, Decimal] = {}
    for entry in raw if isinstance(raw, list) else ():
        price = entry.get("price") if isinstance(entry, dict) else None
        kind = wire.text(entry.get("type")) if isinstance(entry, dict) else None
        if not kind or not isinstance(price, dict) or price.get("currency") != "usd":
            continue
        try:
            rate = wire.money(price.get("price_per_month_per_gb"))
        except (TypeError, ValueError):
            continue
        if rate is not None:
            out[kind] = rate
    return out


def attached_ids(raw: dict[str, Any]) -> tuple[str, ...]:
    """The machines using the volume: ``instances[].id``, else ``instance_id``."""
    ids = [wire.text(i.get("id")) for i in raw.get("instances") or () if isinstance(i, dict)]
    found = tuple(i for i in ids if i)
    if found:
        return found
    single = wire.text(raw.get("instance_id"))
    return (single,) if single else ()


def nfs_mount(raw: dict[str, Any], name: str) -> tuple[str, list[str]]:
    """(host directory, setup shell) mounting a shared filesystem on the VM, from
    the NFS source and options of its ``mount_command`` ("mount -t nfs -o
    nconnect=16 nfs.fin-01.datacrunch.io:volume-xyz /mnt/volume"); a volume
    that is no shared filesystem, or whose command reads otherwise, is refused."""
    kind = wire.text(raw.get("type"))
    if kind != SHARED:
        raise SpecError(
            f"verda volume {name!r} is a {kind or 'volume of unknown type'}, which a job "
            "cannot mount (a block volume needs a file system made on it first)",
            hint=f"use a shared filesystem ({SHARED}), e.g. one `gpucloud volumes create` made")
    command = wire.text(raw.get("mount_command")) or ""
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = []
    source, options = _nfs_source(argv)
    volume_id = wire.text(raw.get("id")) or ""
    if source is None or not wire.UUID.fullmatch(volume_id):
        raise SpecError(f"verda volume {name!r}: its mount command {command!r} is not the "
                        "NFS mount gpucloud reads",
                        hint="mount it over SSH instead (`gpucloud ssh REF`)")
    host = f"{HOST_ROOT}/{volume_id}"
    mount = ["mount", "-t", "nfs", *(["-o", options] if options else []), source, host]
    where = shlex.quote(host)
    # A failed mount ends the job (status 1, in the job log) instead of running
    # it without its data: the exit status makes the runner skip to its end.
    return host, [
        f"mkdir -p {where}",
        f"mountpoint -q {where} || {' '.join(shlex.quote(a) for a in mount)} || {{ "
        f"echo 'gpucloud: could not mount volume {volume_id}' "
        '>>"$GC_STATE/job.log"; echo 1 >"$GC_STATE/exit-status"; }',
    ]


def _nfs_source(argv: list[str]) -> tuple[str | None, str | None]:
    """(server:path, -o options) of ``mount -t nfs [-o OPTS] SOURCE TARGET``."""
    if len(argv) < 5 or argv[0] != "mount" or argv[1:3] != ["-t", "nfs"]:
        return None, None
    rest = argv[3:]
    options = None
    if rest[0] == "-o" and len(rest) >= 2:
        options, rest = rest[1], rest[2:]
    if len(rest) != 2 or ":" not in rest[0] or rest[0].startswith("-"):
        return None, None
    return rest[0], options
