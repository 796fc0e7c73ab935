"""Vast.ai's volumes as gpucloud volumes: listed and deleted, never created.

The contract is Vast's OpenAPI document (listVolumes ``GET /api/v0/volumes``
-> {volumes: [Volume]}, deleteVolume ``DELETE /api/v0/volumes`` with body
{id}), read with the official client (vast-cli vastai/api/storage.py:
``show_volumes`` sends ``owner=me&type=all_volume``, ``delete_volume`` sends
the id as a query parameter).

A Vast volume is rented from one host's volume offer and lives on that machine
(its row has a ``machine_id``); an instance links at most one volume, on that
same host. gpucloud cannot make that a portable ``volumes:`` entry, so it
neither creates one nor mounts one in a job. But a volume bills whether or
not an instance uses it, so gpucloud lists what the account rents (costs,
the reaper's warnings) and deletes one when asked.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from gpucloud.errors import SpecError
from gpucloud.models import Volume
from gpucloud.providers.vastai._wire import as_str, country_code, is_int, is_num

PATH = "/api/v0/volumes/"  # with the slash, like every path this adapter sends
# vast-cli's `show volumes` default ("all"): the account's own volumes, local
# and network alike. The spec names no parameters; a volume left out of the
# listing would bill unseen.
LIST_PARAMS = {"owner": "me", "type": "all_volume"}


def refusal(provider: str) -> SpecError:
    """Why gpucloud creates no Vast volume (exit 2, before any request)."""
    return SpecError(
        f"{provider} volumes cannot be created or mounted by gpucloud: a Vast volume is "
        "rented from one host's volume offer and ties every job that uses it to that machine",
        hint="rent one with `vastai search volumes` / `vastai create volume` or in Vast's "
             "console; it then shows in `gpucloud volumes list` (and its cost with it)")


def checked_id(volume_id: str) -> int:
    if not volume_id.isdigit():
        raise SpecError(f"not a Vast volume id: {volume_id!r}",
                        hint="Vast volume ids are numbers (REF in `gpucloud volumes list`)")
    return int(volume_id)


def delete_request(volume_id: str) -> tuple[dict[str, Any], dict[str, int]]:
    """(query parameters, JSON body) of a delete: the id in both. The spec puts
    it in the body, the official client in the query; either reading finds it."""
    ident = checked_id(volume_id)
    return {"id": ident}, {"id": ident}


def volume_of(provider: str, raw: Any) -> Volume:
    """One row of the listing. Raises TypeError/ValueError on a row that is not one.

    * name: the row's ``name`` where Vast gives one, else ``V.<id>``, the name
      Vast itself uses for a volume (rentVolume's ``volume_name``, "V.20118481";
      vast-cli's copy takes "V.<id>").
    * size_gb: ``disk_space`` (GB), a fraction rounded UP to a whole GB, so a
      size is never understated.
    * region: the country code of ``geolocation`` where the row carries one
      (as for Vast instances), else None: the spec's Volume has no location.
    * price_per_gb_month: None (unknown). The row's ``storage_total_cost`` is
      what the volume has cost so far, not a rate, and no rate can be derived
      from it (the size may have changed, the period it covers is not stated).
    * attached_to: the ids in ``instances`` (numbers, or objects with an ``id``).
    * created_at: ``start_date`` (Unix seconds).
    """
    if not isinstance(raw, dict) or not is_int(raw.get("id")):
        raise TypeError("a volume without an integer id")
    ident = raw["id"]
    space: Any = raw.get("disk_space")
    if not is_num(space) or space < 0:
        raise ValueError(f"volume {ident}: disk_space {space!r} is not a size in GB")
    name = (as_str(raw.get("name")) or "").strip() or f"V.{ident}"
    start: Any = raw.get("start_date")
    status = as_str(raw.get("status"))
    return Volume(
        provider=provider, id=str(ident), name=name, size_gb=math.ceil(space),
        region=country_code(raw.get("geolocation")), price_per_gb_month=None,
        status=status, attached_to=_attached(raw.get("instances")),
        created_at=datetime.fromtimestamp(start, timezone.utc) if is_num(start) else None)


def _attached(raw: Any) -> tuple[str, ...]:
    """The instance ids of ``instances``: the spec says objects; a bare id is taken too."""
    out: list[str] = []
    for item in raw if isinstance(raw, list) else ():
        ident = item.get("id") if isinstance(item, dict) else item
        if is_int(ident) or (isinstance(ident, str) and ident.isdigit()):
            out.append(str(ident))
    return tuple(out)
