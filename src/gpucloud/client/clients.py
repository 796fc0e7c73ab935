"""Client and AsyncClient: the only code that performs I/O for adapters.

Both run the operations of ``engine.py``; they differ only in how a
``Call`` is carried out (a thread pool of httpx.Client sessions, or asyncio
with httpx.AsyncClient sessions). Retry policy: see ``_http.py``.

Argument types, the same in every method:

* durations (``auto_shutdown``): a ``timedelta`` or a string such as "4h",
  "90m", "1h30m", "2d";
* money (``max_cost``, ``max_price``): ``Decimal``, a decimal string or an
  int, in USD (never a float: 0.1 is not a price);
* an absolute deadline (``until``): an aware ``datetime`` or ISO-8601 text
  with a zone ("2026-12-01T18:00Z"); give it or ``auto_shutdown``, not both.
  Neither: ``[defaults] auto_shutdown`` of config.toml applies, if set;
  ``auto_shutdown="never"`` opts out of that default;
* ``hours`` of an estimate: a number of hours or a duration;
* a machine (``ref``): an ``Instance`` or its "provider/id" string.

Jobs (submit, jobs, job, cancel, logs) are in ``job_client.py``; deadlines,
reconcile and costs (extend, reap, reconcile, costs) in ``safety_client.py``;
exec in ``exec_client.py``; batches (create_many) in ``batch_client.py``.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

from gpucloud.core.runners import AsyncRunner, ThreadedRunner
from gpucloud.core.context import ClientContext
from gpucloud.core.engine import Engine
from gpucloud.client.batch import AsyncBatchMethods, BatchMethods
from gpucloud.client.exec import AsyncExecMethods, ExecMethods
from gpucloud.client.jobs import AsyncJobMethods, JobMethods
from gpucloud.client.safety import AsyncSafetyMethods, SafetyMethods
from gpucloud.core.instructions import Op

# httpx (the sessions), pydantic (the models), the batch machinery and the job and
# reconcile modules are imported where used, so a catalog-only `gpucloud offers`
# loads none of them.
if TYPE_CHECKING:
    from gpucloud.catalog.gaps import CatalogGap
    from gpucloud.catalog.offer import CatalogOffer
    from gpucloud.models import (
        Attempt, AuthStatus, CostEstimate, Instance, Offer, Plan, ProviderStatus,
    )
    from gpucloud.transport.http import AsyncSession, Session
    from gpucloud.providers.kubernetes._tokens import ServiceAccountToken

from gpucloud.types import Deadline, Duration, Hours, Money, Ref, Status, StatusFilter


class _Base:
    def __init__(self, providers: list[str] | None = None, *,
                 credentials: dict[str, str] | None = None,
                 on_attempt: Callable[[Attempt], None] | None = None,
                 use_keyring: bool = True) -> None:
        self._ctx = ClientContext(providers, credentials, on_attempt, use_keyring)
        self._engine = Engine(self._ctx)

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
        """Every offer the last create tried, and how each ended (a batch: those
        of all its machines, in the order they ended)."""
        return list(self._ctx.last_attempts)

    @property
    def last_created(self) -> list[Instance]:
        """Machines the last create made, also when it was interrupted (Ctrl-C) or
        failed part-way: they exist and bill until deleted."""
        return list(self._ctx.created)

    @property
    def in_flight(self) -> list[Attempt]:
        """Launches of the last create that were sent but not answered when it
        stopped (an interrupt): each machine may exist and carries its launch id.
        A batch lists every launch in flight across it."""
        return list(self._ctx.in_flight)

    def providers(self) -> list[ProviderStatus]:
        return self._ctx.statuses()

    @property
    def keyring_problem(self) -> str | None:
        """Why the system keyring could not be read (e.g. no backend), if it could not."""
        return self._ctx.credentials.keyring_problem

    def _create_op(self, gpu: str, count: int, provider: str | None, region: str | None,
                   name: str | None, image: str | None, ssh_key: str | None,
                   disk_gb: int | None, auto_shutdown: Duration | None, max_cost: Money | None,
                   spot: bool, n: int, plan: Plan | None, until: Deadline | None = None) -> Op:
        if plan is None:
            plan = yield from self._engine.plan(gpu, count, provider, region, disk_gb,
                                                auto_shutdown, max_cost, spot, n, until=until)
        elif plan.instances != n:
            from gpucloud.errors import SpecError

            raise SpecError(f"the plan is for {plan.instances} machine(s), not {n}",
                            hint="make the plan with the same n= (CLI: --instances)")
        made: list[Instance] = yield from self._engine.create(
            plan, name=name, image=image, ssh_key=ssh_key, disk_gb=disk_gb)
        return made


class Client(ThreadedRunner, _Base, JobMethods, SafetyMethods, ExecMethods, BatchMethods):
    """Synchronous client. Providers are queried in parallel threads."""

    def __init__(self, providers: list[str] | None = None, *,
                 credentials: dict[str, str] | None = None,
                 on_attempt: Callable[[Attempt], None] | None = None,
                 use_keyring: bool = True, sleep: Callable[[float], None] | None = None) -> None:
        super().__init__(providers, credentials=credentials, on_attempt=on_attempt,
                         use_keyring=use_keyring)
        self._sleep = sleep or time.sleep
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()  # concurrent launches open sessions from threads

    def offers(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
               region: str | None = None, spot: bool = False,
               max_price: Money | None = None) -> list[Offer]:
        """Offers for `count` x `gpu` machines, cheapest first (live where credentials
        allow, bundled catalog prices otherwise; see `warnings`)."""
        from gpucloud.catalog.offer import as_offers

        return as_offers(self._offer_rows(gpu, count, provider, region, spot, max_price))

    def _offer_rows(self, gpu: str, count: int, provider: str | None = None,
                    region: str | None = None, spot: bool = False,
                    max_price: Money | None = None) -> list[Offer | CatalogOffer]:
        """offers() with catalog rows left as CatalogOffer, for `gpucloud offers`:
        it renders them as they are, so a catalog-only run never imports pydantic."""
        result: list[Offer | CatalogOffer] = self._run(
            self._engine.offer_rows(gpu, count, provider, region, spot, max_price))
        return result

    def estimate(self, gpu: str = "h100", count: int = 8, hours: Hours = 1,
                 provider: str | None = None, region: str | None = None,
                 disk_gb: int | None = None) -> CostEstimate:
        """What the cheapest matching machine costs over `hours` (default one hour)."""
        result: CostEstimate = self._run(
            self._engine.estimate(gpu, count, hours, provider, region, disk_gb))
        return result

    def plan(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
             region: str | None = None, disk_gb: int | None = None,
             auto_shutdown: Duration | None = None, max_cost: Money | None = None,
             spot: bool = False, n: int = 1, until: Deadline | None = None,
             dry_run: bool = False) -> Plan:
        """What create would do (offer, fallbacks, estimate, deadline); spends nothing.
        `dry_run`: a plan to look at only; with no credentials for any provider in
        scope it is made from the bundled catalog (create refuses such a plan)."""
        result: Plan = self._run(self._engine.plan(gpu, count, provider, region, disk_gb,
                                                   auto_shutdown, max_cost, spot, n,
                                                   until=until, dry_run=dry_run))
        return result

    def create(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
               region: str | None = None, name: str | None = None, image: str | None = None,
               ssh_key: str | None = None, disk_gb: int | None = None,
               auto_shutdown: Duration | None = None, max_cost: Money | None = None,
               spot: bool = False, plan: Plan | None = None,
               until: Deadline | None = None) -> Instance:
        """Create one machine. Plans first (cheapest available offer, estimate,
        `max_cost`), then launches; see launcher.py for failover and reconcile."""
        made = self._run(self._create_op(gpu, count, provider, region, name, image, ssh_key,
                                         disk_gb, auto_shutdown, max_cost, spot, 1, plan, until))
        instance: Instance = made[0]
        return instance

    def list(self, provider: str | None = None, *, all: bool = False,
             status: StatusFilter | None = None) -> list[Instance]:
        """Machines on every provider in scope (one provider's failure is a warning).
        Machines terminated over 10 minutes ago are left out unless `all=True`;
        `status` ("running", "running,stopped", or a list) keeps only those, ended
        long ago or not. A terminated machine carries `terminated_at` and
        `final_cost` from the cost ledger."""
        result: list[Instance] = self._run(self._engine.listing(provider, all, status))
        return result

    def get(self, ref: Ref) -> Instance:
        result: Instance = self._run(self._engine.get(ref))
        return result

    def delete(self, ref: Ref) -> None:
        """Terminate a machine; its disk is gone for good."""
        self._run(self._engine.delete(ref))

    def delete_all(self, provider: str | None = None, *, name_prefix: str | None = None,
                   dry_run: bool = False) -> builtins.list[Instance]:
        """Terminate every machine gpucloud made that is still up, on `provider` (else
        every provider in scope), named `name_prefix`... if given; machines it did not
        make are never touched. Returns those deleted (with `dry_run`: those it would
        delete). One failure does not stop the others: the first error is raised once
        all were tried, its `instances` the machines still up."""
        result: builtins.list[Instance] = self._run(
            self._engine.delete_all(provider, name_prefix, dry_run))
        return result

    def kubernetes_token(self, service_account: str, *, namespace: str | None = None,
                         ttl: Duration = "1h",
                         provider: str = "kubernetes") -> ServiceAccountToken:
        """A short-lived service-account token from the TokenRequest API (at least
        10 minutes): a ServiceAccountToken whose ``token`` is a SecretStr."""
        from gpucloud.providers.kubernetes._tokens import mint_op

        token: ServiceAccountToken = self._run(
            mint_op(self._ctx, provider, service_account, namespace, ttl))
        return token

    def wait(self, ref: Ref, until: Status = "running", timeout: float = 600) -> Instance:
        """Poll until the machine reaches `until`; WaitError when it fails or times out."""
        result: Instance = self._run(self._engine.wait(ref, until, timeout))
        return result

    def stop(self, ref: Ref) -> Instance:
        """Power a machine off, keeping its disk (providers with stop/start only)."""
        result: Instance = self._run(self._engine.power(ref, "stop"))
        return result

    def start(self, ref: Ref) -> Instance:
        """Power a stopped machine on again: billing resumes."""
        result: Instance = self._run(self._engine.power(ref, "start"))
        return result

    def verify(self, provider: str) -> datetime | None:
        """Check a provider's credential with a cheap read; returns the token expiry if known."""
        result: datetime | None = self._run(self._engine.verify(provider))
        return result

    def auth_status(self) -> builtins.list[AuthStatus]:
        result: builtins.list[AuthStatus] = self._run(self._engine.auth_status())
        return result

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(AsyncRunner, _Base, AsyncJobMethods, AsyncSafetyMethods, AsyncExecMethods,
                  AsyncBatchMethods):
    """The same methods as Client, as coroutines (httpx.AsyncClient underneath)."""

    def __init__(self, providers: list[str] | None = None, *,
                 credentials: dict[str, str] | None = None,
                 on_attempt: Callable[[Attempt], None] | None = None,
                 use_keyring: bool = True,
                 sleep: Callable[[float], Awaitable[None]] | None = None) -> None:
        super().__init__(providers, credentials=credentials, on_attempt=on_attempt,
                         use_keyring=use_keyring)
        self._sleep = sleep
        self._sessions: dict[str, AsyncSession] = {}

    async def offers(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
                     region: str | None = None, spot: bool = False,
                     max_price: Money | None = None) -> list[Offer]:
        result: list[Offer] = await self._run(
            self._engine.offers(gpu, count, provider, region, spot, max_price))
        return result

    async def estimate(self, gpu: str = "h100", count: int = 8, hours: Hours = 1,
                       provider: str | None = None, region: str | None = None,
                       disk_gb: int | None = None) -> CostEstimate:
        result: CostEstimate = await self._run(
            self._engine.estimate(gpu, count, hours, provider, region, disk_gb))
        return result

    async def plan(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
                   region: str | None = None, disk_gb: int | None = None,
                   auto_shutdown: Duration | None = None, max_cost: Money | None = None,
                   spot: bool = False, n: int = 1, until: Deadline | None = None,
                   dry_run: bool = False) -> Plan:
        result: Plan = await self._run(self._engine.plan(
            gpu, count, provider, region, disk_gb, auto_shutdown, max_cost, spot, n,
            until=until, dry_run=dry_run))
        return result

    async def create(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
                     region: str | None = None, name: str | None = None,
                     image: str | None = None, ssh_key: str | None = None,
                     disk_gb: int | None = None, auto_shutdown: Duration | None = None,
                     max_cost: Money | None = None, spot: bool = False,
                     plan: Plan | None = None, until: Deadline | None = None) -> Instance:
        made = await self._run(self._create_op(gpu, count, provider, region, name, image,
                                               ssh_key, disk_gb, auto_shutdown, max_cost, spot,
                                               1, plan, until))
        instance: Instance = made[0]
        return instance

    async def list(self, provider: str | None = None, *, all: bool = False,
                   status: StatusFilter | None = None) -> list[Instance]:
        result: list[Instance] = await self._run(self._engine.listing(provider, all, status))
        return result

    async def get(self, ref: Ref) -> Instance:
        result: Instance = await self._run(self._engine.get(ref))
        return result

    async def delete(self, ref: Ref) -> None:
        await self._run(self._engine.delete(ref))

    async def delete_all(self, provider: str | None = None, *, name_prefix: str | None = None,
                         dry_run: bool = False) -> builtins.list[Instance]:
        result: builtins.list[Instance] = await self._run(
            self._engine.delete_all(provider, name_prefix, dry_run))
        return result

    async def kubernetes_token(self, service_account: str, *, namespace: str | None = None,
                               ttl: Duration = "1h",
                               provider: str = "kubernetes") -> ServiceAccountToken:
        from gpucloud.providers.kubernetes._tokens import mint_op

        token: ServiceAccountToken = await self._run(
            mint_op(self._ctx, provider, service_account, namespace, ttl))
        return token

    async def wait(self, ref: Ref, until: Status = "running", timeout: float = 600) -> Instance:
        result: Instance = await self._run(self._engine.wait(ref, until, timeout))
        return result

    async def stop(self, ref: Ref) -> Instance:
        result: Instance = await self._run(self._engine.power(ref, "stop"))
        return result

    async def start(self, ref: Ref) -> Instance:
        result: Instance = await self._run(self._engine.power(ref, "start"))
        return result

    async def verify(self, provider: str) -> datetime | None:
        result: datetime | None = await self._run(self._engine.verify(provider))
        return result

    async def auth_status(self) -> builtins.list[AuthStatus]:
        result: builtins.list[AuthStatus] = await self._run(self._engine.auth_status())
        return result

    async def aclose(self) -> None:
        for session in self._sessions.values():
            await session.aclose()
        self._sessions.clear()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
