"""A multi-node job seen through its machines (VM clouds, ``multi_node``
"batch"): the machines carrying one job batch key (_batch_mark.job_key) are
one job, in rank order; every other job machine is a job of its own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from gpucloud.errors import NotFoundError
from gpucloud.providers._batch_mark import job_nodes, node_rank

if TYPE_CHECKING:
    from gpucloud.core.flow import Flow
    from gpucloud.models import Instance, Job


class Provider(Protocol):
    """What of a provider (providers/base.py, which imports this module) the
    job reads and cancels use."""

    def get(self, instance_id: str) -> Flow[Instance]: ...
    def list_instances(self) -> Flow[list[Instance]]: ...
    def delete(self, instance_id: str) -> Flow[None]: ...


def job_of(instance: Instance) -> Job:
    """A job seen through the machine that runs it (VM and container clouds)."""
    from gpucloud.models import InstanceStatus, Job, JobStatus

    status = {
        InstanceStatus.PENDING: JobStatus.QUEUED,
        InstanceStatus.RUNNING: JobStatus.RUNNING,
        InstanceStatus.STOPPING: JobStatus.RUNNING,
    }.get(instance.status, JobStatus.UNKNOWN)
    return Job(provider=instance.provider, id=instance.id, name=instance.name, status=status,
               provider_status=instance.provider_status, launch_id=instance.launch_id,
               instance=instance, created_at=instance.created_at,
               shutdown_at=instance.shutdown_at, simulated=instance.simulated)


def read_job(provider: Provider, job_id: str) -> Flow[Job]:
    """The job machine ``job_id`` runs; a multi-node job's node: the whole job."""
    instance = yield from provider.get(job_id)
    if job_nodes(instance.batch) is None:
        return job_of(instance)
    return (yield from _whole(provider, instance))


def _whole(provider: Provider, instance: Instance) -> Flow[Job]:
    listed = yield from provider.list_instances()
    nodes = [m for m in listed if m.batch == instance.batch and m.id != instance.id]
    return nodes_job([instance, *nodes])


def cancel_job(provider: Provider, job_id: str) -> Flow[None]:
    """End the job's machine; a multi-node job's: every node, none left to run
    (and bill) alone."""
    instance = yield from provider.get(job_id)
    if job_nodes(instance.batch) is None:
        yield from provider.delete(job_id)
        return
    job = yield from _whole(provider, instance)
    for node in job.instances:
        try:
            yield from provider.delete(node.id)
        except NotFoundError:
            continue  # already gone


def jobs_of(machines: Sequence[Instance]) -> list[Job]:
    """Jobs seen through their machines: one per machine, except the nodes of
    a multi-node job (one job batch key), which are one job."""
    out: list[Job] = []
    groups: dict[str, list[Instance]] = {}
    for machine in machines:
        if job_nodes(machine.batch) is None:
            out.append(job_of(machine))
        else:
            groups.setdefault(str(machine.batch), []).append(machine)
    out.extend(nodes_job(group) for group in groups.values())
    return out


def nodes_job(machines: Sequence[Instance]) -> Job:
    """A multi-node job seen through the machines of its batch key, in rank
    order (the ``-node<rank>`` their names end with; else by creation). Every
    node present and running: running; a node missing or ended: the job is
    no longer whole, so its status is unknown (the reaper ends the rest)."""
    from gpucloud.models import JobStatus

    ordered = sorted(machines, key=lambda m: (
        node_rank(m.name) is None, node_rank(m.name) or 0, m.created_at is None,
        m.created_at or datetime.min, m.id))
    wanted = job_nodes(ordered[0].batch) or len(ordered)
    each = [job_of(m).status for m in ordered]
    status = JobStatus.UNKNOWN
    if len(ordered) == wanted and JobStatus.UNKNOWN not in each:
        status = JobStatus.QUEUED if JobStatus.QUEUED in each else JobStatus.RUNNING
    first = job_of(ordered[0])
    name = first.name
    rank = node_rank(name)
    if name and rank is not None:
        name = name[: -len(f"-node{rank}")]
    deadlines = [m.shutdown_at for m in ordered if m.shutdown_at is not None]
    return first.model_copy(update={
        "name": name, "status": status, "nodes": wanted, "instances": tuple(ordered),
        "shutdown_at": min(deadlines) if deadlines else None})


__all__ = ["cancel_job", "job_of", "jobs_of", "nodes_job", "read_job"]
