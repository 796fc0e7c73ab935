"""``extend``: move a machine's deadline later, everywhere it is kept.

The target is computed once (deadlines.new_deadline) and sent as an absolute
time, so a retry of the same target changes nothing. After the update the
machine is read again: one that is terminating or gone was ended before the
extension took hold (InstanceFailedError, exit 9), never reported as
extended; one whose provider accepted the update but reads back an earlier
deadline is not extended either (the reaper would act on the old one).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from gpucloud.safety import budget
from gpucloud.providers.base import format_utc
from gpucloud.errors import (
    APIResponseValidationError, ConflictError, InstanceFailedError, NotFoundError,
)
from gpucloud.models import Instance, InstanceStatus
from gpucloud.core.instructions import Call, Op
from gpucloud.safety.journal import utcnow

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.providers.base import Provider
    from gpucloud.types import Deadline, Duration, Ref

from gpucloud.safety.deadlines import GONE, extension_arguments, new_deadline

def extend(ctx: ClientContext, ref: Ref, by: Duration | None = None,
           until: Deadline | None = None) -> Op:
    """Move a machine's deadline later, everywhere it is kept."""
    from gpucloud.core.instances import get

    extension_arguments(by, until)  # bad arguments are refused before any request
    instance: Instance = yield from get(ctx, ref)
    adapter = ctx.adapter(instance.provider)
    now = utcnow()
    target = new_deadline(instance, by, until, now, adapter.deadline_precision)
    budget.check_extension(ctx, instance, target, now)
    retry = f"gpucloud extend {instance.ref} --until {format_utc(target)}"
    try:
        yield Call(instance.provider, adapter.set_deadline(instance, target))
    except (NotFoundError, ConflictError):
        # The provider refused to update a machine it no longer has (or that has
        # ended): the read below says which.
        yield from _still_there(instance, adapter, target)
        raise
    ctx.tolerant(f"{instance.ref}: the new deadline is on the provider but not in the "
                 "local journal", ctx.journal.set_deadline, instance.provider,
                 instance.id, target)
    # Read again: a reaper may have ended the machine between our read and the
    # update, and a provider may accept an update it does not keep.
    updated = yield from _still_there(instance, adapter, target)
    if updated.shutdown_at is None or updated.shutdown_at < target:
        # The provider answered but does not show the new deadline: the reaper
        # would act on the old one, so this is not an extension.
        raise APIResponseValidationError(
            f"{instance.ref}: {instance.provider} accepted the update but reads back deadline "
            f"{_utc(updated.shutdown_at)}, not {_utc(target)}",
            provider=instance.provider,
            hint=f"`gpucloud get {instance.ref}` shows the deadline the reaper will use; "
                 f"retry with `{retry}` (the same deadline: a retry never adds more time)")
    return updated


def _still_there(instance: Instance, adapter: Provider, target: datetime) -> Op:
    """The machine read again after an update; InstanceFailedError when it has ended."""
    try:
        fresh: Instance = yield Call(instance.provider, adapter.get(instance.id))
    except NotFoundError:
        fresh = instance.model_copy(update={"status": InstanceStatus.TERMINATED})
    if fresh.status in GONE:
        raise InstanceFailedError(
            f"{instance.ref} is {fresh.status.value}: the reaper ended it before the extension "
            f"to {format_utc(target)} (its deadline {_utc(instance.shutdown_at)} had passed), "
            "or it was deleted",
            hint="its disk and state are gone; `gpucloud create` a new machine with the "
                 "deadline you want")
    return fresh


def _utc(moment: datetime | None) -> str:
    return format_utc(moment) if moment else "none"


__all__ = ["extend"]
