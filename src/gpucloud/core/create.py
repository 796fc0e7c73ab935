"""Creating machines: plan first, then launch each one (launch.py).

The money rules hold for every create:

* every create is planned and estimated before anything is sent, and refused
  when the estimate exceeds ``max_cost`` (plan.py);
* the launch intent is journaled before the request, the outcome after;
* a create is never retried blindly (launch.py): after an ambiguous failure
  the machine is looked up by its launch id; only definite refusals (no
  capacity, quota) move on to the next offer, within a bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucloud.core.instructions import Op
from gpucloud.errors import GpuCloudError, SpecError

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.models import Instance, Plan
    from gpucloud.types import Deadline, Duration, Money


def create(ctx: ClientContext, gpu: str, count: int, provider: str | None,
           region: str | None, name: str | None, image: str | None, ssh_key: str | None,
           disk_gb: int | None, auto_shutdown: Duration | None, max_cost: Money | None,
           spot: bool, n: int, plan: Plan | None, until: Deadline | None = None,
           project: str | None = None) -> Op:
    """`n` machines as planned (a plan made now unless one is given), for
    `project` (else the plan's)."""
    from gpucloud.core.plan import plan as make_plan

    if plan is None:
        plan = yield from make_plan(ctx, gpu, count, provider, region, disk_gb, auto_shutdown,
                                    max_cost, spot, n, until=until, project=project)
    elif plan.instances != n:
        raise SpecError(f"the plan is for {plan.instances} machine(s), not {n}",
                        hint="make the plan with the same n= (CLI: --instances)")
    else:
        plan = for_project(plan, project)
    made: list[Instance] = yield from launch_planned(ctx, plan, name=name, image=image,
                                                     ssh_key=ssh_key, disk_gb=disk_gb)
    return made


def for_project(plan: Plan, project: str | None) -> Plan:
    """A plan given to a create, for `project` when one is named (its
    launches are journaled and budgeted under it); as it is otherwise."""
    if project is None or plan.project == project:
        return plan
    from gpucloud.config.identity import check_project

    return plan.model_copy(update={"project": check_project(project)})


def launch_planned(ctx: ClientContext, plan: Plan, *, name: str | None = None,
                   image: str | None = None, ssh_key: str | None = None,
                   disk_gb: int | None = None) -> Op:
    """plan.instances machines, one after another; a failure part-way raises
    with `.instances` (those made, still running) and a hint that names them."""
    from gpucloud.core.context import InFlight
    from gpucloud.core.launch import launch

    made: list[Instance] = []
    ctx.created, ctx.in_flight = made, InFlight()
    for index in range(plan.instances):
        machine_name = name if name is None or plan.instances == 1 else f"{name}-{index + 1}"
        try:
            instance = yield from launch(ctx, plan, name=machine_name, image=image,
                                         ssh_key=ssh_key, disk_gb=disk_gb)
        except GpuCloudError as exc:
            hint = exc.hint
            if made:
                refs = " ".join(i.ref for i in made)
                hint = (f"{len(made)} of {plan.instances} machines were created and are "
                        f"running: {refs} (`gpucloud delete {refs}` to remove them)")
            raise exc.with_details(instances=made, hint=hint) from exc
        made.append(instance)
    return made


__all__ = ["create", "for_project", "launch_planned"]
