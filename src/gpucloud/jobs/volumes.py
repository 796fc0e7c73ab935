"""A job's volumes: found by name on the chosen offer's provider, checked
against its region at plan time, created before the launch where the job
says how big, and deleted with the job where it says so.

* Plan: each ``volumes:`` entry is looked up by name in the provider's
  volumes. An existing one in another region than the offer is refused
  (SpecError, exit 2) naming the region that would work: a volume mounts
  only in its own region. A missing one without ``size_gb`` is refused,
  naming ``gpucloud volumes create``. The fallbacks a launch may take are
  kept to the offer's provider and region, where the volumes are.
* Estimate: one storage line per volume over the job's window, ``size_gb x
  rate x hours / hours per month``. A new volume's line is in the plan's
  total and in ``max_cost``; an existing volume bills anyway, with or
  without the job, and its line says so and stays out of the total.
* Submit: the missing volumes are created in the offer's region (recorded
  in the cost ledger) before the launch and deleted again when the launch
  fails, so a failed submit leaves nothing billing; ``VolumeMount.volume_id``
  carries each volume's id to the adapter.
* End: a volume the job created with ``delete_with_job`` is deleted once the
  job is seen ended (``jobs cancel``, a job read or listed finished, or
  ``reap``); never one the job found already there.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpucloud.core.instructions import Call, Op
from gpucloud.errors import BudgetExceededError, GpuCloudError, SpecError, option

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.jobs.spec import JobSpec
    from gpucloud.models import CostLine, Job, JobRun, Offer, Plan, Volume


@dataclass(frozen=True)
class Resolved:
    """One ``volumes:`` entry and what the provider has of it (None: to be created)."""

    name: str
    size_gb: int | None
    existing: Volume | None
    checked: bool = True  # False: the provider could not be asked (a dry run without credentials)


def resolve(ctx: ClientContext, spec: JobSpec, offer: Offer) -> Op:
    """The job's volumes against `offer`'s provider and region; the refusals
    of the module's docstring."""
    if not spec.volumes:
        return []
    provider = offer.provider
    adapter = ctx.adapter(provider)
    names = ", ".join(v.name for v in spec.volumes)
    if not adapter.capabilities.volumes:
        raise SpecError(f"job {spec.name} mounts volumes ({names}) but {provider} has no "
                        "network volumes in gpucloud",
                        hint="run it on a provider with volumes (--provider; `gpucloud "
                             "providers` shows them)")
    refusal = adapter.volume_refusal()
    if refusal is not None:  # volumes it lists and deletes, but no job mounts
        raise SpecError(f"job {spec.name} mounts volumes ({names}) but {refusal.message}",
                        hint="run it on a provider whose jobs mount volumes (--provider; "
                             "`gpucloud providers`), or drop `volumes` from the job file")
    if not ctx.can_call(provider):  # a dry run from the catalog: nothing to ask
        return [Resolved(v.name, v.size_gb, None, checked=False) for v in spec.volumes]
    from gpucloud.core.volumes import record_listing

    listed: list[Volume] = yield Call(provider, adapter.list_volumes())
    record_listing(ctx, provider, listed)
    out, elsewhere = [], []
    for entry in spec.volumes:
        found = [v for v in listed if v.name == entry.name]
        if not found:
            if entry.size_gb is None:
                raise SpecError(
                    f"job {spec.name}: no volume named {entry.name!r} on {provider}",
                    hint=f"create it first: `gpucloud volumes create {entry.name} --size-gb N "
                         f"--provider {provider} --region {offer.region}`, or give size_gb "
                         "in the job file so the job creates it")
            out.append(Resolved(entry.name, entry.size_gb, None))
            continue
        volume = found[0]
        if volume.region is not None and volume.region != offer.region:
            elsewhere.append(volume)
        out.append(Resolved(entry.name, entry.size_gb, volume))
    if elsewhere:
        regions = sorted({v.region for v in elsewhere if v.region})
        raise SpecError(
            f"job {spec.name}: " + ", ".join(f"volume {v.name} is in {v.region}"
                                             for v in elsewhere)
            + f", the chosen offer in {offer.region}: a volume mounts only in its own region",
            hint=(f"run the job in {' or '.join(regions)}: --region {regions[0]} (region: in "
                  "the job file)") if len(regions) == 1 else
            "the volumes are in different regions: no machine can mount them all")
    return out


def rate_of(ctx: ClientContext, entry: Resolved, provider: str) -> Decimal | None:
    if entry.existing is not None:
        return entry.existing.price_per_gb_month
    return ctx.adapter(provider).volume_rate(entry.size_gb or 0)


def storage_lines(ctx: ClientContext, resolved: list[Resolved], offer: Offer,
                  hours: Decimal | None) -> tuple[list[CostLine], Decimal | None, list[str]]:
    """(one line per volume, the new volumes' cost over `hours` (None: a rate
    is unknown or there is no window), the new volumes whose rate is unknown)."""
    from gpucloud.catalog import pricing
    from gpucloud.models import CostLine
    from gpucloud.safety.ledger_volumes import hours_per_month

    month = Decimal(hours_per_month(ctx, offer.provider))
    lines: list[CostLine] = []
    new_total: Decimal | None = Decimal(0)
    unknown: list[str] = []
    for entry in resolved:
        rate = rate_of(ctx, entry, offer.provider)
        size = entry.existing.size_gb if entry.existing is not None else entry.size_gb or 0
        per_hour = rate * size / month if rate is not None else None
        total = pricing.money(per_hour * hours) if per_hour is not None and hours else None
        if entry.existing is not None:
            what = f"volume {entry.name} ({size} GB, existing, billed anyway)"
        elif entry.checked:
            what = f"volume {entry.name} ({size} GB, new)"
        else:
            what = f"volume {entry.name} ({size} GB, new unless it exists: not checked)"
        lines.append(CostLine(component=what, price_per_hour=per_hour, total=total))
        if entry.existing is None:
            if per_hour is None:
                unknown.append(entry.name)
                new_total = None
            elif new_total is not None:
                new_total += per_hour * hours if hours else Decimal(0)
    return lines, (new_total if hours else None), unknown


def with_storage(ctx: ClientContext, spec: JobSpec, made: Plan) -> Op:
    """The job's plan with its volumes checked (``resolve``), its storage lines
    in the estimate, the new volumes' cost in the total and in max_cost, and
    its fallbacks kept where the volumes are."""
    resolved = yield from resolve(ctx, spec, made.offer)
    if not resolved:
        return made
    from gpucloud.catalog import pricing

    offer = made.offer
    hours = made.estimate.hours if made.hours_basis != "per_hour" else None
    lines, new_total, unknown = storage_lines(ctx, resolved, offer, hours)
    notes = ["volume lines are the job's storage, once for the whole job; the plan's total "
             "includes the new volumes' (an existing volume bills with or without the job)"]
    if offer.simulated:
        notes.append("the sandbox's volume rate is simulated: nothing is billed")
    if unknown:
        notes.append(f"volume rate unknown for: {', '.join(unknown)}: the total is unknown")
    if made.max_cost is not None:
        if unknown:
            raise BudgetExceededError(
                f"cannot keep max_cost ${made.max_cost}: the rate of the new volume(s) "
                f"{', '.join(unknown)} on {offer.provider} is unknown",
                hint=f"create the volume first (`gpucloud volumes create`), or drop "
                     f"{option('max_cost', '--max-cost')}")
        if made.hours_basis == "max_cost" and new_total is not None and new_total > 0:
            raise BudgetExceededError(
                f"max_cost ${made.max_cost} sets the deadline from the machine's price, and "
                "the new volumes would bill on top of it",
                hint="give the job a max_runtime, so the volumes' storage is counted in "
                     "max_cost over that window")
        if made.total is not None and new_total is not None \
                and made.total + new_total > made.max_cost:
            raise BudgetExceededError(
                f"estimate ${pricing.money(made.total + new_total)} (machines "
                f"${made.total}, new volumes ${pricing.money(new_total)}) exceeds max_cost "
                f"${made.max_cost}",
                hint="shorten max_runtime, make the volume smaller, raise max_cost, or "
                     "create the volume first (an existing one is not in the total)")
    _check_budget(ctx, spec, made, resolved, lines)
    per_hour_new = sum((line.price_per_hour or Decimal(0) for line, entry
                        in zip(lines, resolved) if entry.existing is None), Decimal(0))
    estimate = made.estimate.model_copy(update={
        "breakdown": (*made.estimate.breakdown, *lines),
        "notes": (*made.estimate.notes, *notes)})
    # A launch may fall back on another offer: only where the volumes are.
    alternatives = tuple(o for o in made.alternatives
                         if o.provider == offer.provider and o.region == offer.region)
    return made.model_copy(update={
        "estimate": estimate, "alternatives": alternatives,
        "total": pricing.money(made.total + new_total)
        if made.total is not None and new_total is not None else None if unknown
        else made.total,
        "total_per_hour": made.total_per_hour + per_hour_new
        if made.total_per_hour is not None and not unknown else None})


def _check_budget(ctx: ClientContext, spec: JobSpec, made: Plan, resolved: list[Resolved],
                  lines: list[CostLine]) -> None:
    """The monthly budget with the new volumes: each bills this month until the
    end of the month, or until the job's deadline when it goes with the job."""
    if not ctx.config.budgeted:
        return
    from gpucloud.catalog import pricing
    from gpucloud.safety import budget
    from gpucloud.safety.costs import month_bounds
    from gpucloud.safety.journal import utcnow

    now = utcnow()
    end = month_bounds(None, now)[2]
    with_job = {v.name for v in spec.volumes if v.delete_with_job}
    extra = Decimal(0)
    for entry, line in zip(resolved, lines):
        if entry.existing is not None:
            continue  # in the ledger already, if gpucloud has seen it
        if line.price_per_hour is None:
            raise BudgetExceededError(
                f"cannot keep the monthly budget: the rate of the new volume {entry.name} on "
                f"{made.offer.provider} is unknown",
                hint="create the volume first (`gpucloud volumes create`), or remove [budget] "
                     f"from {ctx.config.path}")
        stop = min(made.shutdown_at, end) if entry.name in with_job and made.shutdown_at \
            else end
        extra += line.price_per_hour * max(Decimal(0), pricing.duration_hours(stop - now))
    budget.check_extra(ctx, made, extra, "the job's new volumes", spec.resources.disk_gb)


def prepare(ctx: ClientContext, spec: JobSpec, offer: Offer, run: JobRun,
            project: str | None = None) -> Op:
    """Before the launch: create the job's missing volumes in the offer's
    region, recorded under the job's `project`; (the JobRun with every
    volume_id filled, the volumes created)."""
    if not spec.volumes:
        return run, []
    from gpucloud.core import volumes as volume_ops
    from gpucloud.models import VolumeSpec

    resolved = yield from resolve(ctx, spec, offer)
    adapter = ctx.adapter(offer.provider)
    ids: dict[str, str] = {}
    created: list[Volume] = []
    try:
        for entry in resolved:
            if entry.existing is not None:
                ids[entry.name] = entry.existing.id
                continue
            assert entry.size_gb is not None  # resolve refused the others
            volume: Volume = yield Call(offer.provider, adapter.create_volume(
                VolumeSpec(name=entry.name, size_gb=entry.size_gb, region=offer.region)))
            volume_ops.record_created(ctx, volume, "job", project=project)
            created.append(volume)
            ids[entry.name] = volume.id
    except BaseException:
        yield from undo(ctx, created)
        raise
    mounts = tuple(m.model_copy(update={"volume_id": ids[m.name]}) for m in run.volumes)
    return run.model_copy(update={"volumes": mounts}), created


def undo(ctx: ClientContext, created: list[Volume]) -> Op:
    """A launch that failed: the volumes it had just created are deleted again
    (a failure to is a warning naming the delete command, never hidden)."""
    from gpucloud.core import volumes as volume_ops

    for volume in created:
        try:
            yield Call(volume.provider, ctx.adapter(volume.provider).delete_volume(volume.id))
        except GpuCloudError as exc:
            ctx.warn(f"volume {volume.ref} was created for the job but could not be deleted "
                     f"after the launch failed ({exc}): `gpucloud volumes delete {volume.ref}`")
            continue
        volume_ops.record_deleted(ctx, volume.provider, volume.id)


def owned(ctx: ClientContext, spec: JobSpec, created: list[Volume], job: Job) -> None:
    """The launched job's volumes to delete with it (delete_with_job), in the ledger."""
    from gpucloud.safety.ledger_volumes import VolumeLedger

    with_job = {v.name for v in spec.volumes if v.delete_with_job}
    mine = [v.id for v in created if v.name in with_job]
    if mine:
        ctx.tolerant(f"the volumes of job {job.ref} will not be deleted with it",
                     VolumeLedger(ctx.journal).own, job.provider, mine, job.ref)


def ended(ctx: ClientContext, jobs: list[Job]) -> Op:
    """Delete the volumes that were to go with these jobs, now seen ended."""
    from gpucloud.jobs.costs import FINISHED as ENDED

    finished = {j.ref for j in jobs if j.status in ENDED}
    if not finished or not ctx.journal.exists():
        return
    from gpucloud.safety.ledger_volumes import VolumeLedger

    records = ctx.tolerant("volumes to delete with their job are not looked for",
                           VolumeLedger(ctx.journal).records, None, True) or []
    yield from _delete_records(ctx, [r for r in records if r.job_ref in finished])


def _delete_records(ctx: ClientContext, records: list[Any]) -> Op:
    from gpucloud.core import volumes as volume_ops
    from gpucloud.errors import NotFoundError

    for record in records:
        try:
            yield Call(record.provider,
                       ctx.adapter(record.provider).delete_volume(record.volume_id))
        except NotFoundError:
            pass  # already gone: only the ledger is behind
        except GpuCloudError as exc:
            ctx.warn(f"volume {record.ref} of job {record.job_ref} (delete_with_job) could "
                     f"not be deleted ({exc}): `gpucloud volumes delete {record.ref}`")
            continue
        volume_ops.record_deleted(ctx, record.provider, record.volume_id)


def sweep(ctx: ClientContext) -> Op:
    """The reaper's pass: every volume still waiting for its job's end is
    deleted once its job reads ended (or is gone)."""
    if not ctx.journal.exists():
        return
    from gpucloud.errors import NotFoundError
    from gpucloud.jobs.costs import FINISHED as ENDED
    from gpucloud.safety.ledger_volumes import VolumeLedger

    records = ctx.tolerant("volumes to delete with their job are not looked for",
                           VolumeLedger(ctx.journal).records, None, True) or []
    waiting = [r for r in records if r.job_ref and ctx.can_call(r.provider)]
    done = []
    for job_ref in sorted({r.job_ref for r in waiting}):
        provider, _, ident = job_ref.partition("/")
        try:
            job: Job = yield Call(provider, ctx.adapter(provider).get_job(ident))
        except NotFoundError:
            done.append(job_ref)
            continue
        except GpuCloudError as exc:
            ctx.warn(f"could not read job {job_ref} ({exc}); its volumes wait for its end")
            continue
        if job.status in ENDED:
            done.append(job_ref)
    yield from _delete_records(ctx, [r for r in waiting if r.job_ref in done])


__all__ = ["Resolved", "ended", "owned", "prepare", "resolve", "storage_lines", "sweep",
           "undo", "with_storage"]
