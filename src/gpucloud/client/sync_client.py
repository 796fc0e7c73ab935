"""Client: the SDK, synchronous. Every method runs one operation (core/, jobs/,
safety/, batch/) through a ThreadedRunner (core/runners.py): providers are
asked in parallel threads, each through its own httpx.Client session.

AsyncClient (async_client.py) has the same methods with the same parameters
and answers, as coroutines (tests/unit/test_client_parity.py keeps them so).

Argument types, the same in every method: see gpucloud.types.
"""

from __future__ import annotations

import builtins
import time
import warnings as _warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from gpucloud.client.provider_calls import ProviderCalls
from gpucloud.core import auth, instances
from gpucloud.core import offers as offer_ops
from gpucloud.core.context import ClientContext
from gpucloud.core.create import create as create_op
from gpucloud.core.instructions import Op
from gpucloud.core.runners import ThreadedRunner
from gpucloud.machine.exec import DEFAULT_EXEC_TIMEOUT
from gpucloud.types import Deadline, Duration, Hours, Money, Ref, Status, StatusFilter

# httpx (the sessions), pydantic (the models), the batch machinery and the job,
# deadline and reconcile modules are imported where used, so a catalog-only
# `gpucloud offers` loads none of them.
if TYPE_CHECKING:
    from gpucloud.batch.models import BatchItem, BatchResult, CreateRequest
    from gpucloud.catalog.gaps import CatalogGap
    from gpucloud.catalog.offer import CatalogOffer
    from gpucloud.config.settings import Config
    from gpucloud.jobs.ops import JobRef, JobSpecLike
    from gpucloud.models import (
        Attempt, AuthStatus, CostEstimate, ExecResult, Instance, Job, Offer, Plan,
        ProviderStatus, ReapReport, ServiceAccountToken, Volume,
    )
    from gpucloud.safety.costs import CostReport
    from gpucloud.safety.reconcile import ReconcileReport

CostsBy = Literal["provider", "instance", "name", "user", "project", "task"]


class Client:
    """Synchronous client. Providers are queried in parallel threads."""

    def __init__(self, providers: list[str] | None = None, *,
                 credentials: dict[str, str] | None = None,
                 on_attempt: Callable[[Attempt], None] | None = None,
                 use_keyring: bool = True, sleep: Callable[[float], None] | None = None) -> None:
        self._ctx = ClientContext(providers, credentials, on_attempt, use_keyring)
        self._sleep = sleep or time.sleep
        self._runner = ThreadedRunner(self._ctx, self._sleep)

    def _run(self, op: Op) -> Any:
        return self._runner.run(op)

    # -- what the last call left ----------------------------------------------

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

    def provider(self, name: str) -> ProviderCalls:
        """One provider: its facts (auth_kind, has_adapter, deadline_precision)
        and the calls only it has (``calls``), e.g.
        ``client.provider("kubernetes").service_account_token("ci")``.
        An unknown name is a SpecError that lists the known ones."""
        return ProviderCalls(self._ctx, name, self._run)

    def verify(self, provider: str) -> datetime | None:
        """Check a provider's credential with a cheap read; returns the token expiry if known."""
        return cast("datetime | None", self._run(auth.verify(self._ctx, provider)))

    def auth_status(self) -> builtins.list[AuthStatus]:
        return cast("builtins.list[AuthStatus]", self._run(auth.auth_status(self._ctx)))

    def kubernetes_token(self, service_account: str, *, namespace: str | None = None,
                         ttl: Duration = "1h",
                         provider: str = "kubernetes") -> ServiceAccountToken:
        """Deprecated: ``client.provider("kubernetes").service_account_token(...)``."""
        _warnings.warn("Client.kubernetes_token is deprecated: use client.provider("
                       f"{provider!r}).service_account_token(...)", DeprecationWarning,
                       stacklevel=2)
        return self.provider(provider).service_account_token(
            service_account, namespace=namespace, ttl=ttl)

    # -- offers and plans -----------------------------------------------------

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
            offer_ops.offer_rows(self._ctx, gpu, count, provider, region, spot, max_price))
        return result

    def estimate(self, gpu: str = "h100", count: int = 8, hours: Hours = 1,
                 provider: str | None = None, region: str | None = None,
                 disk_gb: int | None = None) -> CostEstimate:
        """What the cheapest matching machine costs over `hours` (default one hour)."""
        result: CostEstimate = self._run(
            offer_ops.estimate(self._ctx, gpu, count, hours, provider, region, disk_gb))
        return result

    def plan(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
             region: str | None = None, disk_gb: int | None = None,
             auto_shutdown: Duration | None = None, max_cost: Money | None = None,
             spot: bool = False, n: int = 1, until: Deadline | None = None,
             dry_run: bool = False, project: str | None = None) -> Plan:
        """What create would do (offer, fallbacks, estimate, deadline); spends nothing.
        `dry_run`: a plan to look at only; with no credentials for any provider in
        scope it is made from the bundled catalog (create refuses such a plan)."""
        from gpucloud.core.plan import plan

        result: Plan = self._run(plan(self._ctx, gpu, count, provider, region, disk_gb,
                                      auto_shutdown, max_cost, spot, n, until=until,
                                      dry_run=dry_run, project=project))
        return result

    # -- machines -------------------------------------------------------------

    def create(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
               region: str | None = None, name: str | None = None, image: str | None = None,
               ssh_key: str | None = None, disk_gb: int | None = None,
               auto_shutdown: Duration | None = None, max_cost: Money | None = None,
               spot: bool = False, plan: Plan | None = None,
               until: Deadline | None = None,
               project: str | None = None) -> Instance:
        """Create one machine. Plans first (cheapest available offer, estimate,
        `max_cost`), then launches; see core/launch.py for failover and reconcile.
        `project`: a short name (a-z, 0-9, '-', '_', '.') the launch is journaled
        and budgeted under ([budget.projects] in config.toml)."""
        made = self._run(create_op(self._ctx, gpu, count, provider, region, name, image,
                                   ssh_key, disk_gb, auto_shutdown, max_cost, spot, 1, plan,
                                   until, project))
        instance: Instance = made[0]
        return instance

    def create_many(self, gpu: str = "h100", count: int = 8, n: int = 2,
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
        """Create `n` machines alike (names NAME-1..NAME-n), or one per entry of
        `requests` (CreateRequests or dicts of create's arguments). Every distinct
        request is planned first and `max_cost` caps the whole batch. At most
        `concurrency` launches are in flight; left out, as many as the provider's
        declared rate times the latency observed calls for. Returns a BatchResult (one item per
        machine: made, or why not); `all_or_nothing=True` terminates what was made
        when any fails and raises BatchIncompleteError. `batch`: a key that makes
        the batch resumable: run again with it, only missing machines are made.
        `on_item` is called as each machine settles (from a worker thread)."""
        from gpucloud.batch.create import create_many

        result: BatchResult = self._run(create_many(
            self._ctx, gpu, count, n, provider, region, name, image, ssh_key, disk_gb,
            auto_shutdown, max_cost, spot, plan, until, requests, concurrency, all_or_nothing,
            batch, on_item, project))
        return result

    def list(self, provider: str | None = None, *, all: bool = False,
             status: StatusFilter | None = None,
             mine: bool = False) -> builtins.list[Instance]:
        """Machines on every provider in scope (one provider's failure is a warning).
        Machines terminated over 10 minutes ago are left out unless `all=True`;
        `status` ("running", "running,stopped", or a list) keeps only those, ended
        long ago or not. A terminated machine carries `terminated_at` and
        `final_cost` from the cost ledger. `mine=True`: only the machines whose
        launch in this state's journal this user made (GPUCLOUD_USER, else the
        OS user); a machine not in the journal is nobody's, so not mine."""
        from gpucloud.core.housekeeping import listing

        return cast("builtins.list[Instance]",
                    self._run(listing(self._ctx, provider, all, status, mine=mine)))

    def iter_list(self, provider: str | None = None, *, all: bool = False,
                  status: StatusFilter | None = None, mine: bool = False) -> Iterator[Instance]:
        """As `list`, machine by machine as the providers' pages come, so a
        listing of thousands is never held at once (what `gpucloud list --json`
        prints from). `warnings` and the cost ledger's record of the listing
        are complete once the iterator is exhausted; one stopped early records
        nothing."""
        from gpucloud.core.housekeeping import listing_pages

        return self._runner.iterate(listing_pages(self._ctx, provider, all, status, mine=mine))

    def get(self, ref: Ref) -> Instance:
        return cast("Instance", self._run(instances.get(self._ctx, ref)))

    def delete(self, ref: Ref) -> None:
        """Terminate a machine; its disk is gone for good."""
        self._run(instances.delete(self._ctx, ref))

    def delete_all(self, provider: str | None = None, *, name_prefix: str | None = None,
                   dry_run: bool = False) -> builtins.list[Instance]:
        """Terminate every machine gpucloud made that is still up, on `provider` (else
        every provider in scope), named `name_prefix`... if given; machines it did not
        make are never touched. Returns those deleted (with `dry_run`: those it would
        delete). One failure does not stop the others: the first error is raised once
        all were tried, its `instances` the machines still up."""
        from gpucloud.core import housekeeping

        op = (housekeeping.deletable if dry_run else housekeeping.delete_all)(
            self._ctx, provider, name_prefix)
        return cast("builtins.list[Instance]", self._run(op))

    def wait(self, ref: Ref, until: Status = "running", timeout: float = 600) -> Instance:
        """Poll until the machine reaches `until`; WaitError when it fails or times out."""
        return cast("Instance", self._run(instances.wait(self._ctx, ref, until, timeout)))

    def stop(self, ref: Ref) -> Instance:
        """Power a machine off, keeping its disk (providers with stop/start only)."""
        return cast("Instance", self._run(instances.power(self._ctx, ref, "stop")))

    def start(self, ref: Ref) -> Instance:
        """Power a stopped machine on again: billing resumes."""
        return cast("Instance", self._run(instances.power(self._ctx, ref, "start")))

    def exec(self, ref: Ref, command: str, *, timeout: float = DEFAULT_EXEC_TIMEOUT,
             identity: str | None = None) -> ExecResult:
        """Run a shell command on the machine; its exit code, stdout and stderr.
        `identity` is the private key for SSH (default: the private half of
        the .pub file create used for this machine, when this computer created
        it and that file exists; else the one beside ~/.ssh/id_ed25519.pub or
        id_rsa.pub; else ssh's own choice). `timeout` (seconds) ends a command
        that runs longer with WaitTimeoutError."""
        from gpucloud.machine.exec import run_on

        return run_on(self._ctx, self.get(ref), command, timeout, identity)

    # -- volumes --------------------------------------------------------------

    def volumes(self, provider: str | None = None) -> builtins.list[Volume]:
        """Network volumes on every provider in scope that has them (one
        provider's failure is a warning); each listing is recorded in the cost
        ledger, which bills volumes by the GB-month."""
        from gpucloud.core import volumes

        return cast("builtins.list[Volume]",
                    self._run(volumes.list_volumes(self._ctx, provider)))

    def volume(self, ref: str) -> Volume:
        """One volume: provider/id, or its name (or id) where unique."""
        from gpucloud.core import volumes

        return cast("Volume", self._run(volumes.find(self._ctx, ref)))

    def plan_volume(self, name: str, size_gb: int, region: str | None = None,
                    provider: str | None = None) -> Volume:
        """The volume create_volume would make (no id yet; status "planned"),
        with the provider's rate, so its monthly cost (``price_per_month``;
        None: unknown) can be shown first. Checks what create_volume checks."""
        from gpucloud.core import volumes

        return cast("Volume", self._run(
            volumes.plan_volume(self._ctx, name, size_gb, region, provider)))

    def create_volume(self, name: str, size_gb: int, region: str | None = None,
                      provider: str | None = None) -> Volume:
        """Create a volume of `size_gb` GB in `region`; it bills by the GB-month
        until deleted, machine or not. A taken name, an unknown region or a
        provider without volumes is a SpecError, before anything is sent."""
        from gpucloud.core import volumes

        return cast("Volume", self._run(
            volumes.create_volume(self._ctx, name, size_gb, region, provider)))

    def delete_volume(self, ref: Volume | str, *, force: bool = False) -> None:
        """Delete a volume (provider/id or its unique name); its data is gone for
        good. One a machine still uses is refused unless `force`."""
        from gpucloud.core import volumes

        self._run(volumes.delete_volume(self._ctx, ref, force))

    # -- deadlines, reconcile, costs ------------------------------------------

    def extend(self, ref: Ref, by: Duration | None = None,
               until: Deadline | None = None) -> Instance:
        """Move a machine's deadline later by `by`, or to `until` (aware datetime or
        ISO-8601 with a zone), on the provider and in the journal."""
        from gpucloud.safety.extend import extend

        return cast("Instance", self._run(extend(self._ctx, ref, by, until)))

    def check_extension(self, instance: Instance, until: datetime, *,
                        now: datetime | None = None) -> None:
        """The monthly budget's check of an extension, alone: BudgetExceededError
        when moving `instance`'s deadline to `until` would take this month over
        ``[budget] monthly``; a warning (`warnings`) at 80 % of it. Sends and
        records nothing (`extend` checks again, and records)."""
        from gpucloud.safety import budget
        from gpucloud.safety.journal import utcnow

        budget.check_extension(self._ctx, instance, until, now or utcnow(), record=False)

    def reap(self, dry_run: bool = False, provider: str | None = None,
             unclaimed: bool = False) -> ReapReport:
        """Terminate every gpucloud machine past its deadline, on every provider with
        credentials; works from the providers' own records, not the local journal.
        `unclaimed`: also report (never end) the machines with gpucloud's launch id
        that no launch of this journal made (`ReapReport.unclaimed`)."""
        from gpucloud.safety.reap import reap

        return cast("ReapReport", self._run(reap(self._ctx, dry_run, provider, unclaimed)))

    def reconcile(self, terminate_orphans: bool | Iterable[str] = False,
                  provider: str | None = None, unclaimed: bool = False,
                  delete_unclaimed: bool | Iterable[str] = False) -> ReconcileReport:
        """Repair the journal after a crash: adopt machines of launches never
        recorded (by launch id), mark the ones the providers prove absent failed,
        report orphans and foreign machines; terminate the orphans if asked
        (True: all; refs: those among them). `unclaimed`: also list every
        provider with credentials for machines with gpucloud's launch id that no
        launch of this journal made, with their age and cost so far;
        `delete_unclaimed` deletes them (True: all; refs: those among them)."""
        from gpucloud.safety.reconcile import reconcile

        return cast("ReconcileReport", self._run(reconcile(
            self._ctx, terminate_orphans, provider, unclaimed, delete_unclaimed)))

    def costs(self, month: str | None = None, by: CostsBy = "instance") -> CostReport:
        """A month's spend from the cost ledger (default: this month, UTC, "2026-11"):
        spent so far, and projected for machines still running; unknown prices are None.
        `by`: one line per machine (instance), provider, name, or queue task that
        launched the machines ("task": GPUCLOUD_TASK_ID of the launching process)."""
        from gpucloud.safety.cost_report import report

        return cast("CostReport", self._run(report(self._ctx, month, by)))

    # -- jobs -----------------------------------------------------------------

    def plan_job(self, spec: JobSpecLike, provider: str | None = None,
                 region: str | None = None, dry_run: bool = False,
                 project: str | None = None) -> Plan:
        """What submit would launch, its estimate and deadline; spends nothing and
        reads no secret. `dry_run`: with no credentials, plan from the bundled catalog."""
        from gpucloud.jobs import ops

        return cast("Plan", self._run(ops.plan(self._ctx, spec, provider, region, dry_run,
                                               project)))

    def submit(self, spec: JobSpecLike, provider: str | None = None, region: str | None = None,
               plan: Plan | None = None,
               project: str | None = None) -> Job:
        """Plan (cheapest offer, estimate, max_cost, max_runtime as the deadline) and
        launch the job; its secrets are read now and sent to the provider only."""
        from gpucloud.jobs import ops

        return cast("Job", self._run(ops.submit(self._ctx, spec, provider, region, plan,
                                                project)))

    def jobs(self, provider: str | None = None) -> builtins.list[Job]:
        """Jobs on every provider in scope, newest first (a failure is a warning)."""
        from gpucloud.jobs import ops

        return cast("builtins.list[Job]", self._run(ops.jobs(self._ctx, provider)))

    def job(self, ref: JobRef) -> Job:
        from gpucloud.jobs import ops

        return cast("Job", self._run(ops.job(self._ctx, ref)))

    def cancel(self, ref: JobRef) -> Job:
        """Stop the job and end its machine; the job as it is afterwards."""
        from gpucloud.jobs import ops

        return cast("Job", self._run(ops.cancel(self._ctx, ref)))

    @overload
    def logs(self, ref: JobRef, follow: Literal[False] = False,
             tail: int | None = None) -> str: ...

    @overload
    def logs(self, ref: JobRef, follow: Literal[True], tail: int | None = None
             ) -> Iterator[str]: ...

    def logs(self, ref: JobRef, follow: bool = False,
             tail: int | None = None) -> str | Iterator[str]:
        """The job's output (where the provider offers it); ``follow=True``: an
        iterator of its lines as they come, until the job ends (follow_logs)."""
        if follow:
            return self.follow_logs(ref, tail)
        from gpucloud.jobs import ops

        _, text = self._run(ops.logs(self._ctx, ref, tail))
        return str(text)

    def follow_logs(self, ref: JobRef, tail: int | None = None) -> Iterator[str]:
        """The job's lines as they come, until the job ends (the last `tail`
        lines of what is there already, then every new one)."""
        from gpucloud.jobs import ops

        seen, first = 0, True
        while True:
            # The whole output each time (a tail's window would hide what is new).
            job, text = self._run(ops.logs(self._ctx, ref))
            ref = job  # found once: no second lookup by name
            seen, fresh = ops.new_lines(seen, text)
            yield from (fresh[-tail:] if first and tail else fresh)
            first = False
            if job.status in ops.ENDED:
                return
            self._sleep(ops.FOLLOW_INTERVAL)

    # -- sessions -------------------------------------------------------------

    def close(self) -> None:
        self._runner.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Client"]
