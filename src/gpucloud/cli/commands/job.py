"""Commands for jobs: submit, jobs list|get|cancel|logs, schema job."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import HelpGroup, app
from gpucloud.cli.notices import QUIET, show_warnings
from gpucloud.cli.commands.instance import _confirm, _hourly, _interrupted, plan_text

jobs_app = typer.Typer(cls=HelpGroup, help="List, inspect, cancel and read the logs of jobs.",
                       no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")
schema_app = typer.Typer(cls=HelpGroup, help="Print the JSON Schema of gpucloud's files.",
                         no_args_is_help=True)
app.add_typer(schema_app, name="schema")

JOB_REF = typer.Argument(..., metavar="JOB",
                         help="provider/id (REF in `gpucloud jobs list`), the job's name, "
                              "or a unique prefix of its id.")


@app.command()
def submit(
    file: str = typer.Argument(..., metavar="FILE", help="The job file (YAML)."),
    provider: Optional[str] = typer.Option(None, "--provider", "-p", metavar="PROVIDER",
                                           help="Only this provider (overrides the file)."),
    region: Optional[str] = typer.Option(None, "--region", "-r", metavar="REGION",
                                         help="Only this region (overrides the file)."),
    project: Optional[str] = params.PROJECT,
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the file, show the plan; "
                                                          "submit nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    quiet: bool = QUIET,
    json_output: bool = params.JSON,
) -> None:
    """Submit a job file: plan and estimate first, then run it on the cheapest offer.

    The machine runs the job's container and ends with it; max_runtime is its
    deadline. Secrets are read from your environment or keyring now; a dry
    run checks how each is referenced and reads none.
    """
    from gpucloud.client import Client
    from gpucloud.jobs.ops import resolve_secrets
    from gpucloud.jobs.spec import load

    if project is not None:
        from gpucloud.config.identity import check_project

        check_project(project)  # exit 2, before any secret is read
    spec = load(file)  # an ill-formed secret reference is refused here (exit 2)
    if not dry_run:
        resolve_secrets(spec)  # a missing secret stops here, before any prompt (exit 3)
    client = Client(on_attempt=None if json_output else _show_attempt)
    plan = client.plan_job(spec, provider=provider, region=region, dry_run=dry_run,
                           project=project)
    shown = set(client.warnings)
    if not json_output:
        show_warnings(client, quiet)
        output.out(f"Job {spec.name}: {spec.image}"
                   + (f" ({' '.join(spec.command + spec.args)})" if spec.command or spec.args
                      else ""))
        if spec.nodes > 1:
            output.out(f"Nodes: {spec.nodes} x {plan.offer.gpu_count}x {plan.offer.gpu} "
                       f"({plan.offer.provider} {plan.offer.instance_type} in "
                       f"{plan.offer.region}); the total below counts every node")
        output.out(plan_text(plan))
        if dry_run and spec.secrets:
            output.out("Secrets (read at submit, not now): " + ", ".join(
                f"{name} from {ref.source}" for name, ref in spec.secrets.items()))
    if dry_run:
        if json_output:
            output.emit_json({"job": spec.model_dump(mode="json"), "plan": output.dump(plan),
                              "dry_run": True, "warnings": client.warnings})
        else:
            output.out("dry run: nothing was submitted")
        return
    _confirm(f"Submit {spec.name} {_hourly(plan)}?", yes, json_output, "submitting a job")
    try:
        job = client.submit(spec, provider=provider, region=region, plan=plan)
    except KeyboardInterrupt:  # name the machine that exists or may exist
        _interrupted(client.last_created, client.in_flight, json_output)
        raise
    if json_output:
        output.emit_json({"job": output.dump(job), "plan": output.dump(plan),
                          "attempts": [output.dump(a) for a in client.last_attempts],
                          "warnings": client.warnings})
        return
    output.out(f"submitted {job.ref} ({job.status.value})")
    output.out(job_text(job))
    for warning in client.warnings:  # the launch's own (a journal write that failed)
        if warning not in shown:
            output.warn(warning)
    output.out(f"follow with: gpucloud jobs logs -f {job.ref}")


def _show_attempt(attempt: Any) -> None:
    where = f"{attempt.provider} {attempt.instance_type} in {attempt.region}"
    if attempt.outcome == "launching":
        output.err(f"launching on {where}...")
    else:
        output.err(f"  {attempt.outcome}" + (f": {attempt.error}" if attempt.error else ""))


@jobs_app.command("list")
def list_jobs(
    provider: Optional[str] = params.PROVIDER,
    json_output: bool = params.JSON,
) -> None:
    """List jobs on every provider with credentials, newest first."""
    from gpucloud.client import Client

    client = Client()
    found = client.jobs(provider=provider)
    if json_output:
        output.emit_json({"jobs": [output.dump(j) for j in found], "warnings": client.warnings})
        return
    for warning in client.warnings:
        output.warn(warning)
    if not found:
        output.err("no jobs")
        return
    now = output.utcnow()
    output.out(output.table(
        ["REF", "NAME", "STATUS", "NODES", "GPUS", "AGE", "DEADLINE", "EXIT", "MESSAGE"],
        [[j.ref + (" (simulated)" if j.simulated else ""), j.name or "-", j.status.value,
          str(j.nodes), _gpus(j), output.age(j, now) or "-",
          output.iso(j.shutdown_at) if j.status.value in ("queued", "running")
          and j.shutdown_at else "-",
          "-" if j.exit_code is None else str(j.exit_code), j.message or "-"] for j in found],
        shrink=(1, 8), keep=(0,)))


@jobs_app.command("get")
def get_job(ref: str = JOB_REF, json_output: bool = params.JSON) -> None:
    """Show one job."""
    from gpucloud.client import Client

    client = Client()
    job = client.job(ref)
    _said(client)
    if json_output:
        output.emit_json(output.dump(job))
        return
    output.out(job_text(job))


@jobs_app.command("cancel")
def cancel_job(
    ref: str = JOB_REF,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Cancel a job: it stops, and its machine ends (billing stops)."""
    from gpucloud.client import Client

    client = Client()
    job = client.job(ref)  # resolved (a name, a prefix) before anything is asked
    _said(client)
    _confirm(f"Cancel job {job.ref} ({job.name or 'no name'}, {job.status.value})?", yes,
             json_output, "cancelling a job")
    after = client.cancel(job)
    if json_output:
        output.emit_json({"job": output.dump(after)})
        return
    output.out(f"{after.ref}: {after.status.value}")


@jobs_app.command("logs")
def job_logs(
    ref: str = JOB_REF,
    follow: bool = typer.Option(False, "--follow", "-f",
                                help="Keep printing new lines until the job ends."),
    tail: Optional[int] = typer.Option(None, "--tail", min=1, metavar="N",
                                       help="Only the last N lines."),
    json_output: bool = params.JSON,
) -> None:
    """Print a job's output, where its provider offers logs."""
    from gpucloud.client import Client

    client = Client()
    job = client.job(ref)
    _said(client)
    if json_output:  # one document: with --follow, once the job has ended
        text = "".join(f"{line}\n" for line in client.logs(job, follow=True, tail=tail)) \
            if follow else client.logs(job, tail=tail)
        output.emit_json({"job": output.dump(client.job(job)), "lines": text.splitlines()})
        return
    if not follow:
        text = client.logs(job, tail=tail)
        if text:
            output.out(text.rstrip("\n"))
        else:
            output.err(f"{job.ref}: no output yet ({job.status.value})")
        return
    for line in client.logs(job, follow=True, tail=tail):
        output.out(line)
        sys.stdout.flush()
    ended = client.job(job)
    output.err(f"{ended.ref}: {ended.status.value}"
               + (f" ({ended.message})" if ended.message else ""))


@schema_app.command("job")
def schema_job(json_output: bool = typer.Option(
        False, "--json", help='Wrap it as {"schema": ...} like every --json document.')) -> None:
    """Print the JSON Schema of a job file (for editor completion and checks):
    `gpucloud schema job > job.schema.json`."""
    import json

    from gpucloud.jobs.spec import schema

    if json_output:
        output.emit_json({"schema": schema()})
        return
    sys.stdout.write(json.dumps(schema(), indent=2) + "\n")


def _said(client: Any) -> None:
    """What finding the job took (which of several runs of a name) on stderr, in
    every mode: the --json document on stdout keeps its shape."""
    for warning in client.warnings:
        output.warn(warning)


def _gpus(job: Any) -> str:
    """GPUs per node (the NODES column says how many nodes)."""
    machine = job.instance
    if machine is None or not machine.gpu_count:
        return "-"
    return f"{machine.gpu_count}x {machine.gpu}"


def _nodes(job: Any) -> str | None:
    """Every node's machine, rank order, for a multi-node job."""
    if job.nodes == 1:
        return None
    if not job.instances:
        return str(job.nodes)
    return f"{job.nodes}: " + ", ".join(
        f"{rank} {m.ref} {m.private_ip or m.ip or '-'} ({m.status.value})"
        for rank, m in enumerate(job.instances))


def job_text(job: Any) -> str:
    machine = job.instance
    fields = [
        ("ref", job.ref), ("name", job.name),
        ("status", job.status.value + (f" ({job.provider_status})" if job.provider_status
                                       and job.provider_status != job.status.value else "")),
        ("message", job.message),
        ("exit code", None if job.exit_code is None else str(job.exit_code)),
        ("gpus", _gpus(job) + (" per node" if job.nodes > 1 else "")
         if machine is not None else None),
        ("nodes", _nodes(job)),
        ("machine", f"{machine.ref} ({machine.status.value})" if machine is not None else None),
        ("created at", output.iso(job.created_at)), ("started at", output.iso(job.started_at)),
        ("finished at", output.iso(job.finished_at)), ("deadline", output.iso(job.shutdown_at)),
        ("launch id", job.launch_id),
    ]
    text = "\n".join(f"{k:<14} {output.clean(v)}" for k, v in fields if v is not None)
    if job.simulated:
        text += "\nnote           simulated job (sandbox): no real GPU, nothing billed"
    return text
