"""The costs operation (``Client.costs``, ``gpucloud costs``): list the
providers, so that machines, jobs and volumes ended elsewhere close their
intervals in the cost ledger, then report a month from the ledger alone (costs.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucloud.core.instructions import Op
from gpucloud.errors import GpuCloudError
from gpucloud.safety import costs
from gpucloud.safety.costs import BY_VALUES, compute, month_bounds
from gpucloud.safety.ledger import Ledger

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext


def report(ctx: ClientContext, month: str | None = None, by: str = "instance") -> Op:
    """List the providers first (so machines ended elsewhere close their
    intervals in the ledger; jobs too where a job has no machine,
    jobs/costs.py), then report from the ledger alone."""
    from gpucloud.core.instances import list_instances
    from gpucloud.jobs.ops import jobs

    if by not in BY_VALUES:
        compute((), month, by)  # raises the usage error before anything is listed
    now = costs.utcnow()  # the costs arithmetic's clock, for the bounds and the report
    _, start, end = month_bounds(month, now)
    warnings: list[str] = []
    try:
        yield from list_instances(ctx)
        warnings.extend(ctx.warnings)
    except GpuCloudError as exc:  # the report still stands on the ledger
        warnings.append(f"could not list the providers ({exc}); the ledger may miss "
                        "machines ended since it last saw them")
    # Jobs without a machine (Kubernetes Jobs) are in no machine listing: their
    # providers' jobs are listed too, so those that ended stop counting.
    with_jobs = {p for p, _ in Ledger(ctx.journal).open_jobs(
        ctx.scope(None, listing=True))} if ctx.journal.exists() else set()
    for name in sorted(n for n in with_jobs if ctx.can_call(n)):
        try:
            yield from jobs(ctx, name)
        except GpuCloudError as exc:
            warnings.append(f"could not list the jobs of {name} ({exc}); jobs that ended "
                            "since gpucloud last saw them count to their deadline")
    # Volumes deleted elsewhere end in the ledger when their provider lists them.
    from gpucloud.core.volumes import list_volumes

    try:
        yield from list_volumes(ctx)
        warnings.extend(w for w in ctx.warnings if w not in warnings)
    except GpuCloudError as exc:
        warnings.append(f"could not list the volumes ({exc}); the ledger may miss volumes "
                        "deleted since it last saw them")
    # The month's machines only: those live or with a row since the month began.
    rows = Ledger(ctx.journal).month_rows(start, end)
    from gpucloud.safety.ledger_volumes import VolumeLedger

    volumes = VolumeLedger(ctx.journal).month(start, end)
    return compute(rows, month, by, now=now, budget=ctx.config.budget_monthly,
                   warnings=warnings, volumes=volumes)


__all__ = ["report"]
