"""AsyncClient: the SDK, as coroutines. The same methods as Client
(sync_client.py), with the same parameters and answers; each runs its
operation through an AsyncRunner (core/runners.py): provider calls are
asyncio tasks on httpx.AsyncClient sessions. Argument types: as Client's.
"""

from __future__ import annotations

import builtins
import warnings as _warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from gpucloud.client.provider_calls import AsyncProviderCalls
from gpucloud.core import auth, instances
from gpucloud.core import offers as offer_ops
from gpucloud.core.context import ClientContext
from gpucloud.core.create import create as create_op
from gpucloud.core.instructions import Op
from gpucloud.core.runners import AsyncRunner
from gpucloud.machine.exec import DEFAULT_EXEC_TIMEOUT
from gpucloud.types import Deadline, Duration, Hours, Money, Ref, Status, StatusFilter

if TYPE_CHECKING:
    from gpucloud.batch.models import BatchItem, BatchResult, CreateRequest
    from gpucloud.catalog.gaps import CatalogGap
    from gpucloud.config.settings import Config
    from gpucloud.jobs.ops import JobRef, JobSpecLike
    from gpucloud.models import (
        Attempt, AuthStatus, CostEstimate, ExecResult, Instance, Job, Offer, Plan,
        ProviderStatus, ReapReport, ServiceAccountToken, Volume,
    )
    from gpucloud.safety.costs import CostReport
    from gpucloud.safety.reconcile import ReconcileReport

CostsBy = Literal["provider", "instance", "name", "user", "project", "task"]


class AsyncClient:
    """The same methods as Client, as coroutines (httpx.AsyncClient underneath)."""

    def __init__(self, providers: list[str] | None = None, *,
                 credentials: dict[str, str] | None = None,
                 on_attempt: Callable[[Attempt], None] | None = None,
                 use_keyring: bool = True,
                 sleep: Callable[[float], Awaitable[None]] | None = None) -> None:
        self._ctx = ClientContext(providers, credentials, on_attempt, use_keyring)
        self._sleep = sleep
        self._runner = AsyncRunner(self._ctx, sleep)

    async def _run(self, op: Op) -> Any:
        return await self._runner.run(op)

    # -- what the last call left (as Client's) --------------------------------

    @property
    def warnings(self) -> list[str]:
        """Non-fatal problems of the last call (a provider that could not be reached)."""
        return list(self._ctx.warnings)

    @property
    def catalog_gaps(self) -> list[CatalogGap]:
        """The providers the bundled catalog had nothing for in the last offers,
        estimate or plan (each is also one of `warnings`)."""
        return list(self._ctx.catalog_gaps)

    @property
    def last_attempts(self) -> list[Attempt]:
        """Every offer the last create tried, and how each ended."""
        return list(self._ctx.last_attempts)

    @property
    def last_created(self) -> list[Instance]:
        """Machines the last create made, also when it was cancelled or failed
        part-way: they exist and bill until deleted."""
        return list(self._ctx.created)

    @property
    def in_flight(self) -> list[Attempt]:
        """Launches of the last create that were sent but not answered when it stopped."""
        return list(self._ctx.in_flight)

    @property
    def keyring_problem(self) -> str | None:
        """Why the system keyring could not be read (e.g. no backend), if it could not."""
        return self._ctx.credentials.keyring_problem

    @property
    def config(self) -> Config:
        """config.toml as this client read it (defaults, budget, provider list)."""
        return self._ctx.config

    # -- providers ------------------------------------------------------------

    def providers(self) -> list[ProviderStatus]:
        return self._ctx.statuses()

    def provider(self, name: str) -> AsyncProviderCalls:
        """As Client.provider; its calls are coroutines
        (``await client.provider("kubernetes").service_account_token("ci")``)."""
        return AsyncProviderCalls(self._ctx, name, self._run)

    async def verify(self, provider: str) -> datetime | None:
        return cast("datetime | None", await self._run(auth.verify(self._ctx, provider)))

    async def auth_status(self) -> builtins.list[AuthStatus]:
        return cast("builtins.list[AuthStatus]", await self._run(auth.auth_status(self._ctx)))

    async def kubernetes_token(self, service_account: str, *, namespace: str | None = None,
                               ttl: Duration = "1h",
                               provider: str = "kubernetes") -> ServiceAccountToken:
        """Deprecated: ``await client.provider("kubernetes").service_account_token(...)``."""
        _warnings.warn("AsyncClient.kubernetes_token is deprecated: use client.provider("
                       f"{provider!r}).service_account_token(...)", DeprecationWarning,
                       stacklevel=2)
        return await self.provider(provider).service_account_token(
            service_account, namespace=namespace, ttl=ttl)

    # -- offers and plans -----------------------------------------------------

    async def offers(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
                     region: str | None = None, spot: bool = False,
                     max_price: Money | None = None) -> list[Offer]:
        result: list[Offer] = await self._run(
            offer_ops.offers(self._ctx, gpu, count, provider, region, spot, max_price))
        return result

    async def estimate(self, gpu: str = "h100", count: int = 8, hours: Hours = 1,
                       provider: str | None = None, region: str | None = None,
                       disk_gb: int | None = None) -> CostEstimate:
        result: CostEstimate = await self._run(
            offer_ops.estimate(self._ctx, gpu, count, hours, provider, region, disk_gb))
        return result

    async def plan(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
                   region: str | None = None, disk_gb: int | None = None,
                   auto_shutdown: Duration | None = None, max_cost: Money | None = None,
                   spot: bool = False, n: int = 1, until: Deadline | None = None,
                   dry_run: bool = False, project: str | None = None) -> Plan:
        from gpucloud.core.plan import plan

        result: Plan = await self._run(plan(self._ctx, gpu, count, provider, region, disk_gb,
                                            auto_shutdown, max_cost, spot, n, until=until,
                                            dry_run=dry_run, project=project))
        return result

    # -- machines -------------------------------------------------------------

    async def create(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
                     region: str | None = None, name: str | None = None,
                     image: str | None = None, ssh_key: str | None = None,
                     disk_gb: int | None = None, auto_shutdown: Duration | None = None,
                     max_cost: Money | None = None, spot: bool = False,
                     plan: Plan | None = None, until: Deadline | None = None,
                     project: str | None = None) -> Instance:
        made = await self._run(create_op(self._ctx, gpu, count, provider, region, name, image,
                                         ssh_key, disk_gb, auto_shutdown, max_cost, spot, 1,
                                         plan, until, project))
        instance: Instance = made[0]
        return instance

    async def create_many(self, gpu: str = "h100", count: int = 8, n: int = 2,
                          provider: str | None = None, region: str | None = None,
                          name: str | None = None, image: str | None = None,
                          ssh_key: str | None = None, disk_gb: int | None = None,
                          auto_shutdown: Duration | None = None, max_cost: Money | None = None,
                          spot: bool = False, plan: Plan | None = None,
                          until: Deadline | None = None, *,
                          requests: Sequence[CreateRequest | Mapping[str, object]] | None = None,
                          concurrency: int | None = None, all_or_nothing: bool = False,
                          batch: str | None = None,
                          on_item: Callable[[BatchItem], None] | None = None,
                          project: str | None = None) -> BatchResult:
        """As Client.create_many; launches run as concurrent tasks."""
        from gpucloud.batch.create import create_many

        result: BatchResult = await self._run(create_many(
            self._ctx, gpu, count, n, provider, region, name, image, ssh_key, disk_gb,
            auto_shutdown, max_cost, spot, plan, until, requests, concurrency, all_or_nothing,
            batch, on_item, project))
        return result

    async def list(self, provider: str | None = None, *, all: bool = False,
                   status: StatusFilter | None = None,
                   mine: bool = False) -> builtins.list[Instance]:
        from gpucloud.core.housekeeping import listing

        result: builtins.list[Instance] = await self._run(
            listing(self._ctx, provider, all, status, mine=mine))
        return result

    async def iter_list(self, provider: str | None = None, *, all: bool = False,
                        status: StatusFilter | None = None,
                        mine: bool = False) -> AsyncIterator[Instance]:
        """As Client.iter_list: machine by machine as the pages come."""
        from gpucloud.core.housekeeping import listing_pages

        async for instance in self._runner.iterate(
                listing_pages(self._ctx, provider, all, status, mine=mine)):
            yield instance

    async def get(self, ref: Ref) -> Instance:
        return cast("Instance", await self._run(instances.get(self._ctx, ref)))

    async def delete(self, ref: Ref) -> None:
        await self._run(instances.delete(self._ctx, ref))

    async def delete_all(self, provider: str | None = None, *, name_prefix: str | None = None,
                         dry_run: bool = False) -> builtins.list[Instance]:
        from gpucloud.core import housekeeping

        op = (housekeeping.deletable if dry_run else housekeeping.delete_all)(
            self._ctx, provider, name_prefix)
        return cast("builtins.list[Instance]", await self._run(op))

    async def wait(self, ref: Ref, until: Status = "running", timeout: float = 600) -> Instance:
        return cast("Instance", await self._run(instances.wait(self._ctx, ref, until, timeout)))

    async def stop(self, ref: Ref) -> Instance:
        return cast("Instance", await self._run(instances.power(self._ctx, ref, "stop")))

    async def start(self, ref: Ref) -> Instance:
        return cast("Instance", await self._run(instances.power(self._ctx, ref, "start")))

    async def exec(self, ref: Ref, command: str, *, timeout: float = DEFAULT_EXEC_TIMEOUT,
                   identity: str | None = None) -> ExecResult:
        """As Client.exec; the command runs in a worker thread."""
        import asyncio

        from gpucloud.machine.exec import run_on

        instance = await self.get(ref)
        return await asyncio.to_thread(run_on, self._ctx, instance, command, timeout, identity)

    # -- volumes --------------------------------------------------------------

    async def volumes(self, provider: str | None = None) -> builtins.list[Volume]:
        """Network volumes on every provider in scope that has them (one
        provider's failure is a warning); each listing is recorded in the cost
        ledger, which bills volumes by the GB-month."""
        from gpucloud.core import volumes

        return cast("builtins.list[Volume]",
                    await self._run(volumes.list_volumes(self._ctx, provider)))

    async def volume(self, ref: str) -> Volume:
        """One volume: provider/id, or its name (or id) where unique."""
        from gpucloud.core import volumes

        return cast("Volume", await self._run(volumes.find(self._ctx, ref)))

    async def plan_volume(self, name: str, size_gb: int, region: str | None = None,
                          provider: str | None = None) -> Volume:
        """The volume create_volume would make (no id yet; status "planned"),
        with the provider's rate, so its monthly cost (``price_per_month``;
        None: unknown) can be shown first. Checks what create_volume checks."""
        from gpucloud.core import volumes

        return cast("Volume", await self._run(
            volumes.plan_volume(self._ctx, name, size_gb, region, provider)))

    async def create_volume(self, name: str, size_gb: int, region: str | None = None,
                            provider: str | None = None) -> Volume:
        """Create a volume of `size_gb` GB in `region`; it bills by the GB-month
        until deleted, machine or not. A taken name, an unknown region or a
        provider without volumes is a SpecError, before anything is sent."""
        from gpucloud.core import volumes

        return cast("Volume", await self._run(
            volumes.create_volume(self._ctx, name, size_gb, region, provider)))

    async def delete_volume(self, ref: Volume | str, *, force: bool = False) -> None:
        """Delete a volume (provider/id or its unique name); its data is gone for
        good. One a machine still uses is refused unless `force`."""
        from gpucloud.core import volumes

        await self._run(volumes.delete_volume(self._ctx, ref, force))

    # -- deadlines, reconcile, costs ------------------------------------------

    async def extend(self, ref: Ref, by: Duration | None = None,
                     until: Deadline | None = None) -> Instance:
        from gpucloud.safety.extend import extend

        return cast("Instance", await self._run(extend(self._ctx, ref, by, until)))

    async def check_extension(self, instance: Instance, until: datetime, *,
                              now: datetime | None = None) -> None:
        """As Client.check_extension (the budget's check of an extension, alone)."""
        from gpucloud.safety import budget
        from gpucloud.safety.journal import utcnow

        budget.check_extension(self._ctx, instance, until, now or utcnow(), record=False)

    async def reap(self, dry_run: bool = False, provider: str | None = None,
                   unclaimed: bool = False) -> ReapReport:
        from gpucloud.safety.reap import reap

        return cast("ReapReport", await self._run(reap(self._ctx, dry_run, provider, unclaimed)))

    async def reconcile(self, terminate_orphans: bool | Iterable[str] = False,
                        provider: str | None = None, unclaimed: bool = False,
                        delete_unclaimed: bool | Iterable[str] = False) -> ReconcileReport:
        from gpucloud.safety.reconcile import reconcile

        result: ReconcileReport = await self._run(
            reconcile(self._ctx, terminate_orphans, provider, unclaimed, delete_unclaimed))
        return result

    async def costs(self, month: str | None = None, by: CostsBy = "instance") -> CostReport:
        from gpucloud.safety.cost_report import report

        return cast("CostReport", await self._run(report(self._ctx, month, by)))

    # -- jobs -----------------------------------------------------------------

    async def plan_job(self, spec: JobSpecLike, provider: str | None = None,
                       region: str | None = None, dry_run: bool = False,
                       project: str | None = None) -> Plan:
        from gpucloud.jobs import ops

        return cast("Plan", await self._run(ops.plan(self._ctx, spec, provider, region,
                                                     dry_run, project)))

    async def submit(self, spec: JobSpecLike, provider: str | None = None,
                     region: str | None = None, plan: Plan | None = None,
                     project: str | None = None) -> Job:
        from gpucloud.jobs import ops

        return cast("Job", await self._run(ops.submit(self._ctx, spec, provider, region,
                                                      plan, project)))

    async def jobs(self, provider: str | None = None) -> builtins.list[Job]:
        from gpucloud.jobs import ops

        return cast("builtins.list[Job]", await self._run(ops.jobs(self._ctx, provider)))

    async def job(self, ref: JobRef) -> Job:
        from gpucloud.jobs import ops

        return cast("Job", await self._run(ops.job(self._ctx, ref)))

    async def cancel(self, ref: JobRef) -> Job:
        from gpucloud.jobs import ops

        return cast("Job", await self._run(ops.cancel(self._ctx, ref)))

    @overload
    def logs(self, ref: JobRef, follow: Literal[False] = False,
             tail: int | None = None) -> Awaitable[str]: ...

    @overload
    def logs(self, ref: JobRef, follow: Literal[True], tail: int | None = None
             ) -> AsyncIterator[str]: ...

    def logs(self, ref: JobRef, follow: bool = False,
             tail: int | None = None) -> Awaitable[str] | AsyncIterator[str]:
        """The job's output, ``await client.logs(ref)``; ``follow=True``: an async
        iterator of its lines as they come, until the job ends
        (``async for line in client.logs(ref, follow=True)``), as follow_logs."""
        if follow:
            return self.follow_logs(ref, tail)
        return self._logs(ref, tail)

    async def _logs(self, ref: JobRef, tail: int | None) -> str:
        from gpucloud.jobs import ops

        _, text = await self._run(ops.logs(self._ctx, ref, tail))
        return str(text)

    async def follow_logs(self, ref: JobRef, tail: int | None = None) -> AsyncIterator[str]:
        """As Client.follow_logs: the job's lines as they come, until it ends."""
        import asyncio

        from gpucloud.jobs import ops

        seen, first = 0, True
        while True:
            job, text = await self._run(ops.logs(self._ctx, ref))
            ref = job  # found once: no second lookup by name
            seen, fresh = ops.new_lines(seen, text)
            for line in (fresh[-tail:] if first and tail else fresh):
                yield line
            first = False
            if job.status in ops.ENDED:
                return
            await (self._sleep or asyncio.sleep)(ops.FOLLOW_INTERVAL)

    # -- sessions -------------------------------------------------------------

    async def aclose(self) -> None:
        await self._runner.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["AsyncClient"]
