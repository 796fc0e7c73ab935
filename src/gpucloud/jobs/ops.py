"""Jobs as operations: submit, list, get, cancel, logs.

A submit is a create with a container to run: it is planned and estimated
exactly like one (core/plan.py: ``max_runtime`` is the deadline the reaper
enforces, ``max_cost`` and the monthly budget are kept, failover across
offers), and launched by core/launch.py with ``InstanceSpec.job`` set and a
``gj-`` launch id. Secrets are resolved before anything is sent: a missing
one stops the submit, naming it (exit 3).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from os import PathLike
from typing import TYPE_CHECKING, Any, Union

from gpucloud.jobs import costs as job_costs, placement
from gpucloud.jobs import volumes as job_volumes
from gpucloud.safety import ledger_events
from gpucloud.providers.base import format_utc
from gpucloud.errors import (
    CredentialsError, NoOffersError, NotFoundError, SpecError,
)
from gpucloud.jobs.spec import JobSpec, from_any
from gpucloud.config.identity import check_project
from gpucloud.core.create import for_project
from gpucloud.core.launch import launch
from gpucloud.models import Job, JobRun, JobStatus, Offer, Plan, VolumeMount
from gpucloud.core.instructions import Call, Op, split_ref
from gpucloud.core.listings import each_provider
from gpucloud.core.plan import plan as make_plan

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext

# What a job is given as: a JobSpec, a dict of its fields, or a job YAML file's path.
JobSpecLike = Union[JobSpec, str, PathLike[str], dict[str, Any]]
JobRef = Union[Job, str]  # a Job, "provider/id", its name or a unique id prefix

ENDED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
FOLLOW_INTERVAL = 2.0  # seconds between two reads of a followed job's logs


def resolve_secrets(spec: JobSpec, use_keyring: bool = True) -> dict[str, Any]:
    """{NAME: SecretStr} for every secret the spec references; CredentialsError
    naming the first one that cannot be found."""
    from pydantic import SecretStr

    out: dict[str, Any] = {}
    for name, ref in spec.secrets.items():
        value: str | None
        problem = None
        if ref.env is not None:
            value = os.environ.get(ref.env) or None
        else:
            value, problem = _keyring(str(ref.keyring), use_keyring)
        if value is None:
            how = (f"export {ref.env}=..." if ref.env is not None else
                   f"store it: keyring set {' '.join(str(ref.keyring).split('/', 1))}")
            raise CredentialsError(
                f"secret {name} of job {spec.name}: nothing in {ref.source}"
                + (f" ({problem})" if problem else ""),
                hint=f"{how}, then submit again; nothing was sent")
        out[name] = SecretStr(value)
    return out


def _keyring(entry: str, use_keyring: bool) -> tuple[str | None, str | None]:
    if not use_keyring:
        return None, "the keyring is disabled for this client"
    service, _, user = entry.partition("/")
    try:
        import keyring

        return keyring.get_password(service, user), None
    except Exception as exc:  # noqa: BLE001 - any backend failure: report, never crash
        return None, f"the system keyring could not be read: {type(exc).__name__}"


def job_run(spec: JobSpec, secret_env: dict[str, Any]) -> JobRun:
    """What an adapter needs to run the job's container."""
    from gpucloud.catalog.pricing import parse_duration

    checkpoint = spec.checkpoint
    return JobRun(
        name=spec.name, image=spec.image, command=tuple(spec.command), args=tuple(spec.args),
        env=dict(spec.env), secret_env=secret_env, max_runtime_seconds=spec.max_runtime_seconds,
        retries=spec.retries, gpu_count=spec.resources.gpu_count,
        checkpoint_dir=checkpoint.dir if checkpoint else None,
        checkpoint_url=checkpoint.url if checkpoint else None,
        checkpoint_sync_seconds=int(parse_duration(checkpoint.sync_interval).total_seconds())
        if checkpoint and checkpoint.sync_interval else None,
        cpu=spec.resources.cpu, memory_gb=spec.resources.memory_gb, spot=spec.spot,
        nodes=spec.nodes, interconnect=spec.placement.interconnect,
        volumes=tuple(VolumeMount(name=v.name, mount=v.mount, size_gb=v.size_gb,
                                  delete_with_job=v.delete_with_job) for v in spec.volumes))


def _sized(spec: JobSpec) -> Callable[[Offer], bool]:
    """Whether an offer is big enough for the job's cpu/memory (an offer that
    does not say its size is kept: the provider decides)."""
    r = spec.resources

    def fits(o: Offer) -> bool:
        return ((r.cpu is None or o.vcpus is None or o.vcpus >= r.cpu)
                and (r.memory_gb is None or o.memory_gb is None or o.memory_gb >= r.memory_gb))
    return fits


def plan(ctx: ClientContext, spec: JobSpecLike, provider: str | None = None,
         region: str | None = None, dry_run: bool = False, project: str | None = None) -> Op:
    """What submit would launch and what it costs; spends nothing, reads no secret.
    ``dry_run``: with no credentials at all, plan from the bundled catalog.
    ``project``: what the job is for (its budget is checked too)."""
    spec = from_any(spec)
    r = spec.resources
    named = provider or spec.provider
    sized = _sized(spec)
    refused: set[str] = set()
    # Only where the adapter runs the job: a job's container to completion, or
    # N machines of one offer (one provider, one region), planned, priced and
    # budgeted as a create of N where the adapter says how to place them.
    placement.check_named(spec, named)
    placeable = placement.offer_filter(spec, refused)

    def suitable(o: Offer) -> bool:
        return sized(o) and placeable(o)
    try:
        made: Plan = yield from make_plan(
            ctx, r.gpu, r.gpu_count, named, region or spec.region, r.disk_gb,
            spec.max_runtime, spec.max_cost, spec.spot, spec.nodes,
            dry_run=dry_run, suitable=suitable, project=project)
    except (NoOffersError, CredentialsError):
        # Nothing left to launch (or, with no credentials, to plan from), yet
        # offers there were: on providers that cannot place the nodes.
        if refused:
            raise placement.refusal(spec, refused) from None
        raise
    if spec.nodes > 1:
        how = placement.mode(made.offer.provider)
        made = made.model_copy(update={"notes": made.notes + (
            f"{spec.nodes} nodes of {made.offer.instance_type} in {made.offer.region} "
            f"({how} multi-node); each node gets MASTER_ADDR, NODE_RANK, NNODES, "
            "WORLD_SIZE",) + placement.retries_note(spec, made.offer.provider)})
    # The volumes it mounts: found (or to be made) in the offer's region, their storage estimated.
    made = yield from job_volumes.with_storage(ctx, spec, made)
    return made


def submit(ctx: ClientContext, spec: JobSpecLike, provider: str | None = None,
           region: str | None = None, plan_: Plan | None = None,
           project: str | None = None) -> Op:
    spec = from_any(spec)
    if project is not None:
        check_project(project)  # refused before any secret is read
    secret_env = resolve_secrets(spec, ctx.credentials._use_keyring)
    if plan_ is None:
        plan_ = yield from plan(ctx, spec, provider, region, project=project)
    elif plan_.instances != spec.nodes:  # a plan made for something else
        raise SpecError(f"the plan is for {plan_.instances} machine(s), job {spec.name} "
                        f"has {spec.nodes} node(s)",
                        hint="plan the job itself (Client.plan_job) or submit without a plan; "
                             "nothing was sent")
    else:  # a given plan: its offers must still be where the nodes can be placed
        placement.check_named(spec, plan_.offer.provider)
        for other in plan_.alternatives:
            placement.check_named(spec, other.provider)
        plan_ = for_project(plan_, project)
    from gpucloud.core.context import InFlight

    ctx.created, ctx.in_flight = [], InFlight()
    # Volumes the job makes exist before the launch, and go again if it fails.
    run, made_volumes = yield from job_volumes.prepare(ctx, spec, plan_.offer,
                                                       job_run(spec, secret_env),
                                                       project=plan_.project)
    adapter = ctx.adapter(plan_.offer.provider)
    if spec.nodes > 1 and adapter.capabilities.multi_node == "batch":
        from gpucloud.jobs import multinode_batch

        # The nodes' launches record each machine in ctx.created (batch/create.py).
        try:
            nodes: Job = yield from multinode_batch.submit(ctx, run, plan_,
                                                           spec.resources.disk_gb)
        except BaseException:
            yield from job_volumes.undo(ctx, made_volumes)
            raise
        job_volumes.owned(ctx, spec, made_volumes, nodes)
        return nodes
    # The container image travels in the JobRun; the machine keeps the provider's
    # default image (on a VM cloud, the OS image that runs the container).
    try:
        job: Job = yield from launch(ctx, plan_, name=spec.name, image=None,
                                     ssh_key=None, disk_gb=spec.resources.disk_gb, job=run)
    except BaseException:
        yield from job_volumes.undo(ctx, made_volumes)
        raise
    job_volumes.owned(ctx, spec, made_volumes, job)
    if job.instances:  # every node's machine exists (an interrupt names them all)
        ctx.created.extend(job.instances)
    elif job.instance is not None:
        ctx.created.append(job.instance)
    return job


def jobs(ctx: ClientContext, provider: str | None = None) -> Op:
    """Jobs on every provider in scope; one provider's failure is a warning."""
    names = [n for n in ctx.scope(provider, listing=True) if ctx.can_call(n)]
    if provider is not None and not names:
        raise ctx.missing_credentials([provider])
    answered = yield from each_provider(ctx, names, lambda a: a.list_jobs(), "jobs", provider)
    out: list[Job] = [job for _, listed in answered for job in listed]
    whole = [name for name, _ in answered]
    ctx.tolerant("the cost ledger did not record the jobs that ended", job_costs.seen, ctx,
                 out, whole)
    yield from job_volumes.ended(ctx, out)  # delete_with_job
    return sorted(out, key=lambda j: (j.created_at is None, j.created_at), reverse=True)


def _ref(ctx: ClientContext, ref: JobRef) -> Op:
    """(provider, id) of a Job, "provider/id", a job's name or a unique id prefix."""
    if isinstance(ref, Job):
        return ref.provider, ref.id
    if "/" in str(ref):
        return split_ref(ref)
    listed: list[Job] = yield from jobs(ctx)
    text = str(ref)
    matches = [j for j in listed if text in (j.name, j.id)] \
        or [j for j in listed if j.id.startswith(text)]
    live = [j for j in matches if j.status not in ENDED]
    if len(matches) > 1 and len(live) == 1:
        matches = live  # a name reused after a run ended names the new run
    elif len(matches) > 1 and not live and all(j.created_at for j in matches):
        # Runs of one name that have all ended: the last run is the one meant
        # (its logs, its exit code); said, since an older run might have been.
        newest = max(matches, key=lambda j: j.created_at)  # type: ignore[arg-type,return-value]
        assert newest.created_at is not None  # all(...) above
        ctx.warn(f"{text!r} matches {len(matches)} jobs that have all ended: using the "
                        f"newest, {newest.ref} ({newest.status.value}, created "
                        f"{format_utc(newest.created_at)}); name another by its provider/id "
                        "(REF in `gpucloud jobs list`)")
        matches = [newest]
    if len(matches) == 1:
        return matches[0].provider, matches[0].id
    if matches:
        raise SpecError(f"{text!r} matches {len(matches)} jobs: "
                        + ", ".join(f"{j.ref} ({j.status.value})" for j in matches[:10]),
                        hint="name the job by its provider/id (REF in `gpucloud jobs list`)")
    raise NotFoundError(f"no job named {text!r} or with an id starting with it",
                        provider="any", status_code=404,
                        hint="`gpucloud jobs list` shows the jobs; refer to one by provider/id, "
                             "its name or a unique id prefix")


def job(ctx: ClientContext, ref: JobRef) -> Op:
    provider, ident = yield from _ref(ctx, ref)
    ctx.require_callable(provider)
    found: Job = yield Call(provider, ctx.adapter(provider).get_job(ident))
    ctx.tolerant("the cost ledger did not record the job's end", job_costs.seen, ctx, [found])
    yield from job_volumes.ended(ctx, [found])  # delete_with_job
    return found


def cancel(ctx: ClientContext, ref: JobRef) -> Op:
    """Stop the job and end its machine (billing stops); the Job as it is after."""
    provider, ident = yield from _ref(ctx, ref)
    ctx.require_callable(provider)
    adapter = ctx.adapter(provider)
    before: Job = yield Call(provider, adapter.get_job(ident))
    if before.status in ENDED:
        ctx.tolerant("the cost ledger did not record the job's end", job_costs.seen, ctx,
                     [before])
        yield from job_volumes.ended(ctx, [before])  # delete_with_job
        return before
    yield Call(provider, adapter.cancel_job(ident))
    # Every node's machine ends with the job (node 0's alone for a one-node job).
    machines = before.instances or ((before.instance,) if before.instance is not None else ())
    if machines:
        for machine in machines:
            ctx.tolerant(f"{machine.ref} was ended but the journal could not record it",
                         ctx.journal.mark_deleted, provider, machine.id)
            ctx.tolerant(f"{machine.ref}: its end is not in the cost ledger",
                         ledger_events.ended, ctx, provider, machine.id, "delete")
    else:
        ctx.tolerant(f"{before.ref}: its end is not in the cost ledger",
                     job_costs.cancelled, ctx, provider, ident)
    try:
        after: Job = yield Call(provider, adapter.get_job(ident))
    except NotFoundError:  # some providers forget a cancelled job at once
        after = before.model_copy(update={"status": JobStatus.CANCELLED})
    # Its delete_with_job volumes go now: the job is over, whatever the read says.
    yield from job_volumes.ended(ctx, [after.model_copy(update={"status": JobStatus.CANCELLED})
                                       if after.status not in ENDED else after])
    return after


def logs(ctx: ClientContext, ref: JobRef, tail: int | None = None) -> Op:
    """(the job, its output so far) where the provider offers logs."""
    if tail is not None and (isinstance(tail, bool) or not isinstance(tail, int) or tail < 1):
        raise SpecError(f"tail must be a positive number of lines, got {tail!r}")
    provider, ident = yield from _ref(ctx, ref)
    ctx.require_callable(provider)
    adapter = ctx.adapter(provider)
    # The status first: logs read after a job is seen ended are complete, so
    # following stops with the last line, never one read short of it.
    current: Job = yield Call(provider, adapter.get_job(ident))
    ctx.tolerant("the cost ledger did not record the job's end", job_costs.seen, ctx,
                 [current])
    text: str = yield Call(provider, adapter.job_logs(ident, tail))
    return current, text


def new_lines(seen: int, text: str) -> tuple[int, list[str]]:
    """For following logs: the lines after the first `seen` of `text`."""
    lines = text.splitlines()
    if len(lines) < seen:  # the provider keeps a window: show what is new
        seen = 0
    return len(lines), lines[seen:]


__all__ = ["ENDED", "FOLLOW_INTERVAL", "JobRef", "JobSpecLike", "cancel", "job", "job_run",
           "jobs", "logs", "new_lines", "plan", "resolve_secrets", "submit"]
