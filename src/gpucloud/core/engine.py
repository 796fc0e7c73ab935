"""Everything Client and AsyncClient do, written once as operations.

An operation is a generator, like an adapter flow one level up: it yields
``Call(provider, flow)`` (run one adapter flow), ``Gather([...])`` (run
several at once; exceptions come back as values) or ``Sleep``, and receives
the results. ``client.py`` carries them out with threads or asyncio. So the
money rules below exist once:

* every create is planned and estimated before anything is sent, and refused
  when the estimate exceeds ``max_cost``;
* the launch intent is journaled before the request, the outcome after;
* a create is never retried blindly (launcher.py): after an ambiguous
  failure the machine is looked up by its launch id; only definite refusals
  (no capacity, quota) move on to the next offer, within a bound.
"""

from __future__ import annotations

import builtins
import logging
import time
from typing import TYPE_CHECKING, Any

from gpucloud.core.flow import Sleep
from gpucloud.config.credentials import how_to_set
from gpucloud.errors import (
    GpuCloudError, InstanceFailedError, NotFoundError, SpecError, WaitTimeoutError, option,
)
from gpucloud.core.offers import OfferOps
from gpucloud.core.instructions import DEFAULT_CONCURRENCY, Call, Gather, Op, split_ref

if TYPE_CHECKING:  # pydantic: a catalog-only `gpucloud offers` never needs it
    from gpucloud.providers.base import Provider
    from gpucloud.models import Instance, Plan

log = logging.getLogger("gpucloud")

# The planner, launcher, batch, ledger, deadline, reconcile and job modules are
# imported by the operations that use them: a catalog-only `gpucloud offers`
# imports the client, and must not pay for them.


class Engine(OfferOps):
    """The shared brain of Client and AsyncClient. Holds no connections."""

    def __init__(self, context: Any) -> None:
        self.ctx = context  # ClientContext: catalogs, credentials, scope, journal

    # -- create ---------------------------------------------------------------

    def plan(self, gpu: str, count: int, provider: str | None = None, region: str | None = None,
             disk_gb: int | None = None, auto_shutdown: Any = None, max_cost: Any = None,
             spot: bool = False, n: int = 1, *, until: Any = None, dry_run: bool = False) -> Op:
        from gpucloud.core.plan import plan as make_plan

        return (yield from make_plan(self, gpu, count, provider, region, disk_gb, auto_shutdown,
                                     max_cost, spot, n, until, dry_run))

    def no_launchable(self, gpu: str, count: int, provider: str | None,
                      region: str | None) -> GpuCloudError:
        names = self.ctx.scope(provider)
        if not any(self.ctx.can_call(n) for n in names):
            return self.ctx.missing_credentials(names, any_provider=provider is None)
        return self._no_offers(gpu, count, provider, region)

    def create(self, plan: Plan, *, name: str | None = None, image: str | None = None,
               ssh_key: str | None = None, disk_gb: int | None = None) -> Op:
        """plan.instances machines; a failure part-way raises with `.instances` (those made)."""
        from gpucloud.core.launch import launch

        made: list[Instance] = []
        self.ctx.created, self.ctx.in_flight = made, []
        for index in range(plan.instances):
            machine_name = name if name is None or plan.instances == 1 else f"{name}-{index + 1}"
            try:
                instance = yield from launch(self.ctx, plan, name=machine_name, image=image,
                                             ssh_key=ssh_key, disk_gb=disk_gb)
            except GpuCloudError as exc:
                exc.instances = made  # type: ignore[attr-defined]
                if made:
                    refs = " ".join(i.ref for i in made)
                    exc.hint = (f"{len(made)} of {plan.instances} machines were created and are "
                                f"running: {refs} (`gpucloud delete {refs}` to remove them)")
                raise
            made.append(instance)
        return made

    def create_many(self, requests: list[Any], *, max_cost: Any = None,
                    plan: Plan | None = None, concurrency: int = DEFAULT_CONCURRENCY,
                    all_or_nothing: bool = False, batch: str | None = None,
                    progress: Any = None) -> Op:
        """A batch (batch.py): plan every distinct request, check the total, launch
        concurrently; a BatchResult with one item per request."""
        from gpucloud.batch import create as batching

        if plan is not None:  # planned already (the CLI shows it first): copies of one request
            if plan.instances != len(requests) or len({r.plan_key() for r in requests}) != 1:
                raise SpecError(f"the plan is for {plan.instances} machine(s), not "
                                f"{len(requests)} alike",
                                hint=f"make the plan with the same {option('n', '--instances')}")
            plans = [plan] * len(requests)
        else:
            plans, _ = yield from batching.plans_for(self, requests, max_cost)
        return (yield from batching.create_many(
            self, requests, plans, concurrency=concurrency, all_or_nothing=all_or_nothing,
            batch=batch, progress=progress))

    def _with_deadline(self, instance: Instance, shutdown_at: Any) -> Instance:
        if instance.shutdown_at is None and shutdown_at is not None:
            return instance.model_copy(update={"shutdown_at": shutdown_at})
        return instance

    # -- instances ------------------------------------------------------------

    def list(self, provider: str | None = None) -> Op:
        names = [n for n in self.ctx.scope(provider, listing=True) if self.ctx.can_call(n)]
        if provider is not None and not names:
            raise self.ctx.missing_credentials([provider])
        results = yield Gather([Call(n, self.ctx.adapter(n).list_instances()) for n in names])
        out: list[Instance] = []
        self.ctx.warnings.clear()
        self.warn_unresolved()
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed and (provider is not None or len(failed) == len(names)):
            raise failed[0]  # "no machines" must never mean "could not look"
        for name, result in zip(names, results):
            if isinstance(result, BaseException):
                if not isinstance(result, GpuCloudError):
                    raise result
                self.ctx.warnings.append(f"{name}: could not list instances ({result})")
                continue
            out.extend(self._known_deadlines(name, result))
        whole = [n for n, r in zip(names, results) if isinstance(r, list)]
        from gpucloud.safety import ledger

        self.ctx.tolerant("the cost ledger did not record this listing", ledger.observed,
                          self.ctx, out, whole)
        return out

    def listing(self, provider: str | None = None, all: bool = False,
                status: Any = None) -> Op:
        """list, as people read it: without long-terminated machines (housekeeping.py)."""
        from gpucloud.core import housekeeping

        return (yield from housekeeping.listing(self, provider, all, status))

    def delete_all(self, provider: str | None = None, name_prefix: str | None = None,
                   dry_run: bool = False) -> Op:
        from gpucloud.core import housekeeping

        if dry_run:
            return (yield from housekeeping.deletable(self, provider, name_prefix))
        return (yield from housekeeping.delete_all(self, provider, name_prefix))

    # builtins.list: inside this class `list` is the operation below (mypy reads it so).
    def _known_deadlines(self, provider: str, instances: builtins.list[Instance]
                         ) -> builtins.list[Instance]:
        """_known_deadline for a whole listing: one journal query, not one per machine."""
        ids = [i.id for i in instances if i.shutdown_at is None]
        records = self.ctx.tolerant("deadlines known only to this journal are not shown",
                                    self.ctx.journal.by_instances, provider, ids) if ids else {}
        found = records or {}
        return [self._with_deadline(i, found[i.id].shutdown_at if i.id in found else None)
                for i in instances]

    def _known_deadline(self, instance: Instance) -> Instance:
        if instance.shutdown_at is not None:
            return instance
        record = self.ctx.tolerant("deadlines known only to this journal are not shown",
                                   self.ctx.journal.by_instance, instance.provider, instance.id)
        return self._with_deadline(instance, record.shutdown_at if record else None)

    def get(self, ref: Any) -> Op:
        from gpucloud.core import refs

        ref = yield from refs.lookup(self, ref)  # a name or an id prefix is looked up
        provider, ident = split_ref(ref)
        self.ctx.require_callable(provider)
        try:
            instance = yield Call(provider, self.ctx.adapter(provider).get(ident))
        except NotFoundError as exc:
            exc.hint = exc.hint or refs.not_found_hint(f"{provider}/{ident}")
            raise
        return self._known_deadline(instance)

    def delete(self, ref: Any) -> Op:
        from gpucloud.core import refs

        ref = yield from refs.lookup(self, ref)  # as get: a name or a unique id prefix
        provider, ident = split_ref(ref)
        self.ctx.require_callable(provider)
        yield Call(provider, self.ctx.adapter(provider).delete(ident))
        self.ctx.tolerant(f"{provider}/{ident} was deleted but the journal could not record it",
                          self.ctx.journal.mark_deleted, provider, ident)
        from gpucloud.safety import ledger

        self.ctx.tolerant(f"{provider}/{ident}: its end is not in the cost ledger",
                          ledger.ended, self.ctx, provider, ident, "delete")

    def extend(self, ref: Any, by: Any = None, until: Any = None) -> Op:
        from gpucloud.safety import deadlines

        return (yield from deadlines.extend(self, ref, by, until))

    def reap(self, dry_run: bool = False, provider: str | None = None) -> Op:
        from gpucloud.safety import deadlines

        return (yield from deadlines.reap(self, dry_run, provider))

    def reconcile(self, terminate_orphans: Any = False, provider: str | None = None) -> Op:
        from gpucloud.safety import reconcile as reconciling

        return (yield from reconciling.reconcile(self, terminate_orphans, provider))

    # -- jobs (jobs.py) -----------------------------------------------------------

    def plan_job(self, spec: Any, provider: str | None = None, region: str | None = None,
                 dry_run: bool = False) -> Op:
        from gpucloud.jobs import ops as job_ops

        return (yield from job_ops.plan(self, spec, provider, region, dry_run))

    def submit(self, spec: Any, provider: str | None = None, region: str | None = None,
               plan: Plan | None = None) -> Op:
        from gpucloud.jobs import ops as job_ops

        return (yield from job_ops.submit(self, spec, provider, region, plan))

    def jobs(self, provider: str | None = None) -> Op:
        from gpucloud.jobs import ops as job_ops

        return (yield from job_ops.jobs(self, provider))

    def job(self, ref: Any) -> Op:
        from gpucloud.jobs import ops as job_ops

        return (yield from job_ops.job(self, ref))

    def cancel(self, ref: Any) -> Op:
        from gpucloud.jobs import ops as job_ops

        return (yield from job_ops.cancel(self, ref))

    def job_logs(self, ref: Any, tail: int | None = None) -> Op:
        from gpucloud.jobs import ops as job_ops

        return (yield from job_ops.logs(self, ref, tail))

    def warn_unresolved(self) -> None:
        from gpucloud.safety import reconcile as reconciling

        reconciling.warn_unresolved(self.ctx)

    # -- credentials ------------------------------------------------------------

    def verify(self, name: str) -> Op:
        """Prove a provider's credential works with a cheap read; the token expiry if known."""
        self.ctx.require_callable(name)
        adapter = self.ctx.adapter(name)
        yield Call(name, adapter.verify())
        return _expiry(adapter)

    def auth_status(self) -> Op:
        from gpucloud.models import AuthStatus

        names = [n for n in self.ctx.known if self.ctx.has_adapter(n)]
        checked = [n for n in names
                   if self.ctx.auth_kind(n) != "none" and self.ctx.credential(n) is not None]
        results = yield Gather([Call(n, self.ctx.adapter(n).verify()) for n in checked])
        out = []
        for name in names:
            kind = self.ctx.auth_kind(name)
            if kind == "none":
                out.append(AuthStatus(provider=name, source="none needed"))
                continue
            if name not in checked:
                out.append(AuthStatus(provider=name, hint=how_to_set(name, kind)))
                continue
            result = results[checked.index(name)]
            failed = isinstance(result, BaseException)
            if failed and not isinstance(result, GpuCloudError):
                raise result
            out.append(AuthStatus(
                provider=name, source=self.ctx.credential(name).source, works=not failed,
                error=str(result) if failed else None,
                hint=getattr(result, "hint", None) if failed else None,
                token_expires_at=None if failed else _expiry(self.ctx.adapter(name))))
        return out

    def power(self, ref: Any, action: str) -> Op:
        """stop or start a machine, where the provider can."""
        provider, ident = split_ref(ref)
        self.ctx.require_callable(provider)
        adapter = self.ctx.adapter(provider)
        if not adapter.capabilities.stop_start:
            raise SpecError(f"{provider} cannot stop and start machines through its API",
                            hint=f"`gpucloud delete {provider}/{ident}` ends it (and its billing)")
        instance = yield Call(provider, getattr(adapter, action)(ident))
        from gpucloud.safety import ledger

        self.ctx.tolerant(f"{provider}/{ident}: the {action} is not in the cost ledger",
                          ledger.powered, self.ctx, instance, action)
        return self._known_deadline(instance)

    def wait(self, ref: Any, until: str = "running", timeout: float = 600,
             poll: float = 2.0, max_poll: float = 15.0) -> Op:
        from gpucloud.models import InstanceStatus

        target = InstanceStatus(until)
        started, slept, delay = time.monotonic(), 0.0, poll
        while True:
            instance = yield from self.get(ref)
            if instance.status == target:
                return instance
            if target != InstanceStatus.TERMINATED and instance.status in (
                    InstanceStatus.FAILED, InstanceStatus.TERMINATED, InstanceStatus.TERMINATING):
                raise InstanceFailedError(
                    f"{instance.ref} is {instance.status.value} while waiting for {until}",
                    hint=f"provider status: {instance.provider_status or 'n/a'}")
            # Sleeps may be skipped (tests); count them so the deadline still holds.
            elapsed = max(time.monotonic() - started, slept)
            refusal = self.ctx.adapter(instance.provider).wait_refusal(instance, elapsed)
            if refusal is not None:
                raise refusal
            if elapsed >= timeout:
                raise WaitTimeoutError(
                    f"{instance.ref} still {instance.status.value} after {int(elapsed)} s "
                    f"(waiting for {until})",
                    hint=f"the machine is still there: `gpucloud get {instance.ref}` or "
                         f"`gpucloud delete {instance.ref}`")
            step = min(delay, max(0.0, timeout - elapsed))
            yield Sleep(step)
            slept += step
            delay = min(max_poll, delay * 1.5)


def _expiry(adapter: Provider) -> Any:
    expires = getattr(adapter.auth(), "token_expires_at", None)
    if isinstance(expires, (int, float)):
        from datetime import datetime, timezone

        return datetime.fromtimestamp(expires, timezone.utc)
    return expires


__all__ = ["Engine"]
