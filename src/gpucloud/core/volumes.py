"""Operations on network volumes: list, create, delete.

Provider-agnostic: every adapter whose ``capabilities.volumes`` is True
answers list_volumes / create_volume / delete_volume (providers/base.py).
A listing covers every provider in scope that has volumes (one provider's
failure is a warning, as for machines) and keeps the cost ledger's record of
volumes up to date (safety/ledger_volumes.py): a volume is billed by the
GB-month from creation to deletion, machine or not.

A volume is named by ``provider/id`` or by its name where that is unique
among the listed volumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucloud.core.instructions import Call, Op
from gpucloud.core.listings import each_provider
from gpucloud.errors import NotFoundError, SpecError

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.models import Volume


def volume_providers(ctx: ClientContext, provider: str | None = None) -> list[str]:
    """The providers in scope with volumes and a credential. A provider asked
    for by name that has no volumes is a SpecError (exit 2) naming those that do."""
    names = ctx.scope(provider, listing=True)
    if provider is not None:
        # Refused before credentials are looked for: none would make it work.
        if not ctx.has_adapter(provider) or not ctx.adapter(provider).capabilities.volumes:
            with_volumes = [n for n in ctx.known if ctx.has_adapter(n)
                            and ctx.adapter(n).capabilities.volumes]
            raise SpecError(f"{provider} has no network volumes in gpucloud",
                            hint=f"providers with volumes: {', '.join(with_volumes) or 'none'}")
        ctx.require_callable(provider)
        return [provider]
    return [n for n in names if ctx.can_call(n) and ctx.adapter(n).capabilities.volumes]


def list_volumes(ctx: ClientContext, provider: str | None = None) -> Op:
    """Every volume on the providers in scope that have volumes; each listing
    recorded in the cost ledger."""
    names = volume_providers(ctx, provider)
    answered = yield from each_provider(ctx, names, lambda a: a.list_volumes(), "volumes",
                                        provider)
    out: list[Volume] = []
    for name, result in answered:
        out.extend(result)
        record_listing(ctx, name, result)
    return sorted(out, key=lambda v: (v.provider, v.name, v.id))


def record_listing(ctx: ClientContext, provider: str, volumes: list[Volume]) -> None:
    """A whole listing of one provider's volumes, into the cost ledger."""
    from gpucloud.safety.ledger_volumes import VolumeLedger, hours_per_month

    ctx.tolerant("the cost ledger did not record the volumes listed",
                 VolumeLedger(ctx.journal).seen, provider, volumes,
                 hours_per_month(ctx, provider))


def plan_volume(ctx: ClientContext, name: str, size_gb: int, region: str | None = None,
                provider: str | None = None) -> Op:
    """The volume a create would make, as a Volume with no id yet (status
    "planned") and the provider's rate for new volumes (None: unknown), so its
    monthly cost can be shown before anything is spent. Refused here when the
    provider has no volumes, the region is not one of the provider's, or the
    name is taken."""
    from gpucloud.models import Volume

    if not isinstance(name, str) or not name.strip():
        raise SpecError("a volume needs a name", hint="e.g. `gpucloud volumes create data "
                                                      "--size-gb 100`")
    if isinstance(size_gb, bool) or not isinstance(size_gb, int) or size_gb < 1:
        raise SpecError(f"volume size must be a positive number of GB, got {size_gb!r}",
                        hint="e.g. --size-gb 100 (size_gb=100)")
    chosen = _one_provider(ctx, provider)
    region = _region(ctx, chosen, region)
    existing = yield from list_volumes(ctx, chosen)
    taken = [v for v in existing if v.name == name]
    if taken:
        raise SpecError(f"a volume named {name!r} exists on {chosen}: {taken[0].ref} "
                        f"({taken[0].size_gb} GB, {taken[0].region or 'region unknown'})",
                        hint="pick another name, or use that volume (a job mounts it by name)")
    return Volume(provider=chosen, id="", name=name, size_gb=size_gb, region=region,
                  price_per_gb_month=ctx.adapter(chosen).volume_rate(size_gb),
                  status="planned", simulated=ctx.catalogs[chosen].simulated)


def create_volume(ctx: ClientContext, name: str, size_gb: int, region: str | None = None,
                  provider: str | None = None, source: str = "create") -> Op:
    """Create a volume, checked first as plan_volume does."""
    from gpucloud.models import VolumeSpec

    planned = yield from plan_volume(ctx, name, size_gb, region, provider)
    volume: Volume = yield Call(planned.provider, ctx.adapter(planned.provider).create_volume(
        VolumeSpec(name=name, size_gb=size_gb, region=planned.region)))
    record_created(ctx, volume, source)
    return volume


def record_created(ctx: ClientContext, volume: Volume, source: str,
                   job_ref: str | None = None, project: str | None = None) -> None:
    from gpucloud.safety.ledger_volumes import VolumeLedger, hours_per_month

    ctx.tolerant(f"volume {volume.ref}: its creation is not in the cost ledger",
                 VolumeLedger(ctx.journal).add, volume, hours_per_month(ctx, volume.provider),
                 source, job_ref, project=project)


def _one_provider(ctx: ClientContext, provider: str | None) -> str:
    """The provider a create goes to. One whose volumes gpucloud only lists and
    deletes (volume_refusal) is refused before credentials are looked for, and
    is never picked when no provider is named."""
    if provider is not None and ctx.has_adapter(provider):
        refusal = ctx.adapter(provider).volume_refusal()
        if refusal is not None:
            raise refusal
    names = [n for n in volume_providers(ctx, provider)
             if ctx.adapter(n).volume_refusal() is None]
    if len(names) == 1:
        return names[0]
    if not names:
        raise SpecError("no provider in scope has network volumes",
                        hint="name one with volumes: --provider (provider=), e.g. sandbox; "
                             "`gpucloud providers` shows them")
    raise SpecError(f"which provider? {', '.join(names)} all have volumes",
                    hint="name one: --provider (provider=)")


def _region(ctx: ClientContext, provider: str, region: str | None) -> str:
    regions = tuple(ctx.catalogs[provider].regions) if provider in ctx.catalogs else ()
    if region is None:
        if len(regions) == 1:
            return regions[0]
        raise SpecError(f"a volume lives in one region: which one on {provider}?",
                        hint=f"--region (region=): {', '.join(regions) or 'see the provider'}"
                             "; a job mounts it only on a machine in that region")
    if regions and region not in regions:
        raise SpecError(f"{provider} has no region {region!r}",
                        hint=f"its regions: {', '.join(regions)}")
    return region


def find(ctx: ClientContext, ref: str) -> Op:
    """The one volume `ref` names: provider/id, or a unique name (or id)."""
    text = str(ref).strip()
    provider = text.split("/", 1)[0] if "/" in text else None
    if provider is not None and provider in ctx.catalogs:
        listed = yield from list_volumes(ctx, provider)
        ident = text.split("/", 1)[1]
        matches = [v for v in listed if v.id == ident]
    else:
        listed = yield from list_volumes(ctx)
        matches = [v for v in listed if text in (v.name, v.id)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise SpecError(f"{text!r} names {len(matches)} volumes: "
                        + ", ".join(v.ref for v in matches),
                        hint="name the volume by its provider/id (REF in `gpucloud volumes list`)")
    raise NotFoundError(f"no volume {text!r}", provider=provider or "any", status_code=404,
                        hint="`gpucloud volumes list` shows the volumes; name one by "
                             "provider/id or its name")


def delete_volume(ctx: ClientContext, ref: Volume | str, force: bool = False) -> Op:
    """Delete a volume; its data is gone for good. One a machine still uses is
    refused unless `force`."""
    from gpucloud.models import Volume

    volume = ref if isinstance(ref, Volume) else (yield from find(ctx, ref))
    if volume.attached_to and not force:
        raise SpecError(f"volume {volume.ref} ({volume.name}) is in use by "
                        f"{', '.join(volume.attached_to)}",
                        hint="end those machines first, or pass --force (force=True) to "
                             "delete it from under them")
    yield Call(volume.provider, ctx.adapter(volume.provider).delete_volume(volume.id))
    record_deleted(ctx, volume.provider, volume.id)


def record_deleted(ctx: ClientContext, provider: str, volume_id: str) -> None:
    from gpucloud.safety.ledger_volumes import VolumeLedger

    ctx.tolerant(f"volume {provider}/{volume_id}: its deletion is not in the cost ledger",
                 VolumeLedger(ctx.journal).deleted, provider, volume_id)


def unattached_warnings(ctx: ClientContext, providers: list[str]) -> list[str]:
    """One line per volume of `providers` (those with volumes) that bills with
    no machine for over a day, per the cost ledger (when a listing last saw
    one attached, else its creation). Reads the ledger only: nothing is asked
    of the providers, so a machine listing pays one query at most, and none
    when no provider in scope has volumes or nothing was ever recorded."""
    with_volumes = [n for n in providers if ctx.adapter(n).capabilities.volumes]
    if not with_volumes or not ctx.journal.exists():
        return []
    from gpucloud.safety.journal import utcnow
    from gpucloud.safety.ledger_volumes import VolumeLedger, unattached, warning

    records = ctx.tolerant("volumes without a machine are not looked for",
                           VolumeLedger(ctx.journal).records, with_volumes, True) or []
    now = utcnow()
    return [warning(r, now) for r in unattached(records, now)]


__all__ = ["create_volume", "delete_volume", "find", "list_volumes", "plan_volume",
           "record_created", "record_deleted", "record_listing", "unattached_warnings",
           "volume_providers"]
