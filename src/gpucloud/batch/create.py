"""Creating many machines at once: ``Client.create_many``.

* Every distinct request is planned once, and the estimate of the whole batch
  (each plan times its copies) is checked against ``max_cost`` before anything
  is sent.
* Launches run concurrently (``Concurrent``): at most ``concurrency`` in
  flight when given, else as many as the providers' rates and observed
  latencies call for (core/concurrency.py, Little's law); each goes through
  core/launch.py with its own attempts: failover on definite refusals, lookup
  by launch id after an ambiguous failure, never a blind re-send. The
  provider's rate limit paces them (transport/http.py). The machines of 8 or
  more launches on a provider are confirmed by listing it, a pass per many
  machines, not read back one by one (batch/confirm.py).
* Every intent is journaled with the batch key and its slot (0..N-1). A
  batch run again with the same key first settles what an earlier run made:
  one listing per provider (looked at again after launcher.RECONCILE_DELAYS
  while a launch of it is still unaccounted for) adopts the machines carrying
  its launch ids; a launch absent from every look is journaled failed; then
  only the slots without a machine are launched.
* ``all_or_nothing``: at the first failure no further launch starts; those in
  flight settle; every machine the batch made is terminated, its deletion
  checked, and BatchIncompleteError carries the result.
"""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpucloud.safety import ledger_events
from gpucloud.catalog import pricing
from gpucloud.providers.base import Sleep
from gpucloud.batch.models import BatchIncompleteError, BatchItem, BatchResult, CreateRequest
from gpucloud.safety.deadlines import ENDED
from gpucloud.errors import (
    BudgetExceededError,
    GpuCloudError,
    NotFoundError,
    SpecError,
    exit_code_for,
    option,
)
from gpucloud.batch import confirm
from gpucloud.batch.confirm import Confirmations
from gpucloud.core.launch import RECONCILE_DELAYS, Answered, launch
from gpucloud.models import Attempt, Instance, Plan, VolumeMount
from gpucloud.core.concurrency import launch_limit
from gpucloud.core.create import for_project
from gpucloud.core.instructions import Call, Concurrent, Gather, Op
from gpucloud.core.plan import plan as make_plan
from gpucloud.safety.journal import UNRESOLVED

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.types import Deadline, Duration, Money

Progress = Callable[[BatchItem], None]


def requests_of(requests: Any) -> list[CreateRequest]:
    out = [r if isinstance(r, CreateRequest) else _request(r) for r in requests]
    if not out:
        raise SpecError("a batch needs at least one request")
    return out


def _request(value: Any) -> CreateRequest:
    from pydantic import ValidationError

    if not isinstance(value, Mapping):
        raise SpecError(f"a batch request is a CreateRequest or a dict, got {value!r}")
    try:
        return CreateRequest(**value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SpecError(f"invalid batch request {value!r}: {where}: {first['msg']}") from None


def copies(request: CreateRequest, n: int) -> list[CreateRequest]:
    """n machines alike; a name becomes name-1 .. name-n."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpecError(f"number of machines must be at least 1, got {n!r}",
                        hint=f"{option('n', '--instances')} is the number of machines; "
                             f"{option('count', '--count')} the GPUs on each")
    if request.name is None or n == 1:
        return [request] * n
    return [request.model_copy(update={"name": f"{request.name}-{i + 1}"}) for i in range(n)]


def create_many(ctx: ClientContext, gpu: str, count: int, n: int, provider: str | None,
                region: str | None, name: str | None, image: str | None,
                ssh_key: str | None, disk_gb: int | None, auto_shutdown: Duration | None,
                max_cost: Money | None, spot: bool, plan: Plan | None,
                until: Deadline | None,
                requests: Sequence[CreateRequest | Mapping[str, object]] | None,
                concurrency: int | None, all_or_nothing: bool, batch: str | None,
                on_item: Progress | None, project: str | None = None) -> Op:
    """`n` machines alike, or one per request; a BatchResult with one item each
    (Client.create_many says the rest), all for `project` (else the plan's)."""
    if requests is None:
        one = CreateRequest(gpu=gpu, count=count, provider=provider, region=region,
                            name=name, image=image, ssh_key=ssh_key, disk_gb=disk_gb,
                            auto_shutdown=auto_shutdown, until=until, spot=spot)
        wanted = copies(one, n)
    else:
        given = [k for k, v in dict(provider=provider, region=region, name=name,
                                    image=image, ssh_key=ssh_key, disk_gb=disk_gb,
                                    auto_shutdown=auto_shutdown, until=until,
                                    plan=plan, spot=spot or None).items()
                 if v is not None]
        if given:
            raise SpecError(f"with requests=, give {', '.join(given)} in each request",
                            hint="each CreateRequest (or dict) carries create's arguments")
        wanted = requests_of(requests)
    run = _planned(ctx, wanted, max_cost=max_cost, plan=plan, concurrency=concurrency,
                   all_or_nothing=all_or_nothing, batch=batch, progress=on_item,
                   project=project)
    if not batch:  # a fresh random key: nothing to share
        return (yield from run)
    from gpucloud.batch.lock import held

    # Held from before planning until the run (roll-back included) is over: a
    # second run of the key fails here instead of launching the same slots.
    with held(ctx.journal, batch):
        return (yield from run)


def _planned(ctx: ClientContext, requests: list[CreateRequest], *, max_cost: Money | None,
             plan: Plan | None, concurrency: int | None, all_or_nothing: bool, batch: str | None,
             progress: Progress | None, project: str | None = None) -> Op:
    """Plan every distinct request (or take the plan made already: copies of one
    request, as the CLI shows it first), check the total, launch concurrently."""
    if plan is not None:
        if plan.instances != len(requests) or len({r.plan_key() for r in requests}) != 1:
            raise SpecError(f"the plan is for {plan.instances} machine(s), not "
                            f"{len(requests)} alike",
                            hint=f"make the plan with the same {option('n', '--instances')}")
        plans = [for_project(plan, project)] * len(requests)
    else:
        plans, _ = yield from plans_for(ctx, requests, max_cost, project)
    return (yield from launch_batch(ctx, requests, plans, concurrency=concurrency,
                                    all_or_nothing=all_or_nothing, batch=batch,
                                    progress=progress))


def plans_for(ctx: ClientContext, requests: list[CreateRequest], max_cost: Money | None,
              project: str | None = None) -> Op:
    """One plan per distinct request (for all its copies), then ``max_cost`` over
    the whole batch. Nothing is sent to a provider but offer reads."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, request in enumerate(requests):
        groups.setdefault(request.plan_key(), []).append(index)
    cap = pricing.to_decimal(max_cost, "max cost") if max_cost is not None else None
    # A single kind of machine keeps today's meaning of max_cost (the planner
    # splits it into each machine's deadline); several kinds are each planned
    # on their own terms, then their totals must fit the cap together.
    shared_cap = cap if len(groups) == 1 else None
    by_index: dict[int, Plan] = {}
    plans: list[Plan] = []
    for indexes in groups.values():
        r = requests[indexes[0]]
        p = yield from make_plan(ctx, r.gpu, r.count, r.provider, r.region, r.disk_gb,
                                 r.auto_shutdown, r.max_cost if r.max_cost is not None
                                 else shared_cap, r.spot, len(indexes), r.until,
                                 project=project)
        plans.append(p)
        by_index.update((i, p) for i in indexes)
    if cap is not None and shared_cap is None:
        check_total(plans, cap)
    return [by_index[i] for i in range(len(requests))], plans


def check_total(plans: list[Plan], cap: Decimal) -> None:
    if cap <= 0:
        raise SpecError(f"max cost must be positive, got {cap}")
    open_ended = [p for p in plans if p.total is None]
    if open_ended:
        p = open_ended[0]
        raise BudgetExceededError(
            f"cannot keep --max-cost ${cap} over the batch: {p.instances}x "
            f"{p.offer.instance_type} ha{'ve' if p.instances > 1 else 's'} no deadline or an "
            "unknown price, so its cost has no bound",
            hint="give every request an auto_shutdown (or until), or its own max_cost")
    total = sum((p.total for p in plans if p.total is not None), Decimal(0))
    if total > cap:
        raise BudgetExceededError(
            f"estimate ${pricing.money(total)} for the batch exceeds --max-cost ${cap}",
            hint="fewer machines, shorter deadlines, or a higher max_cost")


class _Run:
    """What the slots of one batch share: the stop flag and the progress hook."""

    def __init__(self, ctx: ClientContext, key: str, all_or_nothing: bool,
                 progress: Progress | None, *, keyed: bool = False,
                 job_nodes: bool = False, volumes: tuple[VolumeMount, ...] = ()) -> None:
        self.ctx, self.key = ctx, key
        self.job_nodes = job_nodes  # the machines of a multi-node job (gj- launch ids)
        self.volumes = volumes  # that job's, attached to each node at launch
        # Each failed slot's own error: an all-or-nothing batch's error is raised
        # from the first one, so a caller can answer with its class (exit code).
        self.errors: dict[int, GpuCloudError] = {}
        self.keyed = keyed  # the caller's key (resumable, locked), not a random one
        self.all_or_nothing = all_or_nothing
        self.progress = progress
        self.stopped = False
        self.confirmations = Confirmations()
        self.unsent = 0  # launches whose create is not sent yet (see confirm.listing)
        self.running = 0  # launches not ended yet (answered, failed or never started)
        self._lock = threading.Lock()

    def sent(self) -> None:
        with self._lock:
            self.unsent -= 1

    def ended(self) -> None:
        with self._lock:
            self.running -= 1

    def settled(self, item: BatchItem) -> BatchItem:
        if not item.ok and item.status != "not_launched" and self.all_or_nothing:
            self.stopped = True
        if item.instance is not None and item.ok:
            with self._lock:
                self.ctx.created.append(item.instance)
        if self.progress is not None:
            self.progress(item)
        return item


def launch_batch(ctx: ClientContext, requests: list[CreateRequest], plans: list[Plan], *,
                 concurrency: int | None, all_or_nothing: bool, batch: str | None,
                 progress: Progress | None, job_nodes: bool = False,
                 volumes: tuple[VolumeMount, ...] = ()) -> Op:
    """``job_nodes``: the machines are the nodes of one multi-node job
    (jobs/multinode_batch.py): job launch ids, never resumed from an earlier
    run; ``volumes``: that job's, attached to every node at launch."""
    if concurrency is not None and (isinstance(concurrency, bool)
                                    or not isinstance(concurrency, int) or concurrency < 1):
        raise SpecError(f"concurrency must be a positive number of launches, got "
                        f"{concurrency!r}",
                        hint="or leave it out: the provider's rate and the latency observed "
                             "set it")
    from gpucloud.core.context import InFlight

    ctx.created, ctx.in_flight, ctx.last_attempts = [], InFlight(), []
    ctx.key_memo = {}  # every launch of the batch resolves its key once
    ctx.identity_memo = ctx.who()  # and is journaled as launched by the same user
    try:
        return (yield from _launch_all(ctx, requests, plans, concurrency=concurrency,
                                       all_or_nothing=all_or_nothing, batch=batch,
                                       progress=progress, job_nodes=job_nodes,
                                       volumes=volumes))
    finally:
        ctx.key_memo, ctx.identity_memo = None, None


def _launch_all(ctx: ClientContext, requests: list[CreateRequest], plans: list[Plan], *,
                concurrency: int | None, all_or_nothing: bool, batch: str | None,
                progress: Progress | None, job_nodes: bool = False,
                volumes: tuple[VolumeMount, ...] = ()) -> Op:
    run = _Run(ctx, batch or "b-" + secrets.token_hex(5), all_or_nothing, progress,
               keyed=batch is not None and not job_nodes, job_nodes=job_nodes,
               volumes=volumes)
    earlier: dict[int, BatchItem] = {}
    if run.keyed:
        earlier = yield from _resume(run, len(requests))
        for item in earlier.values():
            run.settled(item)
    todo = [i for i in range(len(requests)) if i not in earlier]
    # Not given: as many in flight as the providers' rates and latencies call for.
    limit = concurrency if concurrency is not None else launch_limit(
        ctx, (plans[i].offer.provider for i in todo))
    # Many launches on a provider are confirmed by listing it (batch/confirm.py).
    per_provider = Counter(plans[i].offer.provider for i in todo)
    listed = {p for p, n in per_provider.items() if n >= confirm.FEWEST}

    def finish(index: int, answered: Answered, made: Any) -> BatchItem:
        return _item(run, index, requests[index].name, made, answered.attempts)

    ops: list[Op] = []
    if listed:  # the pages read as they fill, and the last pass's listing: from the start
        ops.append(confirm.following(ctx, sorted(listed), lambda: run.unsent,
                                     run.confirmations))
        ops.append(confirm.listing(ctx, sorted(listed), lambda: run.unsent,
                                   run.confirmations, lambda: run.running))
    beside = len(ops)  # ops that run beside the launches, never in the place of one
    slot_of: dict[int, int] = {}  # op position -> the slot it launches
    for position, i in enumerate(todo):
        if confirm.pass_at(position):
            ops.append(confirm.confirm_pass(ctx, run.confirmations, finish, limit))
        slot_of[len(ops)] = i
        ops.append(_slot(run, i, requests[i], plans[i],
                         plans[i].offer.provider in listed))
    if listed:  # the last pass's machines found already, confirmed meanwhile
        ops.append(confirm.listed_early(ctx, run.confirmations, finish, limit,
                                        lambda: run.unsent))
    run.unsent = run.running = len(todo)
    bound = limit + beside if isinstance(limit, int) else lambda: limit() + beside
    try:
        results = yield Concurrent(ops, limit=bound, beside=beside)
    except BaseException:
        run.confirmations.abandoned = True  # an interrupt: the listings beside stop
        raise
    for result in results[:beside]:
        if isinstance(result, BaseException):
            raise result  # a bug: they hand a provider's failure back as a value
    prefetched = results[1] if listed else None
    last = yield from confirm.confirm_pass(ctx, run.confirmations, finish, limit,
                                           prefetched=prefetched)
    items = dict(earlier)
    for position, result in enumerate([*results, last]):
        if position < beside:
            continue  # the listings: the last pass's
        if isinstance(result, BaseException) and not isinstance(result, GpuCloudError):
            raise result  # a bug: never turned into a "failed machine"
        index = slot_of.get(position)
        if index is None:  # a pass: the launches it confirmed
            items.update(result)
        elif isinstance(result, BatchItem):
            items[index] = result
        elif isinstance(result, GpuCloudError):
            run.errors.setdefault(index, result)
            items[index] = _failed(index, requests[index].name, result, [])
        # else None, answered: its item came from a pass
    distinct = list({id(p): p for p in plans}.values())
    result_ = BatchResult(batch=run.key, items=tuple(items[i] for i in range(len(requests))),
                          plans=tuple(distinct))
    if all_or_nothing and not result_.ok:
        result_ = yield from _roll_back(run, result_)
    return result_


def _slot(run: _Run, index: int, request: CreateRequest, plan: Plan, listed: bool) -> Op:
    from gpucloud.batch.lock import pinned

    # A launch keeps its batch key held past an interrupted run (whose worker
    # threads go on): until it ends, a rerun would launch its slot again.
    sent = [False]

    def once() -> None:  # this slot's create is sent, or will never be
        if not sent[0]:
            sent[0] = True
            run.sent()

    try:
        with pinned(run.ctx.journal, run.key) as kept:
            if run.keyed and not kept:  # the run was interrupted before this slot began
                return run.settled(BatchItem(index=index, name=request.name,
                                             status="not_launched"))
            def sending(provider: str, launch_id: str) -> None:
                run.confirmations.sending(provider, launch_id)
                once()

            return (yield from _launch_slot(run, index, request, plan, listed, sending))
    finally:
        once()
        run.ended()


def _launch_slot(run: _Run, index: int, request: CreateRequest, plan: Plan,
                 listed: bool, on_send: Callable[[str, str], None]) -> Op:
    """The slot's item; or, ``listed``, None: its launch ``Answered``, waiting
    for a pass to confirm it (batch/confirm.py), which makes the item. Not
    returned: the batch's results would keep every launch's reply and
    attempts alive to its end, for the interpreter's collector to walk each
    time it looks at everything (thousands of objects a second at 500/s)."""
    if run.stopped:  # an all-or-nothing batch has already failed
        return run.settled(BatchItem(index=index, name=request.name, status="not_launched"))
    attempts: list[Attempt] = []
    try:
        made = yield from launch(run.ctx, plan, name=request.name, image=request.image,
                                 ssh_key=request.ssh_key, disk_gb=request.disk_gb,
                                 attempts=attempts, slot=(run.key, index),
                                 confirm_later=listed, on_send=on_send,
                                 job_node=run.job_nodes, volumes=run.volumes)
    except GpuCloudError as exc:
        made = exc
    if isinstance(made, Answered):
        run.confirmations.add(index, made)
        return None
    return _item(run, index, request.name, made, attempts)


def _item(run: _Run, index: int, name: str | None, made: Instance | GpuCloudError,
          attempts: list[Attempt]) -> BatchItem:
    """A concluded launch as its slot's item, recorded and reported."""
    run.ctx.last_attempts.extend(attempts)
    if isinstance(made, GpuCloudError):
        run.errors.setdefault(index, made)
        return run.settled(_failed(index, name, made, attempts))
    return run.settled(BatchItem(index=index, name=made.name, launch_id=made.launch_id,
                                 status="created", instance=made, attempts=tuple(attempts)))


def _failed(index: int, name: str | None, exc: GpuCloudError,
            attempts: list[Attempt]) -> BatchItem:
    return BatchItem(index=index, name=name, launch_id=exc.launch_id, status="failed",
                     error_code=exc.code, error=exc.message, hint=exc.hint,
                     exit_code=exit_code_for(exc), attempts=tuple(attempts or exc.attempts))


def _resume(run: _Run, size: int) -> Op:
    """The slots an earlier run of this batch key filled, as items; launches it
    left unresolved are settled here by listing (never re-sent)."""
    ctx = run.ctx
    records = ctx.journal.batch(run.key)  # no tolerance: resuming blind could double-create
    if not records:
        return {}
    beyond = sorted({r.slot for r in records if r.slot is None or r.slot >= size},
                    key=lambda s: -1 if s is None else s)
    if beyond:
        raise SpecError(f"batch {run.key!r} was started with more machines than the "
                        f"{size} asked now", hint="run it with the same requests (or n=) as "
                                                  "before, or use a new batch key")
    wanted = [r for r in records if r.status in (*UNRESOLVED, "delivered")]
    providers = list(dict.fromkeys(r.provider for r in wanted))
    found: dict[str, Instance] = {}
    open_ = {r.launch_id for r in records if r.status in UNRESOLVED}
    for look, delay in enumerate(RECONCILE_DELAYS):
        if look and not open_ - set(found):
            break
        if delay:
            yield Sleep(delay)
        names = providers if not look else list(dict.fromkeys(
            r.provider for r in wanted if r.launch_id in open_ - set(found)))
        listed = yield Gather([Call(n, ctx.adapter(n).list_instances()) for n in names])
        for name, result in zip(names, listed):
            if isinstance(result, GpuCloudError):
                raise result.with_details(hint=(
                    f"nothing was launched: batch {run.key!r} is resumed only once "
                    f"{name} can be listed (its machines must not be made twice)")) from result
            if isinstance(result, BaseException):
                raise result
            for machine in result:
                if machine.launch_id is not None and machine.status not in ENDED:
                    found.setdefault(machine.launch_id, machine)
    items: dict[int, BatchItem] = {}
    for record in records:
        assert record.slot is not None
        machine = found.get(record.launch_id)
        if record.status in UNRESOLVED:
            if machine is None:
                ctx.journal.mark(record.launch_id, "failed",
                                 error="resume: absent from the listing")
                continue
            ctx.journal.mark(record.launch_id, "delivered", instance_id=machine.id)
        elif record.status == "delivered" and machine is None:
            items.setdefault(record.slot, BatchItem(
                index=record.slot, name=record.name, launch_id=record.launch_id,
                status="failed", error_code="ended",
                error=f"{record.provider}/{record.instance_id} was made by an earlier run of "
                      f"batch {run.key!r} and has ended since; it is not made again",
                hint="use a new batch key for new machines"))
            continue
        elif record.status != "delivered":  # failed, deleted: nothing of it runs
            if record.status == "deleted":
                items.setdefault(record.slot, BatchItem(
                    index=record.slot, name=record.name, launch_id=record.launch_id,
                    status="failed", error_code="ended",
                    error=f"{record.provider}/{record.instance_id} of batch {run.key!r} was "
                          "deleted; it is not made again",
                    hint="use a new batch key for new machines"))
            continue
        assert machine is not None
        if machine.shutdown_at is None and record.shutdown_at is not None:
            machine = machine.model_copy(update={"shutdown_at": record.shutdown_at})
        prior = items.get(record.slot)
        if prior is None or not prior.ok:
            items[record.slot] = BatchItem(index=record.slot, name=machine.name,
                                           launch_id=record.launch_id, status="adopted",
                                           instance=machine)
    return items


def end_machines(ctx: ClientContext, machines: list[Instance], source: str) -> Op:
    """Delete every machine at once (one may already be gone); each one deleted
    or not found is recorded in the journal and the cost ledger as ended by
    `source`; one that could not be deleted is left to the caller's look."""
    deleted = yield Gather([Call(m.provider, ctx.adapter(m.provider).delete(m.id))
                            for m in machines])
    for machine, outcome in zip(machines, deleted):
        if not isinstance(outcome, BaseException) or isinstance(outcome, NotFoundError):
            ctx.tolerant(f"{machine.ref} was deleted but the journal could not record it",
                         ctx.journal.mark_deleted, machine.provider, machine.id)
            ctx.tolerant(f"{machine.ref}: its end is not in the cost ledger",
                         ledger_events.ended, ctx, machine.provider, machine.id, source)


def _roll_back(run: _Run, result: BatchResult) -> Op:
    """Terminate every machine of a batch that cannot complete, then look again:
    each must be gone or ending; any still running is named in the error."""
    ctx = run.ctx
    made = [item for item in result.items if item.ok and item.instance is not None]
    machines = [item.instance for item in made if item.instance is not None]
    yield from end_machines(ctx, machines, "batch")
    checked = yield Gather([Call(m.provider, ctx.adapter(m.provider).get(m.id))
                            for m in machines])
    alive: list[Instance] = []
    gone: set[str] = set()
    for machine, outcome in zip(machines, checked):
        if isinstance(outcome, NotFoundError) or (
                isinstance(outcome, Instance) and outcome.status in ENDED):
            gone.add(machine.ref)
        else:
            alive.append(machine)
    ctx.created = [m for m in ctx.created if m.ref not in gone]
    items = tuple(item.model_copy(update={"status": "terminated"})
                  if item.instance is not None and item.instance.ref in gone else item
                  for item in result.items)
    final = result.model_copy(update={"items": items})
    first = next(i for i in result.items if i.status == "failed")
    refs = " ".join(m.ref for m in alive)
    hint = (f"{len(alive)} machine(s) could not be confirmed terminated and may still bill: "
            f"`gpucloud delete {refs}`" if alive else
            f"all {len(gone)} machine(s) it made were terminated" if gone else None)
    failed = sum(1 for i in result.items if i.status == "failed")
    raise BatchIncompleteError(
        f"batch {run.key} could not complete ({failed} of {len(items)} failed; first: "
        f"machine {first.index + 1}: {first.error})",
        result=final, code=first.error_code, exit_code=first.exit_code or 1,
        hint=hint) from run.errors.get(first.index)
