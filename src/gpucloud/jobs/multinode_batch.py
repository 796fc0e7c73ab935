"""A multi-node job on a VM cloud (``Capabilities.multi_node == "batch"``):
gpucloud places the nodes itself.

1. The N machines of the planned offer are launched as ONE all-or-nothing
   batch (batch/create.py: journaled intents with their slots, failover
   none, roll-back on the first failure), in the offer's region, under one
   job batch key (providers/_batch_mark.job_key) and named
   ``<job>-node<rank>``. Any node that cannot be had ends the others and the
   submit fails with that node's error (no capacity: exit 6); no half-made
   cluster is left running.
2. The machines are created WITHOUT the job: its rendezvous needs every
   node's address, known only once they run. gpucloud waits until every
   node runs with an address, then starts the job on each with the runner
   of providers/_jobscript.py (timeouts, exit-status file, checkpoint sync
   and end action as for one node) and the env of jobs/multinode.node_env;
   the nodes' private addresses where the provider gives them, else public.
   The job's volumes (where one volume mounts on many machines,
   ``Capabilities.shared_volumes``) are attached to every node at its launch
   and mounted by its runner, as a one-node job's start-up script does.
   Over ssh where the provider has no way of its own
   (``Provider.start_node_job``); the runner, secrets included, travels on
   ssh's standard input, never on a command line or in a log.
3. Anything failing before every node has its job (a node that fails to
   boot, an ssh start refused) ends every node, so nothing bills idle.

The client must stay up until the job has started on every node: the
machines wait for gpucloud, not the other way round.

The ssh start (``_start_over_ssh``) is a blocking subprocess run inside the
operation, as ``Client.exec`` is: under AsyncClient it holds the event loop
for that node's few seconds of ssh (no instruction runs a blocking call in a
thread yet).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from gpucloud.errors import GpuCloudError, InstanceFailedError
from gpucloud.jobs.multinode import node_env
from gpucloud.models import Instance, Job, JobRun, JobStatus, Plan
from gpucloud.core.instructions import Call, Op
from gpucloud.providers import _batch_mark
from gpucloud.providers._jobscript import POWER_OFF, STATE_DIR, vm_script

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext

BOOT_TIMEOUT = 1800.0  # seconds every node has to run with an address
START_TIMEOUT = 60.0  # seconds one node's ssh start may take
NAME_ROOM = 40  # of the job's name in a node's name: "-node<rank>" must survive
# providers that cut names (Hyperstack: 50 characters)


def node_plan(plan: Plan, nodes: int) -> Plan:
    """The plan each node is launched by: no failover away from its offer's
    provider, region and instance type (the nodes of one job stay together),
    and ``nodes`` machines, so that each node's share of ``max_cost`` (its
    deadline, core/launch.machine_cap) is the job's cap split between them."""
    o = plan.offer
    same = tuple(a for a in plan.alternatives if (a.provider, a.region, a.instance_type)
                 == (o.provider, o.region, o.instance_type))
    return plan.model_copy(update={"alternatives": same, "instances": nodes})


def submit(ctx: ClientContext, job: JobRun, plan: Plan, disk_gb: int | None) -> Op:
    """Launch the job's nodes, start it on each; the Job (node 0's id)."""
    from gpucloud.batch.create import launch_batch
    from gpucloud.batch.models import BatchIncompleteError, CreateRequest

    # The launches carry no secret (the machines boot without the job); the
    # runner that holds them goes to each node by ssh's stdin, or, on the ssh
    # provider, in a request marked with them (base.SECRETS_EXTENSION).
    nodes = job.nodes
    offer = plan.offer
    plan = node_plan(plan, nodes)
    requests = [CreateRequest(gpu=offer.gpu, count=offer.gpu_count, provider=offer.provider,
                              region=offer.region, disk_gb=disk_gb,
                              name=_batch_mark.node_name(job.name[:NAME_ROOM], rank))
                for rank in range(nodes)]
    key = _batch_mark.job_key(nodes)
    # How each node mounts the job's volumes, read before any launch: a volume
    # the nodes could not mount is refused while nothing runs.
    mounts, setup = yield Call(offer.provider,
                               ctx.adapter(offer.provider).node_mounts(job))
    try:
        made = yield from launch_batch(ctx, requests, [plan] * nodes, concurrency=None,
                                       all_or_nothing=True, batch=key, progress=None,
                                       job_nodes=True, volumes=job.volumes)
    except BatchIncompleteError as exc:
        raise _failed(job, exc) from exc
    machines = [item.instance for item in made.items if item.instance is not None]
    assert len(machines) == nodes  # all or nothing
    try:
        running = yield from _running(ctx, machines)
        addrs = [address(m) for m in running]
        for rank, machine in enumerate(running):
            yield from start(ctx, machine, node_job(job, rank, addrs), mounts, setup)
    except BaseException as exc:
        yield from _end_all(ctx, machines)
        if isinstance(exc, GpuCloudError):
            raise exc.with_details(
                message=f"job {job.name}: {exc.message}",
                hint=f"all {nodes} node(s) it launched were ended"
                     + (f"; {exc.hint}" if exc.hint else "")) from exc
        raise
    node0 = running[0]
    return Job(provider=node0.provider, id=node0.id, name=job.name, status=JobStatus.RUNNING,
               provider_status=node0.provider_status, launch_id=node0.launch_id,
               instance=node0, nodes=nodes, instances=tuple(running),
               created_at=node0.created_at, shutdown_at=node0.shutdown_at,
               simulated=node0.simulated)


def node_job(job: JobRun, rank: int, addrs: list[str]) -> JobRun:
    """Node ``rank``'s JobRun: the job with the rendezvous env. No retries on
    the node: one node's command run again alone would wait at a rendezvous
    the others have left, so a failed node fails the job (the reaper then
    ends the others)."""
    env = {**job.env, **node_env(rank, addrs, job.gpu_count)}
    return job.model_copy(update={"env": env, "node_rank": rank, "retries": 0})


def address(machine: Instance) -> str:
    """Where the other nodes reach this one: the private network where the
    provider gives an address on it, else the public address."""
    found = machine.private_ip or machine.ip or (
        machine.connection.host if machine.connection is not None else None)
    if not found:
        raise InstanceFailedError(f"{machine.ref} runs but has no address",
                                  hint="its provider gave none; the job cannot rendezvous")
    return found


def _running(ctx: ClientContext, machines: list[Instance]) -> Op:
    """Every node as read once it runs with an address, in rank order."""
    from gpucloud.core.instances import wait

    out = []
    for machine in machines:
        read: Instance = yield from wait(ctx, machine.ref, "running", BOOT_TIMEOUT)
        if read.connection is None:
            read = yield from _addressed(ctx, read)
        out.append(read)
    return out


def _addressed(ctx: ClientContext, machine: Instance) -> Op:
    """A running machine read until the provider gives its address."""
    from gpucloud.core.instances import get
    from gpucloud.providers.base import Sleep

    for _ in range(30):
        yield Sleep(5.0)
        machine = yield from get(ctx, machine.ref)
        if machine.connection is not None:
            return machine
    raise InstanceFailedError(f"{machine.ref} runs but has no address to reach it at",
                              hint="the job could not be started on it")


def start(ctx: ClientContext, machine: Instance, job: JobRun,
          mounts: list[tuple[str, str]], setup: list[str]) -> Op:
    """Start one node's runner: through the provider where it has its own way,
    else over ssh, mounting the job's volumes (``Provider.node_mounts``)."""
    adapter = ctx.adapter(machine.provider)
    done = yield Call(machine.provider, adapter.start_node_job(machine, job))
    if not done:
        _start_over_ssh(ctx, machine, job, mounts, setup)


def _start_over_ssh(ctx: ClientContext, machine: Instance, job: JobRun,
                    mounts: list[tuple[str, str]], setup: list[str]) -> None:
    """Blocking: store the runner on the node (root's state directory, mode
    600: it may hold secrets) and start it detached; as root or with sudo, as
    a start-up script would run (docker, power off, mounting the volumes)."""
    from gpucloud.machine.ssh import message_line, run_ssh

    state = shlex.quote(STATE_DIR)
    command = "\n".join([
        'if [ "$(id -u)" -eq 0 ]; then gc_sudo=; else gc_sudo="sudo -n"; fi',
        f"$gc_sudo mkdir -p {state} || exit 2",
        f"$gc_sudo sh -c 'umask 077; cat >\"$1\"' sh {state}/run.sh || exit 2",
        f"$gc_sudo setsid sh {state}/run.sh </dev/null >/dev/null 2>&1 &",
        "echo started",
    ])
    result = run_ssh(machine, command, START_TIMEOUT, journal=ctx.journal,
                     stdin=vm_script(job, POWER_OFF, mounts, setup))
    if result.exit_code != 0 or "started" not in result.stdout:
        raise InstanceFailedError(
            f"node {job.node_rank} ({machine.ref}): the job could not be started over ssh: "
            f"{message_line(result)}",
            hint=f"`gpucloud ssh {machine.ref}` shows what ssh says")


def _end_all(ctx: ClientContext, machines: list[Instance]) -> Op:
    """End every node (one may already be gone); recorded as the batch's
    roll-back records its ends."""
    from gpucloud.batch.create import end_machines

    yield from end_machines(ctx, machines, "delete")
    ctx.created = [m for m in ctx.created if m.ref not in {x.ref for x in machines}]


def _failed(job: JobRun, exc: Any) -> GpuCloudError:
    """The submit's error when a node could not be had: that node's own error
    (its class, so its exit code: no capacity is 6), saying what was ended."""
    items = exc.result.items
    first = next(i for i in items if i.status == "failed")
    ended = sum(1 for i in items if i.status == "terminated")
    alive = [i.instance.ref for i in items
             if i.instance is not None and i.ok and i.status != "terminated"]
    cause = exc.__cause__ if isinstance(exc.__cause__, GpuCloudError) else exc
    if alive:  # the roll-back could not confirm them gone: say so, never "none left"
        hint = exc.hint
    elif ended:
        hint = f"no node was left running: the {ended} launched were ended"
    else:
        hint = "no node was launched"
    return cause.with_details(
        message=f"job {job.name}: node {first.index} (of ranks 0-{job.nodes - 1}) could not "
                f"be launched: {first.error}",
        hint=hint + (f"; {first.hint}" if first.hint else ""))


__all__ = ["BOOT_TIMEOUT", "address", "node_job", "node_plan", "start", "submit"]
