"""Launching a planned machine: failover on definite refusals, reconcile on
ambiguous failures, a journal entry for every attempt.

* The launch intent is journaled before the request, the outcome after; the
  intent only once admitted against the monthly budget (budget.admit).
* No capacity / quota exceeded are definite refusals: nothing was created, so
  the next offer is tried — first the same instance type in another region of
  the same provider, then other providers, cheapest first. A quota refusal
  skips the provider's remaining offers (quota is per account, not per
  region). At most ``MAX_ATTEMPTS`` launches are sent.
* A failure after the request may have reached the provider (read timeout,
  broken connection, 5xx) is ambiguous: the machine may exist. It is never
  re-sent; the provider is listed (a few times, a few seconds apart, since
  new machines can take a moment to appear) and a machine carrying this
  launch id is adopted. Not found: the error is raised with the launch id.
* Anything else (auth, bad request, a connect error that never left) stops.
* A create reply is taken as the machine only when its id has the form the
  provider documents (``Provider.id_format``): a reply like
  ``{"id": "<html>"}`` is as ambiguous as no reply, so
  the machine is looked for by launch id and adopted if found, else the
  APIResponseValidationError is raised with the launch id (reconcile repairs
  the journal later).
* A well-formed id is read back (GET by id; Lambda, Vast and Verda do it
  inside create; a batch confirms many with one listing, batch/confirm.py,
  through ``confirm_later`` and ``conclude``) before the machine counts as
  created: a 404 means the reply
  named a machine that is not there, which is handled like the wrong form
  above, and so is a machine read back that carries another launch id. Until
  the read answers, the journal holds the replied id (status ambiguous) and
  the attempt in flight names it, so an interrupt says the machine may exist
  under that id. A read that fails otherwise (5xx, timeout) does not
  contradict the reply: the reply's machine is kept, with a warning. Only
  then is the launch journaled delivered.
* A job (``job=``, a JobRun) is launched the same way through the adapter's
  ``submit_job``, with a job launch id; its secret values are registered for
  redaction before the request exists. It returns the Job. A job without a
  machine (a Kubernetes Job) goes into the cost ledger as itself
  (jobs/costs.py), so the budget never stops counting it once delivered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucloud.providers.base import Sleep
from gpucloud.safety import budget, group_commit, ledger_events
from gpucloud.jobs import costs as job_costs
from gpucloud.core.instructions import Call, Op
from gpucloud.errors import (
    APIConnectionError, APIError, APIResponseValidationError, GpuCloudError,
    InsufficientCapacityError, InternalServerError, QuotaExceededError, StateError, option,
)
from gpucloud.models import Attempt, Offer, Plan
from gpucloud.safety.launch_deadline import deadline_for
from gpucloud.transport.redaction import register_secrets

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from datetime import datetime
    from decimal import Decimal

    from gpucloud.models import Instance, Job, JobRun, VolumeMount
    from gpucloud.providers.base import Provider

MAX_ATTEMPTS = 3
RECONCILE_DELAYS = (0.0, 2.0, 5.0)  # seconds before each look for an ambiguous launch
# Machines of a batch's pass recorded in one transaction (record_delivered):
# some 20-40 ms of the home's write lock, which the launches going on wait for.
RECORDED_TOGETHER = 256


def machine_cap(plan: Plan) -> Decimal | None:
    """One machine's share of the create's spend cap (--max-cost), the figure
    its deadline is worked out from (launch_deadline.py); None without a cap."""
    return plan.max_cost / plan.instances if plan.max_cost is not None else None


def launch(ctx: ClientContext, plan: Plan, *, name: str | None, image: str | None,
           ssh_key: str | None, disk_gb: int | None, job: JobRun | None = None,
           attempts: list[Attempt] | None = None, slot: tuple[str, int] | None = None,
           confirm_later: bool = False, on_send: Callable[[str, str], None] | None = None,
           job_node: bool = False, volumes: tuple[VolumeMount, ...] = ()) -> Op:
    """One machine. ``attempts``: this launch's own list (a batch runs many at
    once on one context, so it passes one per slot); without it the list is
    also the context's ``last_attempts``. ``slot``: (batch key, slot index),
    journaled with every intent so a restarted batch finds what it made.
    ``confirm_later``: a create answered with a well-formed id returns its
    ``Answered`` unconfirmed, for the caller to ``conclude`` (a batch confirms
    many with one listing); otherwise it is read back here. ``on_send``: called
    with the provider and the launch id just before each create request is
    sent. ``job_node``: a machine of a multi-node job (a job launch id, created
    without the job: jobs/multinode_batch.py), with ``volumes``, the job's,
    attached at launch."""
    if attempts is None:
        attempts = []
        ctx.last_attempts = attempts
    batch_key, index = slot if slot is not None else (None, None)
    queue = [o for o in (plan.offer, *plan.alternatives) if o.source == "live"]
    if not queue:
        raise _unreachable(ctx, plan.offer)
    last: GpuCloudError | None = None
    last_launch: str | None = None
    while queue and len(attempts) < MAX_ATTEMPTS:
        offer = queue.pop(0)
        adapter = ctx.adapter(offer.provider)
        shutdown_at = deadline_for(plan, offer, disk_gb)
        spec = ctx.instance_spec(offer, adapter, name=name, image=image, ssh_key=ssh_key,
                                 disk_gb=disk_gb, shutdown_at=shutdown_at, job=job,
                                 batch=batch_key, max_cost=machine_cap(plan),
                                 job_node=job_node, volumes=volumes)
        if job is not None:
            register_secrets(job.secret_env.values())
        # Admitted against the monthly budget and journaled in one transaction,
        # with what it commits (budget.py); committed before the request is
        # sent, in a group with the other launches' writes of the moment
        # (group_commit.py), so a batch does not pay a commit per launch.
        record = _intent(ctx, spec.launch_id, offer, spec.name, shutdown_at,
                         ctx.ssh_key(ssh_key)[2], batch_key, index, plan.project)
        group_commit.for_journal(ctx.journal).run(
            lambda: budget.admit(ctx, plan, offer, record, disk_gb=disk_gb,
                                 machines=job.nodes if job is not None else 1),
            slack=_slack(adapter, "launch"))
        # In flight until its outcome is known: an interrupt (Ctrl-C) now
        # leaves a machine that may exist, and the caller must be able to say so.
        launching = _attempt(offer, spec.launch_id, "launching", None)
        ctx.in_flight.append(launching)
        ctx.report(launching)
        try:
            submitted = None
            if on_send is not None:
                on_send(offer.provider, spec.launch_id)
            if job is None:
                instance = yield Call(offer.provider, adapter.create(spec))
                if not adapter.create_reads_back:
                    adapter.check_reply_id(instance.id)  # before the journal names it
                    # Next: this slot's next create (a batch confirming later),
                    # else the read back; either waits for its slot of the rate.
                    launching = _answered(ctx, launching, instance.id, _slack(
                        adapter, "launch" if confirm_later else "idempotent"))
            else:
                submitted = yield Call(offer.provider, adapter.submit_job(spec))
                instance = submitted.instance
        except (InsufficientCapacityError, QuotaExceededError) as exc:
            _settle(ctx, launching)
            _failed(ctx, attempts, spec.launch_id, offer, exc)
            queue = _next_candidates(queue, offer, exc)
            last, last_launch = exc, spec.launch_id
            continue
        except (APIConnectionError, InternalServerError, APIResponseValidationError) as exc:
            # An unreadable answer to a launch is as ambiguous as no answer.
            if isinstance(exc, APIConnectionError) and not exc.sent:
                _settle(ctx, launching)
                raise _failed(ctx, attempts, spec.launch_id, offer, exc) from exc
            answered = Answered(offer, spec.launch_id, None, None, launching, attempts,
                                shutdown_at, disk_gb, job is not None)
            return (yield from _ambiguous(ctx, answered, exc))
        except GpuCloudError as exc:
            _settle(ctx, launching)
            raise _failed(ctx, attempts, spec.launch_id, offer, exc) from exc
        answered = Answered(offer, spec.launch_id, instance, submitted, launching, attempts,
                            shutdown_at, disk_gb, job is not None)
        if job is None and not adapter.create_reads_back:
            if confirm_later:
                return answered
            return (yield from conclude(ctx, answered, read_back(ctx, answered)))
        return (yield from conclude(ctx, answered, given(instance)))
    assert last is not None
    hint = last.hint
    if queue:
        hint = (f"gave up after {MAX_ATTEMPTS} attempts; {len(queue)} more offers remain: "
                f"retry, or narrow {option('provider', '--provider')} or "
                f"{option('region', '--region')}")
    raise last.with_details(attempts=attempts, launch_id=last_launch, hint=hint) from last


@dataclass
class Answered:
    """A launch whose request was answered: ``instance`` as the create replied
    (None when the answer was ambiguous), not yet confirmed. A batch holds
    these until one listing confirms many (batch/confirm.py); a single create
    concludes at once."""

    offer: Offer
    launch_id: str
    instance: Instance | None
    submitted: Job | None
    launching: Attempt  # the attempt in flight, naming the replied id once known
    attempts: list[Attempt]
    shutdown_at: datetime | None
    disk_gb: int | None
    job: bool


def read_back(ctx: ClientContext, answered: Answered) -> Op:
    """The confirmation of a create on its own: a GET by the replied id."""
    assert answered.instance is not None
    provider = answered.offer.provider
    return (yield Call(provider, ctx.adapter(provider).read_back(answered.instance)))


def given(outcome: Any) -> Op:
    """A confirmation already known: the machine, or the error that refutes it."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome
    yield  # pragma: no cover - an operation


def conclude(ctx: ClientContext, answered: Answered, confirm: Op, *,
             recorded: bool = False) -> Op:
    """The rest of a launch once its create was answered: ``confirm`` (an
    operation giving the machine as read back) must agree with the reply, else
    the machine is looked for by launch id; then it is recorded as delivered
    (``recorded``: already, by ``record_delivered``)."""
    adapter = ctx.adapter(answered.offer.provider)
    try:
        instance = yield from confirm
        if not answered.job:
            _check_launch_id(adapter, answered.launch_id, instance)
    except (APIConnectionError, InternalServerError, APIResponseValidationError) as exc:
        return (yield from _ambiguous(ctx, answered, exc))
    except GpuCloudError as exc:
        _settle(ctx, answered.launching)
        raise _failed(ctx, answered.attempts, answered.launch_id, answered.offer, exc) from exc
    return _delivered(ctx, answered, instance, answered.submitted, "created", recorded)


def record_delivered(ctx: ClientContext,
                     confirmed: Sequence[tuple[Answered, Instance]]) -> set[int]:
    """Machines confirmed together (a batch's pass) recorded as ``_delivered``
    records one, in transactions of up to ``RECORDED_TOGETHER`` machines of the
    state database rather than two commits each. Not all in one: the launches
    still going wait for the home's write lock meanwhile, to write their
    intents (2,000 machines held it some 0.3 s, the creates of a 500/s batch
    stood still). Returns the ``id()`` of each ``Answered`` recorded; a group
    the database could not take is not recorded at all, and each of its
    launches then records itself (with its own warning)."""
    from gpucloud.safety.ledger import SCHEMA as LEDGER_SCHEMA

    recorded: set[int] = set()
    for start in range(0, len(confirmed), RECORDED_TOGETHER):
        group = confirmed[start:start + RECORDED_TOGETHER]
        try:
            with ctx.journal.exclusive(LEDGER_SCHEMA):
                # The ledger first, as each launch records itself (_delivered).
                ledger_events.launched_all(ctx, [
                    (instance, answered.offer, answered.disk_gb, answered.shutdown_at,
                     answered.launch_id) for answered, instance in group])
                ctx.journal.mark_all_delivered(
                    (answered.launch_id, instance.id) for answered, instance in group)
        except StateError:
            continue
        recorded.update(id(answered) for answered, _ in group)
    return recorded


def _ambiguous(ctx: ClientContext, answered: Answered, exc: GpuCloudError) -> Op:
    """The machine may exist: look for it by launch id; never re-send."""
    launch_id, offer = answered.launch_id, answered.offer
    ctx.tolerant(f"launch {launch_id} is not journaled as ambiguous",
                 ctx.journal.mark, launch_id, "ambiguous", error=exc.code)
    found = yield from _find_launch(ctx, offer.provider, launch_id, answered.job)
    _settle(ctx, answered.launching)
    if found is None:
        answered.attempts.append(_attempt(offer, launch_id, "failed", exc))
        ctx.report(answered.attempts[-1])
        raise exc.with_details(
            attempts=answered.attempts, launch_id=launch_id,
            hint=(f"the machine may still appear: run `gpucloud list --provider "
                  f"{offer.provider}` and look for launch id {launch_id}; "
                  "nothing was retried")) from exc
    if answered.job:
        return _delivered(ctx, answered, found.instance, found, "adopted")
    return _delivered(ctx, answered, found, None, "adopted")


def _delivered(ctx: ClientContext, answered: Answered, instance: Instance | None,
               submitted: Job | None, outcome: str, recorded: bool = False) -> Any:
    """Record a machine (or job) that exists; the Instance, or the Job."""
    offer, launch_id, disk_gb = answered.offer, answered.launch_id, answered.disk_gb
    shutdown_at, attempts = answered.shutdown_at, answered.attempts
    _settle(ctx, answered.launching)
    made = instance if instance is not None else submitted  # a job without a machine
    assert made is not None
    # The machine exists: a journal that fails now must not hide it.
    # The ledger first: the budget counts the launch by its intent until its
    # machine is in the ledger, so in this order it is never counted nowhere.
    # Either failing (a full disk, a database gone read-only) is a warning
    # that names the repair: reconcile finds the machine by its launch id.
    if recorded:
        pass
    elif instance is not None:
        # A multi-node job's every node bills: each machine goes into the ledger.
        nodes = [n for n in (submitted.instances if submitted is not None else ())
                 if n.id != instance.id]
        for machine in (instance, *nodes):
            ctx.tolerant(f"{machine.ref} is not in the cost ledger: once the state database "
                         "is usable, run `gpucloud reconcile`, then `gpucloud list` (the "
                         "listing records it for `gpucloud costs` and the monthly budget)",
                         ledger_events.launched, ctx, machine, offer, disk_gb, shutdown_at,
                         launch_id)
    else:  # a job without a machine (a Kubernetes Job): counted as itself
        ctx.tolerant(f"{made.ref} is not in the cost ledger: `gpucloud costs` and the "
                     "monthly budget do not count it", job_costs.launched, ctx, submitted,
                     offer, disk_gb, shutdown_at, launch_id)
    if not recorded:
        ctx.tolerant(f"{made.ref} (launch id {launch_id}) was created but is not "
                     "journaled as delivered: once the state database is usable, run "
                     "`gpucloud reconcile` to record it", ctx.journal.mark, launch_id,
                     "delivered", instance_id=made.id)
    attempts.append(_attempt(offer, launch_id, outcome, None))
    ctx.report(attempts[-1])
    if instance is not None and instance.shutdown_at is None and shutdown_at is not None:
        instance = instance.model_copy(update={"shutdown_at": shutdown_at})
    if not answered.job:
        return instance
    assert submitted is not None
    return submitted.model_copy(update={
        "instance": instance, "shutdown_at": submitted.shutdown_at or shutdown_at})


def _intent(ctx: ClientContext, launch_id: str, offer: Offer, name: str | None,
            shutdown_at: datetime | None, ssh_key_path: str | None, batch_key: str | None,
            slot: int | None, project: str | None) -> Callable[[Decimal | None], None]:
    """The journal write of a launch's intent, given what it commits (budget.admit);
    who launches it is this process's user and host (config/identity.py)."""
    def record(committed: Decimal | None) -> None:
        ctx.journal.record_intent(
            launch_id=launch_id, provider=offer.provider, instance_type=offer.instance_type,
            region=offer.region, name=name, price_per_hour=str(offer.price_per_hour),
            shutdown_at=shutdown_at, ssh_key_path=ssh_key_path, committed=committed,
            batch_key=batch_key, slot=slot, project=project, task_id=ctx.task_id,
            identity=ctx.identity_memo)
    return record


def _slack(adapter: Provider, kind: str) -> float:
    """How long a request of this kind sent now would wait for its slot of the
    provider's rate limit: the time a journal write before it may take to be
    grouped with other launches' (group_commit.py)."""
    from gpucloud.transport.ratelimit import limiter_for

    return limiter_for(adapter).backlog(kind)


def _answered(ctx: ClientContext, launching: Attempt, instance_id: str,
              slack: float = 0.0) -> Attempt:
    """The create was answered with ``instance_id``; until it is read back the
    machine may exist under it: the journal and the attempt in flight say so
    (committed in a group with the other launches' writes, as the intent is)."""
    launch_id = launching.launch_id
    assert launch_id is not None  # every launch's attempt carries its launch id
    ctx.tolerant(f"launch {launching.launch_id} (machine {instance_id}) is not journaled",
                 group_commit.for_journal(ctx.journal).run,
                 lambda: ctx.journal.mark(launch_id, "ambiguous", instance_id=instance_id),
                 slack=slack)
    answered = launching.model_copy(update={"instance_id": instance_id})
    # Each list operation is atomic (a batch launches from several threads):
    # added before the old one goes, so an interrupt never finds neither.
    ctx.in_flight.append(answered)
    _settle(ctx, launching)
    return answered


def _check_launch_id(adapter: Provider, launch_id: str, instance: Instance) -> None:
    """A machine read back under the replied id that carries another launch id
    is someone else's machine, never this launch's."""
    if instance.launch_id is not None and instance.launch_id != launch_id:
        raise adapter.not_created(instance.id, "carries another launch id")


def _settle(ctx: ClientContext, launching: Attempt) -> None:
    """This attempt is no longer in flight: this very object, not one equal to
    it (another launch's attempt may compare equal field by field)."""
    ctx.in_flight.discard(launching)


def _unreachable(ctx: ClientContext, offer: Offer) -> GpuCloudError:
    """A plan made of list prices only: the provider could not be asked, so
    nothing can be launched; say why rather than "no offer"."""
    failure = ctx.failures.get(offer.provider)
    if isinstance(failure, GpuCloudError):
        return failure
    return APIConnectionError(
        f"{offer.provider}: live offers could not be fetched, so nothing can be launched",
        provider=offer.provider,
        hint="the plan shows catalog prices only; check your network and credentials, then retry")


def _failed(ctx: ClientContext, attempts: list[Attempt], launch_id: str, offer: Offer,
            exc: GpuCloudError) -> GpuCloudError:
    """The attempt recorded as failed; the error to raise for it, complete: this
    launch's attempts so far and its launch id."""
    ctx.tolerant(f"launch {launch_id} is not journaled as failed",
                 ctx.journal.mark, launch_id, "failed", error=exc.code)
    attempts.append(_attempt(offer, launch_id, "failed", exc))
    ctx.report(attempts[-1])
    return exc.with_details(attempts=attempts, launch_id=launch_id)


def _next_candidates(queue: list[Offer], failed: Offer, exc: GpuCloudError) -> list[Offer]:
    """Same instance type elsewhere first, then the rest, each cheapest first."""
    if isinstance(exc, QuotaExceededError):
        queue = [o for o in queue if o.provider != failed.provider]
    same = [o for o in queue
            if o.provider == failed.provider and o.instance_type == failed.instance_type]
    return same + [o for o in queue if o not in same]


def _attempt(offer: Offer, launch_id: str, outcome: str, exc: GpuCloudError | None) -> Attempt:
    return Attempt(provider=offer.provider, instance_type=offer.instance_type,
                   region=offer.region, outcome=outcome,  # type: ignore[arg-type]
                   error=str(exc) if exc else None, error_code=exc.code if exc else None,
                   launch_id=launch_id)


def _find_launch(ctx: ClientContext, provider: str, launch_id: str, job: bool = False) -> Op:
    adapter = ctx.adapter(provider)
    for delay in RECONCILE_DELAYS:
        if delay:
            yield Sleep(delay)
        try:
            instances: list[Any] = yield Call(
                provider, adapter.list_jobs() if job else adapter.list_instances())
        except APIError:
            continue
        found = next((i for i in instances if i.launch_id == launch_id), None)
        if found is not None:
            return found
    return None
