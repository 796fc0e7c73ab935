"""The warning of every command that lists machines: launches sent and never
recorded may have made machines nobody tracks (``gpucloud reconcile`` repairs
the journal; reconcile.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext

SHOWN_IDS = 5  # launch ids named in the warning of list/reap; the rest are counted


def warn_unresolved(ctx: ClientContext) -> None:
    """A warning for commands that list machines: launches sent and never
    recorded may have made machines nobody tracks. A damaged journal is a
    warning too, never a reason not to list."""
    if not ctx.journal.exists():  # listing must not create a journal
        return
    records = ctx.tolerant("launches that may have made a machine could not be checked",
                           ctx.journal.unresolved)
    if not records:
        return
    ids = ", ".join(r.launch_id for r in records[:SHOWN_IDS])
    if len(records) > SHOWN_IDS:
        ids += f" and {len(records) - SHOWN_IDS} more"
    many = len(records) > 1
    ctx.warn(f"{len(records)} launch{'es were' if many else ' was'} sent but never recorded "
             f"(launch id{'s' if many else ''} {ids}): {'machines' if many else 'a machine'} "
             "may exist and bill; run `gpucloud reconcile`")


__all__ = ["SHOWN_IDS", "warn_unresolved"]
