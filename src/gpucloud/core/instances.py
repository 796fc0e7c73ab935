"""Operations on machines that exist: list, get, delete, stop and start, wait.

A machine is named by an ``Instance``, its ``provider/id``, its name or a
unique prefix of its id (refs.py resolves the last two against a listing).
A deadline the provider does not keep (no native timer) is filled in from
the local journal, so every machine read here shows the one the reaper uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpucloud.core.flow import Sleep
from gpucloud.core.instructions import Call, Emit, Gather, Op, collect
from gpucloud.errors import (
    GpuCloudError, InstanceFailedError, NotFoundError, SpecError, WaitTimeoutError,
)
from gpucloud.types import needs_lookup, split_ref

if TYPE_CHECKING:  # pydantic: a catalog-only `gpucloud offers` never needs it
    from datetime import datetime

    from gpucloud.core.context import ClientContext
    from gpucloud.models import Instance
    from gpucloud.safety.ledger_events import ListingRecord
    from gpucloud.types import Ref

# The ledger and the journal checks are imported by the operations that use
# them: a catalog-only `gpucloud offers` imports this module and must not pay.


def list_instances(ctx: ClientContext, provider: str | None = None) -> Op:
    """Every machine on the providers in scope (one provider's failure is a
    warning, unless it was the one asked for or every one failed)."""
    return (yield from collect(list_pages(ctx, provider)))


# What each page of a listing becomes before it is handed on (housekeeping:
# the ends the ledger knows, the filters); given the listing's ledger record.
Shape = Callable[["list[Instance]", "ListingRecord | None"], "list[Instance]"]


def list_pages(ctx: ClientContext, provider: str | None = None,
               shape: Shape | None = None) -> Op:
    """list_instances as it comes: each page is handed on (``Emit``) once the
    journal's deadlines are filled in and the ledger has compared it with what
    it knows, so a listing of thousands never holds them all.

    The first page of every provider is asked at once and before anything is
    handed on: a failure then is what it always was (a warning, or raised when
    it was the provider asked or every one failed). A provider that fails on a
    later page is dropped from the ledger's record (nothing of it is written,
    none of its machines taken as ended) and is a warning, or raised on the
    same terms, after the machines already handed on."""
    from gpucloud.safety.unresolved import warn_unresolved

    names = [n for n in ctx.scope(provider, listing=True) if ctx.can_call(n)]
    if provider is not None and not names:
        raise ctx.missing_credentials([provider])
    firsts = yield Gather([Call(n, ctx.adapter(n).list_page()) for n in names])
    ctx.warnings.clear()
    warn_unresolved(ctx)
    if not names:
        return  # nothing listed: nothing for the ledger to record, nor a ledger to load
    from gpucloud.safety import ledger_events

    failures = [r for r in firsts if isinstance(r, BaseException)]
    if failures and (provider is not None or len(failures) == len(names)):
        raise failures[0]  # "no machines" must never mean "could not look"
    record = ledger_events.ListingRecord(ctx)
    whole: list[str] = []
    firsts = list(firsts)
    for index, name in enumerate(names):
        # Taken out of `firsts`: a provider's first page is let go with the
        # page, not held until its listing (or every provider's) is done.
        first, firsts[index] = firsts[index], None
        if isinstance(first, BaseException):
            if not isinstance(first, GpuCloudError):
                raise first
            ctx.warnings.append(f"{name}: could not list instances ({first})")
            continue
        page, cursor = first
        del first
        while True:
            page = known_deadlines(ctx, name, page)
            record.page(page)
            shown = shape(page, record) if shape is not None else page
            del page  # the reader may hold what it was handed; this op holds nothing
            if shown:
                yield Emit(shown)
            del shown
            if cursor is None:
                whole.append(name)
                break
            try:
                page, cursor = yield Call(name, ctx.adapter(name).list_page(cursor))
            except GpuCloudError as exc:
                record.drop(name)
                failures.append(exc)
                if provider is not None or len(failures) == len(names):
                    raise
                ctx.warnings.append(f"{name}: could not list instances part way ({exc}); "
                                    "the machines shown may not be all")
                break
    record.finish(whole)


def _with_deadline(instance: Instance, shutdown_at: datetime | None) -> Instance:
    if instance.shutdown_at is None and shutdown_at is not None:
        return instance.model_copy(update={"shutdown_at": shutdown_at})
    return instance


def known_deadlines(ctx: ClientContext, provider: str,
                    instances: list[Instance]) -> list[Instance]:
    """known_deadline for a whole listing: one journal query, not one per machine."""
    ids = [i.id for i in instances if i.shutdown_at is None]
    records = ctx.tolerant("deadlines known only to this journal are not shown",
                           ctx.journal.by_instances, provider, ids) if ids else {}
    found = records or {}
    return [_with_deadline(i, found[i.id].shutdown_at if i.id in found else None)
            for i in instances]


def known_deadline(ctx: ClientContext, instance: Instance) -> Instance:
    """The machine with the deadline the journal holds for it, where the
    provider shows none."""
    if instance.shutdown_at is not None:
        return instance
    return _with_deadline(instance, ctx.tolerant(
        "deadlines known only to this journal are not shown", ctx.journal.deadline,
        instance.provider, instance.id))


def lookup(ctx: ClientContext, ref: Ref) -> Op:
    """`ref` itself when it is an Instance or provider/id, else the one machine
    its name or id prefix names in every provider's listing (refs.py)."""
    if not needs_lookup(ref):
        return ref
    from gpucloud.core import refs

    listed = yield from list_instances(ctx)
    searched = [n for n in ctx.scope(None, listing=True) if ctx.can_call(n)]
    return refs.resolve(str(ref), listed, searched)


def get(ctx: ClientContext, ref: Ref) -> Op:
    ref = yield from lookup(ctx, ref)  # a name or an id prefix is looked up
    provider, ident = split_ref(ref)
    ctx.require_callable(provider)
    try:
        instance = yield Call(provider, ctx.adapter(provider).get(ident))
    except NotFoundError as exc:
        from gpucloud.core import refs

        raise exc.with_details(
            hint=exc.hint or refs.not_found_hint(f"{provider}/{ident}")) from exc
    return known_deadline(ctx, instance)


def delete(ctx: ClientContext, ref: Ref) -> Op:
    ref = yield from lookup(ctx, ref)  # as get: a name or a unique id prefix
    provider, ident = split_ref(ref)
    ctx.require_callable(provider)
    yield Call(provider, ctx.adapter(provider).delete(ident))
    from gpucloud.safety import ledger_events

    ledger_events.record_ends(ctx, [(provider, ident)], "delete", "deleted")


def power(ctx: ClientContext, ref: Ref, action: str) -> Op:
    """stop or start a machine, where the provider can."""
    provider, ident = split_ref(ref)
    ctx.require_callable(provider)
    adapter = ctx.adapter(provider)
    if not adapter.capabilities.stop_start:
        raise SpecError(f"{provider} cannot stop and start machines through its API",
                        hint=f"`gpucloud delete {provider}/{ident}` ends it (and its billing)")
    instance = yield Call(provider, getattr(adapter, action)(ident))
    from gpucloud.safety import ledger_events

    ctx.tolerant(f"{provider}/{ident}: the {action} is not in the cost ledger",
                 ledger_events.powered, ctx, instance, action)
    return known_deadline(ctx, instance)


def wait(ctx: ClientContext, ref: Ref, until: str = "running", timeout: float = 600,
         poll: float = 2.0, max_poll: float = 15.0) -> Op:
    """Poll until the machine reaches `until`; WaitError when it fails or times out."""
    from gpucloud.models import InstanceStatus

    target = InstanceStatus(until)
    started, slept, delay = time.monotonic(), 0.0, poll
    while True:
        instance = yield from get(ctx, ref)
        if instance.status == target:
            return instance
        if target != InstanceStatus.TERMINATED and instance.status in (
                InstanceStatus.FAILED, InstanceStatus.TERMINATED, InstanceStatus.TERMINATING):
            raise InstanceFailedError(
                f"{instance.ref} is {instance.status.value} while waiting for {until}",
                hint=f"provider status: {instance.provider_status or 'n/a'}")
        # Sleeps may be skipped (tests); count them so the deadline still holds.
        elapsed = max(time.monotonic() - started, slept)
        refusal = ctx.adapter(instance.provider).wait_refusal(instance, elapsed)
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


__all__ = ["delete", "get", "known_deadline", "known_deadlines", "list_instances", "list_pages",
           "lookup", "power", "wait"]
