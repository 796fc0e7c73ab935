"""A job that has no machine, in the cost ledger (a Kubernetes Job).

On most providers a job runs on a machine of its own, which the ledger
counts like any other. A Kubernetes Job has none: its pods belong to the Job,
and machine listings leave them out (deleting one as a machine would only
make the Job controller start another). Its delivered launch is therefore
one ledger row of its own, keyed by provider and job id (``source = "job"``):

* from its submission, at the price of the offer it was launched on (disk
  included where priced), to its deadline (``max_runtime``: the Job's
  ``activeDeadlineSeconds``, which Kubernetes enforces) or the end of the
  month, as ``gpucloud costs`` and the monthly budget count any machine;
* ended when gpucloud sees it end: ``jobs cancel`` (now), a job read or
  listed finished (at its finish time), or a whole listing of its
  provider's jobs that no longer has it (removed after it finished, or
  deleted elsewhere; now, once it is older than a new launch takes to be
  listed).

Until then it counts to its deadline: a Job that finished unseen is counted
as running, an over-count, never an under-count. Time a Job spent queued for
GPUs counts too: a cluster's price is the user's contract, not a bill.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpucloud.safety.ledger import APPEAR_GRACE, ENDED, JOB, RUNNING, Ledger, Row
from gpucloud.models import Job, JobStatus
from gpucloud.safety.journal import utcnow

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext

FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


def launched(ctx: ClientContext, job: Job, offer: Any, disk_gb: int | None,
             shutdown_at: datetime | None, launch_id: str) -> None:
    """A job delivered or adopted without a machine: counted from now."""
    from gpucloud.catalog import pricing

    Ledger(ctx.journal).append([Row(
        at=utcnow(), provider=job.provider, instance_id=job.id, event="started", source=JOB,
        state=RUNNING, price_per_hour=pricing.estimate(offer, 1, disk_gb=disk_gb).price_per_hour,
        shutdown_at=job.shutdown_at or shutdown_at, name=job.name,
        instance_type=offer.instance_type, region=offer.region,
        launch_id=job.launch_id or launch_id, simulated=job.simulated or offer.simulated,
        task_id=ctx.task_id)])


def seen(ctx: ClientContext, jobs: Iterable[Job], listed: Iterable[str] = ()) -> None:
    """Jobs read or listed: those finished end their rows at their finish time;
    `listed`: providers whose jobs were listed whole (one missing has ended)."""
    jobs = [j for j in jobs if j.instance is None]
    complete = set(listed)
    if not ctx.journal.exists():
        return  # nothing counted yet: a read never creates the state file
    ledger = Ledger(ctx.journal)
    counted = ledger.open_jobs({j.provider for j in jobs} | complete)
    if not counted:
        return
    now = utcnow()
    rows = []
    present = {(j.provider, j.id) for j in jobs}
    for job in jobs:
        last = counted.get((job.provider, job.id))
        if last is not None and job.status in FINISHED:
            rows.append(_end(last, job.finished_at or now, now))
    for key, last in counted.items():
        if key[0] in complete and key not in present and now - last.at > APPEAR_GRACE:
            rows.append(_end(last, now, now))
    ledger.append(rows)


def cancelled(ctx: ClientContext, provider: str, job_id: str) -> None:
    """`jobs cancel` of a job without a machine: counting ends now."""
    if not ctx.journal.exists():
        return
    ledger = Ledger(ctx.journal)
    last = ledger.open_jobs([provider]).get((provider, job_id))
    if last is not None:
        now = utcnow()
        ledger.append([_end(last, now, now, source="delete")])


def _end(last: Row, at: datetime, now: datetime, source: str = JOB) -> Row:
    # Never before the row it closes (clocks differ), never in the future.
    return Row(at=min(max(at, last.at), now), provider=last.provider,
               instance_id=last.instance_id, event="terminated", source=source, state=ENDED)


__all__ = ["cancelled", "launched", "seen"]
