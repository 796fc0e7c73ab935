"""Commands on the machine itself: doctor (the checklist before a long run) and top."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import app, fail

REF = typer.Argument(..., metavar="REF",
                     help="provider/id, the machine's name, or a unique id prefix.")
# A failed check means the machine is not fit for the run: the "machine failed" class.
EXIT_CHECK_FAILED = 9


@app.command()
def doctor(
    ref: str = REF,
    skip_burn: bool = typer.Option(False, "--skip-burn", help="Skip the matmul burn."),
    burn_seconds: float = typer.Option(30.0, "--burn-seconds", min=1, max=3600,
                                       metavar="SECONDS",
                                       help="How long the bf16 matmul burn runs."),
    nccl: bool = typer.Option(False, "--nccl",
                              help="Instead: an NCCL all-reduce (nccl-tests, else "
                                   "torch.distributed) and the network checks; REF may be "
                                   "a multi-node job, run across its nodes."),
    image: Optional[str] = typer.Option(
        None, "--image", metavar="IMAGE",
        help="With --nccl: the all-reduce is torch.distributed's inside IMAGE (the job's "
             "image: its PyTorch and NCCL), run with docker on each machine."),
    identity: Optional[str] = params.identity("-i"),
    json_output: bool = params.JSON,
) -> None:
    """Check a machine before a long run: GPUs, driver, runtime, ECC, Xid, NVLink, disk, burn.

    Each check is ok, warn or fail, with the fix. Exits 9 when any check fails
    (so it can gate a run), 0 when there are only warnings. --nccl measures
    all-reduce bus bandwidth against what NVLink, PCIe or the network between
    nodes should give, and names the classic NCCL network faults.
    """
    from gpucloud.machine import doctor as checks
    from gpucloud.client import Client

    if image is not None and (not nccl or not image.strip() or image.startswith("-")):
        fail(2, "usage", "--image goes with --nccl" if not nccl else
             f"{image!r} is not an image name", "e.g. `gpucloud doctor REF --nccl --image "
             "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime`", json_output)
    client = Client()
    if nccl:
        _doctor_nccl(client, ref, identity, json_output, image)
        return
    instance = client.get(ref)

    def execute(command: str, timeout: float) -> Any:
        return client.exec(instance, command, timeout=timeout, identity=identity)

    def progress(check: Any) -> None:
        if not json_output:
            output.err(f"{check.name}: {check.status}")

    if not json_output:
        burn = "" if skip_burn or instance.simulated else f" (the burn takes {burn_seconds:g} s)"
        output.err(f"checking {instance.ref}{burn}…")
    report = checks.run(instance, execute, burn_seconds=None if skip_burn else burn_seconds,
                        on_check=progress)
    _report(report, instance.ref, instance.simulated, json_output)


def _report(report: Any, what: str, simulated: bool, json_output: bool) -> None:
    """A checklist's table, its fixes and verdict (or its JSON); exit 9 when a check failed."""
    if json_output:
        output.emit_json(report.as_dict())
    else:
        output.out(output.table(["CHECK", "STATUS", "DETAIL"],
                                [[c.name, c.status.upper() if c.status != "ok" else "ok",
                                  c.detail] for c in report.checks], shrink=(2,)))
        for c in report.checks:
            if c.fix:
                output.note(f"fix ({c.name}): {c.fix}")
        if simulated:
            output.note("simulated machine (sandbox): every figure above is made up")
        verdict = "ready" if report.ok else "NOT ready: fix the failed checks first"
        output.out(f"{what}: {verdict}")
    if not report.ok:
        raise typer.Exit(EXIT_CHECK_FAILED)


def _nccl_targets(client: Any, ref: str, json_output: bool) -> tuple[list[Any], str | None]:
    """The machines of REF in rank order: one machine, or every node of a job.
    A name is a multi-node job's first (its node 0's machine may share it); a
    provider/id ref is a machine's, else a job's."""
    from gpucloud.errors import GpuCloudError, NotFoundError

    job = None
    if "/" not in ref:
        try:
            job = client.job(ref)
        except GpuCloudError:  # no such job, or not one: the machine lookup says
            job = None
        if job is not None and job.nodes < 2:
            job = None
    if job is None:
        try:
            return [client.get(ref)], None
        except NotFoundError as machine_missing:
            try:
                job = client.job(ref)
            except NotFoundError:
                raise machine_missing from None
    machines = list(job.instances) or ([job.instance] if job.instance is not None else [])
    if not machines:
        fail(2, "usage", f"{job.ref} runs on no machine gpucloud can reach (its provider "
             "places the pods itself)", "run `gpucloud doctor REF --nccl` on a machine, or "
             "run nccl-tests inside the job", json_output)
    return machines, job.ref


def _doctor_nccl(client: Any, ref: str, identity: str | None, json_output: bool,
                 image: str | None) -> None:
    from gpucloud.client import Client
    from gpucloud.jobs.multinode import node_env
    from gpucloud.machine import nccl_check

    machines, job = _nccl_targets(client, ref, json_output)

    def execute_on(instance: Any) -> Any:
        # one client per node: the nodes' benchmarks run at the same time, in threads
        own = client if instance is machines[0] else Client()
        return lambda command, timeout: own.exec(instance, command, timeout=timeout,
                                                 identity=identity)

    def progress(check: Any) -> None:
        if not json_output:
            output.err(f"{check.name}: {check.status}")

    if not json_output:
        where = f"{job} ({len(machines)} nodes)" if job else machines[0].ref
        output.err(f"NCCL all-reduce on {where} (a minute or more)…")
    report = nccl_check.run(machines, execute_on, job=job, node_env=node_env,
                            on_check=progress, image=image)
    _report(report, job or machines[0].ref, any(m.simulated for m in machines), json_output)


def _sample_json(instance: Any, gpus: list[Any], hint: str | None, now: Any) -> dict[str, Any]:
    from gpucloud.machine import top as sampling

    left = (instance.shutdown_at - now).total_seconds() if instance.shutdown_at else None
    return {"at": output.iso(now), "instance": instance.ref,
            "gpus": [g.as_dict() for g in gpus],
            "mean_utilization_pct": sampling.mean_use(gpus),
            "cost_so_far": output.cost_so_far(instance, now),
            "shutdown_at": output.iso(instance.shutdown_at),
            "time_left_seconds": max(0, int(left)) if left is not None else None,
            "hint": hint, "simulated": instance.simulated}


def _num(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.0f}{unit}"


def _sample_text(instance: Any, gpus: list[Any], hint: str | None, now: Any) -> str:
    cost = output.cost_so_far(instance, now)
    lines = [f"{output.iso(now)}  {instance.ref}  cost so far "
             f"{output.usd(cost) if cost is not None else 'unknown'}"
             f"  left {output.time_left(instance, now) or 'no deadline'}"
             + ("  (simulated)" if instance.simulated else "")]
    lines.append(output.table(
        ["GPU", "NAME", "UTIL", "MEMORY (MiB)", "TEMP", "POWER (W)"],
        [[g.index, g.name or "-", _num(g.utilization_pct, "%"),
          f"{_num(g.memory_used_mib)} / {_num(g.memory_total_mib)}",
          _num(g.temperature_c, "C"), f"{_num(g.power_w)} / {_num(g.power_limit_w)}"]
         for g in gpus], shrink=(1,)))
    if hint:
        width = output.terminal_width()
        if width:
            import textwrap

            lines.extend(textwrap.wrap(f"hint: {hint}", width, break_on_hyphens=False))
        else:
            lines.append(f"hint: {hint}")
    return "\n".join(lines) + "\n"


# On a terminal each sample replaces the last: the cursor goes up over the
# lines last drawn (CSI n A) and what is below it is cleared (CSI J), the ECMA-48
# sequences every terminal emulator reads. A pipe gets every sample in turn.
def _redraw(drawn: int) -> None:
    if drawn:
        sys.stdout.write(f"\x1b[{drawn}A\r\x1b[J")


@app.command()
def top(
    ref: str = REF,
    interval: str = typer.Option("10s", "--interval", "-i", metavar="DURATION",
                                 help="Time between samples, e.g. 10s, 1m."),
    count: Optional[int] = typer.Option(None, "--count", "-n", min=1, metavar="N",
                                        help="Stop after N samples (default: until Ctrl-C)."),
    identity: Optional[str] = params.identity(),  # -i is --interval here
    json_output: bool = params.JSON,
) -> None:
    """Live per-GPU utilisation, memory, temperature and power, with cost so far and time left.

    --json writes one JSON object per sample, one per line (NDJSON). Ctrl-C ends
    it with exit code 0.
    """
    from gpucloud.catalog import pricing
    from gpucloud.machine import top as sampling
    from gpucloud.client import Client
    from gpucloud.machine.doctor import check_login

    seconds = pricing.parse_duration(interval).total_seconds()
    if seconds < 1:
        fail(2, "usage", f"--interval {interval} is under one second", "e.g. --interval 10s",
             json_output)
    client = Client()
    history: list[list[Any]] = []
    in_place = not json_output and sys.stdout.isatty()
    drawn = 0  # lines of the sample on screen, to draw over
    try:
        while True:
            instance = client.get(ref)
            result = client.exec(instance, sampling.COMMAND, timeout=max(30.0, seconds),
                                 identity=identity)
            login = check_login(
                instance, result,
                lambda command, timeout: client.exec(instance, command, timeout=timeout,
                                                     identity=identity))
            if login is not None:  # the machine failed to answer: exit 9, as below
                fail(EXIT_CHECK_FAILED, "ssh_failed", f"{instance.ref}: {login.detail}",
                     login.fix, json_output)
            try:
                gpus = sampling.read_sample(result)
            except ValueError as exc:
                fail(EXIT_CHECK_FAILED, "machine_failed",
                     f"no GPU visible on {instance.ref}: nvidia-smi failed: {exc}",
                     f"run `gpucloud doctor {instance.ref}` to see what is wrong", json_output)
            history.append(gpus)
            now = output.utcnow()
            hint = sampling.low_use_hint(history)
            if json_output:
                output.emit_json(_sample_json(instance, gpus, hint, now))
            else:
                text = _sample_text(instance, gpus, hint, now)
                if in_place:
                    _redraw(drawn)
                    drawn = text.count("\n")
                output.out(text.rstrip("\n") + ("" if in_place else "\n"))
            sys.stdout.flush()
            if count is not None and len(history) >= count:
                return
            time.sleep(seconds)
    except KeyboardInterrupt:
        return  # the usual way to leave top: not an error
