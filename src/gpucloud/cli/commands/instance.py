"""Commands that touch machines: create, list, get, delete."""

from __future__ import annotations

import sys
from typing import Any, List, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import app, fail
from gpucloud.cli.notices import QUIET, show_warnings
# plan_text and _hourly are also used by job_cmds and worker_cmds through this module.
from gpucloud.cli.create_text import (
    _hourly as _hourly, _interrupted as _interrupted, _total, plan_text as plan_text, wait_all,
)


def _interactive() -> bool:
    return sys.stdin.isatty()


def _confirm(question: str, yes: bool, as_json: bool, what: str) -> None:
    """Ask, unless --yes; never prompt under --json or without a terminal."""
    if yes:
        return
    if as_json or not _interactive():
        fail(8, "confirmation_required", f"{what} needs confirmation",
             "pass --yes to confirm without a prompt", as_json)
    if not typer.confirm(question, default=False, err=True):
        fail(8, "declined", "declined: nothing was done", None, False)


@app.command()
def create(
    gpu: str = params.GPU,
    count: int = params.COUNT,
    provider: Optional[str] = params.PROVIDER,
    region: Optional[str] = params.REGION,
    instances: int = typer.Option(1, "--instances", "-n", min=1, metavar="N",
                                  help="Number of machines, each with COUNT GPUs (no cap; "
                                       "launched concurrently)."),
    concurrency: Optional[int] = typer.Option(
        None, "--concurrency", min=1, metavar="N",
        help="Launches in flight at once. Default: as many as the provider's rate limit "
             "times the latency observed calls for (the rate limit paces them too)."),
    all_or_nothing: bool = typer.Option(
        False, "--all-or-nothing",
        help="If any machine cannot be made, terminate those made and exit non-zero."),
    batch: Optional[str] = typer.Option(
        None, "--batch", metavar="KEY",
        help="Name the batch; run again with the same KEY to make only the missing machines."),
    name: Optional[str] = typer.Option(None, "--name", metavar="NAME", help="Machine name."),
    project: Optional[str] = params.PROJECT,
    image: Optional[str] = typer.Option(None, "--image", metavar="IMAGE",
                                        help="OS image (VM clouds) or container image."),
    ssh_key: Optional[str] = typer.Option(None, "--ssh-key", metavar="KEY",
                                          help="Registered key name or path to a .pub file."),
    disk_gb: Optional[int] = typer.Option(None, "--disk-gb", min=1, metavar="GB",
                                          help="Disk size in GB."),
    auto_shutdown: Optional[str] = typer.Option(
        None, "--auto-shutdown", metavar="DURATION",
        help="Deadline after creation, e.g. 4h, 90m; \"never\" skips the config default."),
    until: Optional[str] = typer.Option(
        None, "--until", metavar="TIME",
        help="Absolute deadline, ISO-8601 with a zone, e.g. 2026-12-01T18:00Z."),
    max_cost: Optional[str] = typer.Option(None, "--max-cost", metavar="USD",
                                           help="Refuse if the estimate exceeds this many USD."),
    spot: bool = typer.Option(False, "--spot", help="Spot/interruptible capacity."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan; create nothing."),
    wait: bool = typer.Option(False, "--wait", help="Wait until the machine is running."),
    timeout: int = typer.Option(600, "--timeout", min=1, metavar="SECONDS",
                                help="Seconds --wait waits at most."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    quiet: bool = QUIET,
    json_output: bool = params.JSON,
) -> None:
    """Create a COUNT x GPU machine on the cheapest available offer.

    Shows the plan and cost estimate first, then asks for confirmation.
    """
    from gpucloud.client import Client
    from gpucloud.errors import GpuCloudError

    def show_attempt(attempt: Any) -> None:
        if json_output:
            return
        where = f"{attempt.provider} {attempt.instance_type} in {attempt.region}"
        if attempt.outcome == "launching":
            output.err(f"launching on {where}...")
        else:
            output.err(f"  {attempt.outcome}" + (f": {attempt.error}" if attempt.error else ""))

    # A batch reports per machine (batch_cmds), not per launch attempt.
    client = Client(on_attempt=show_attempt if instances == 1 else None)
    if batch is not None and not dry_run:
        from gpucloud.batch.lock import probe
        from gpucloud.safety.state_store import open_journal

        # Refused before the plan and the prompt when another run has the key
        # (create_many takes the lock for good; this only looks early).
        probe(open_journal(client.config), batch)
    plan = client.plan(gpu=gpu, count=count, provider=provider, region=region, disk_gb=disk_gb,
                       auto_shutdown=auto_shutdown, max_cost=max_cost, spot=spot, n=instances,
                       until=until, dry_run=dry_run, project=project)
    shown = set(client.warnings)
    if not json_output:
        show_warnings(client, quiet)
        output.out(plan_text(plan))
    if dry_run:
        if json_output:
            output.emit_json({"plan": output.dump(plan), "dry_run": True,
                              "warnings": client.warnings})
        else:
            output.out("dry run: nothing was created")
        return
    many = f"{instances} machines" if instances > 1 else "this machine"
    _confirm(f"Create {many} {_hourly(plan)}{_total(plan)}?",
             yes, json_output, "creating machines")
    if instances > 1 or batch is not None or all_or_nothing:
        from gpucloud.cli.commands.batch import create_batch

        create_batch(client, plan, dict(gpu=gpu, count=count, name=name, image=image,
                                         ssh_key=ssh_key, disk_gb=disk_gb, n=instances),
                      concurrency, all_or_nothing, batch, wait, timeout, json_output)
        return
    made: list[Any] = []
    try:
        made = [client.create(gpu=gpu, count=count, name=name, image=image, ssh_key=ssh_key,
                              disk_gb=disk_gb, plan=plan)]
        wait_all(client, made, wait, timeout, json_output)
    except GpuCloudError as exc:  # a script must learn what to clean up
        raise exc.with_details(instances=made or client.last_created) from exc
    except KeyboardInterrupt:
        _interrupted(made or client.last_created, client.in_flight, json_output)
    if json_output:
        output.emit_json({"instance": output.dump(made[0]), "instances": [output.dump(made[0])],
                          "plan": output.dump(plan),
                          "attempts": [output.dump(a) for a in client.last_attempts],
                          "warnings": client.warnings, "batch": None, "failures": []})
        return
    for instance in made:
        output.out(f"created {instance.ref} ({instance.status.value})")
        output.out(output.instance_text(instance))
    # What the launch itself warned of (a journal or ledger write that failed).
    for warning in client.warnings:
        if warning not in shown:
            output.warn(warning)
    output.out(f"delete with: gpucloud delete {' '.join(i.ref for i in made)}")


@app.command("list")
def list_(
    provider: Optional[str] = params.PROVIDER,
    show_all: bool = typer.Option(False, "--all", "-a",
                                  help="Also machines terminated over 10 minutes ago."),
    # One comma-separated value, not a repeatable option: typer converts a list
    # option through its pydantic layer, which `list` must not pay for at start-up.
    status: Optional[str] = typer.Option(
        None, "--status", metavar="STATUS[,STATUS]",
        help="Only machines in these statuses, comma-separated: pending, running, "
             "stopping, stopped, terminating, terminated, failed, unknown."),
    mine: bool = typer.Option(False, "--mine",
                              help="Only machines you launched (GPUCLOUD_USER, else your "
                                   "login name, per the journal)."),
    json_output: bool = params.JSON,
) -> None:
    """List machines on every provider with credentials.

    Machines terminated over 10 minutes ago are left out unless --all or --status.
    """
    from gpucloud.client import Client

    client = Client()
    if json_output:
        output.emit_json_stream("instances", client.iter_list(provider=provider, all=show_all,
                                                              status=status, mine=mine),
                                lambda: {"warnings": client.warnings})
        return
    instances = client.list(provider=provider, all=show_all, status=status, mine=mine)
    for warning in client.warnings:
        output.warn(warning)
    if instances:
        output.out(output.instances_table(instances))
    else:
        output.err("no machines")


@app.command()
def get(
    ref: str = typer.Argument(..., metavar="REF",
                              help="provider/id (REF in `gpucloud list`), the machine's name, "
                                   "or a unique prefix of its id."),
    json_output: bool = params.JSON,
) -> None:
    """Show one machine."""
    from gpucloud.client import Client

    client = Client()
    instance = client.get(ref)
    if json_output:
        output.emit_json(output.dump(instance))
        return
    for warning in client.warnings:  # a name is looked up by listing every provider
        output.warn(warning)
    output.out(output.instance_text(instance))


@app.command()
def delete(
    refs: Optional[List[str]] = typer.Argument(
        None, metavar="REF", help="Each machine to delete: provider/id, name or id prefix."),
    every: bool = typer.Option(False, "--all",
                               help="Every machine gpucloud made that is still up (with "
                                    "--provider, --name-prefix: those only)."),
    provider: Optional[str] = typer.Option(None, "--provider", "-p", metavar="PROVIDER",
                                           help="With --all: only this provider."),
    name_prefix: Optional[str] = typer.Option(None, "--name-prefix", metavar="PREFIX",
                                              help="With --all: only machines whose name "
                                                   "starts with PREFIX."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Delete (terminate) machines. Their disks are gone for good."""
    from gpucloud.client import Client
    from gpucloud.errors import GpuCloudError, exit_code_for

    if every == bool(refs) or (not every and (provider or name_prefix is not None)):
        fail(2, "usage", "give machines (REF ...) or --all, not both"
             if every else "name the machines to delete, or pass --all"
             if not refs else "--provider and --name-prefix go with --all",
             "gpucloud delete REF ... | gpucloud delete --all [--provider P] "
             "[--name-prefix X]", json_output)
    client = Client()
    if every:
        named = _everything(client, provider, name_prefix, yes, json_output)
    else:
        # Every name is resolved before anything is asked or deleted: an ambiguous
        # or unknown one (exit 2 / 5) deletes nothing, not just the refs before it.
        named = _refs_of(client, refs or [])
        shown = ", ".join(ref if typed == ref else f"{ref} ({typed})"
                          for ref, typed in named.items())
        _confirm(f"Delete {shown}? This cannot be undone.", yes, json_output,
                 "deleting machines")
    deleted: list[str] = []
    failures: list[tuple[str, GpuCloudError]] = []
    for ref in named:  # one failure must not leave the others running
        try:
            client.delete(ref)
        except GpuCloudError as exc:
            failures.append((ref, exc))
            if not json_output:
                output.err(f"error: {ref}: {exc}" + (f" (hint: {exc.hint})" if exc.hint else ""))
            continue
        deleted.append(ref)
        if not json_output:
            output.out(f"deleting {ref}")
    warnings = client.warnings
    if not json_output:
        for warning in warnings:
            output.err(f"warning: {warning}")
    failed = [{"ref": ref, "error": {"code": exc.code, "message": exc.message, "hint": exc.hint,
                                     "exit_code": exit_code_for(exc)}} for ref, exc in failures]
    if failures:
        first = failures[0][1]
        message = first.message
        if len(failures) > 1:
            message = (f"{len(failures)} of {len(named)} deletes failed; "
                       f"first: {failures[0][0]}: {first.message}")
        fail(exit_code_for(first), first.code, message, first.hint, json_output,
             {"deleted": deleted, "failed": failed, "warnings": warnings})
    if json_output:
        output.emit_json({"deleted": deleted, "failed": [], "warnings": warnings})


def _everything(client: Any, provider: Optional[str], name_prefix: Optional[str], yes: bool,
                as_json: bool) -> dict[str, str]:
    """delete --all: the machines in scope, listed in the one confirmation.
    Exactly those are deleted, not any made while the question was open."""
    machines = client.delete_all(provider, name_prefix=name_prefix, dry_run=True)
    if not machines:
        if as_json:
            output.emit_json({"deleted": [], "failed": [], "warnings": client.warnings})
        else:
            for warning in client.warnings:  # a provider not listed: it may have some
                output.warn(warning)
            output.err("no machines to delete" + (f" on {provider}" if provider else "")
                       + (f" named {name_prefix}..." if name_prefix is not None else ""))
        raise typer.Exit(0)
    if not yes and not as_json:
        for m in machines:
            output.err(f"  {m.ref}  {m.name or '-'}  {m.status.value}  "
                       f"{output.hourly(m)}/h")
    _confirm(f"Delete these {len(machines)} machine(s)? This cannot be undone.", yes, as_json,
             "deleting machines")
    return {m.ref: m.ref for m in machines}


def _refs_of(client: Any, refs: List[str]) -> dict[str, str]:
    """provider/id of each machine (once each, in order) -> the reference the user
    gave for it. Malformed provider/ids fail before any lookup; names and id
    prefixes are looked up, all of them before the caller acts on any."""
    from gpucloud.types import needs_lookup, split_ref

    for ref in refs:
        if not needs_lookup(ref):
            split_ref(ref)
    named: dict[str, str] = {}
    for ref in refs:
        named.setdefault(client.get(ref).ref if needs_lookup(ref) else ref, ref)
    return named


@app.command()
def stop(
    refs: List[str] = typer.Argument(..., metavar="REF",
                                     help="Each machine to stop: provider/id, name or id prefix."),
    json_output: bool = params.JSON,
) -> None:
    """Power machines off, keeping their disks (RunPod, Vast.ai, sandbox). Disks may still bill."""
    from gpucloud.client import Client

    client = Client()
    stopped = [client.stop(ref) for ref in _refs_of(client, refs)]
    if json_output:
        output.emit_json({"instances": [output.dump(i) for i in stopped]})
        return
    for instance in stopped:
        output.out(f"{instance.ref}: {instance.status.value}")


@app.command()
def start(
    refs: List[str] = typer.Argument(..., metavar="REF",
                                     help="Each machine to start: provider/id, name or id prefix."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Power stopped machines on again; billing resumes at their hourly price."""
    from gpucloud.client import Client

    client = Client()
    machines = [client.get(ref) for ref in refs]  # resolves names; fails before asking
    prices = [m.price_per_hour for m in machines if m.price_per_hour is not None]
    price = f"{output.usd(sum(prices))}/hour" if prices else "their hourly price"
    if not json_output:
        for machine in machines:
            output.out(f"{machine.ref}: {machine.status.value}, "
                       f"{output.usd(machine.price_per_hour)}/h when running")
    _confirm(f"Start {len(refs)} machine(s), billing {price}?", yes, json_output,
             "starting machines")
    started = [client.start(machine.ref) for machine in machines]
    if json_output:
        output.emit_json({"instances": [output.dump(i) for i in started]})
        return
    for instance in started:
        output.out(f"{instance.ref}: {instance.status.value}")
