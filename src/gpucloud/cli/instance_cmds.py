"""Commands that touch machines: create, list, get, delete."""

from __future__ import annotations

import sys
from typing import Any, List, Optional

import typer

from .. import pricing
from . import output, params
from .app import app, fail


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


def _unknown(plan: Any) -> str:
    """Which part of the plan's price is not known, to say next to "unknown"."""
    return f"price unknown for: {', '.join(plan.estimate.unknown)}"


def _hourly(plan: Any) -> str:
    """The price per machine for the confirmation prompt; never "-" or $0."""
    if plan.estimate.price_per_hour is None:
        return f"at an unknown price per hour ({_unknown(plan)})"
    return f"at {output.usd(plan.estimate.price_per_hour)}/hour each"


def plan_text(plan: Any) -> str:
    o = plan.offer
    lines = ["Plan:", output.estimate_text(plan.estimate)]
    per_hour = (f"{output.usd(plan.total_per_hour)}/h" if plan.total_per_hour is not None
                else f"unknown per hour ({_unknown(plan)})")
    if plan.instances > 1:
        lines.append(f"  x {plan.instances} machines = {per_hour}")
    if plan.total is not None:
        lines.append(f"  total over the window ({plan.hours_basis.replace('_', '-')}): "
                     f"{output.usd(plan.total)} USD")
    elif plan.hours_basis == "per_hour":
        lines.append(f"  total: {per_hour} until deleted (no --auto-shutdown or --max-cost)")
    else:
        lines.append(f"  total over the window: unknown ({_unknown(plan)})")
    if plan.shutdown_at:
        left = output.span(plan.shutdown_at - output.utcnow())
        lines.append(f"  deadline: {output.iso(plan.shutdown_at)} (in {left}); the reaper "
                     "terminates the machine then (`gpucloud reap`)")
    else:
        lines.append("  deadline: none (runs until deleted)")
    lines.extend(f"  note: {n}" for n in plan.notes)
    if plan.alternatives:
        lines.append("Next cheapest:")
        lines.extend(f"  {a.provider} {a.instance_type} {a.region}  {output.offer_price(a, '/h')}"
                     for a in plan.alternatives[:3])
        tried = plan.alternatives[:MAX_SHOWN_FALLBACKS]
        known = [a.price_per_hour for a in tried if not pricing.unknown_parts(a)]
        bound = ", ".join(([f"up to {output.usd(max(known))}/h"] if known else [])
                          + (["some at a price not known"] if len(known) < len(tried) else []))
        lines.append(f"  if an offer has no capacity, the next is tried (at most "
                     f"{MAX_SHOWN_FALLBACKS + 1} launches, {bound})")
    if o.simulated:
        lines.append("SANDBOX: a simulated cloud; no real GPU is created and nothing is billed.")
    return "\n".join(lines)


MAX_SHOWN_FALLBACKS = 2  # launcher.MAX_ATTEMPTS - 1, without importing the launcher


@app.command()
def create(
    gpu: str = params.GPU,
    count: int = params.COUNT,
    provider: Optional[str] = params.PROVIDER,
    region: Optional[str] = params.REGION,
    instances: int = typer.Option(1, "--instances", "-n", min=1, metavar="N",
                                  help="Number of machines, each with COUNT GPUs."),
    name: Optional[str] = typer.Option(None, "--name", metavar="NAME", help="Machine name."),
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
    json_output: bool = params.JSON,
) -> None:
    """Create a COUNT x GPU machine on the cheapest available offer.

    Shows the plan and cost estimate first, then asks for confirmation.
    """
    from ..client import Client
    from ..errors import GpuCloudError

    def show_attempt(attempt: Any) -> None:
        if json_output:
            return
        where = f"{attempt.provider} {attempt.instance_type} in {attempt.region}"
        if attempt.outcome == "launching":
            output.err(f"launching on {where}...")
        else:
            output.err(f"  {attempt.outcome}" + (f": {attempt.error}" if attempt.error else ""))

    client = Client(on_attempt=show_attempt)
    plan = client.plan(gpu=gpu, count=count, provider=provider, region=region, disk_gb=disk_gb,
                       auto_shutdown=auto_shutdown, max_cost=max_cost, spot=spot, n=instances,
                       until=until)
    if not json_output:
        for warning in client.warnings:
            output.err(f"warning: {warning}")
        output.out(plan_text(plan))
    if dry_run:
        if json_output:
            output.emit_json({"plan": output.dump(plan), "dry_run": True,
                              "warnings": client.warnings})
        else:
            output.out("dry run: nothing was created")
        return
    many = f"{instances} machines" if instances > 1 else "this machine"
    _confirm(f"Create {many} {_hourly(plan)}?",
             yes, json_output, "creating machines")
    made: list[Any] = []
    try:
        if instances == 1:
            made = [client.create(gpu=gpu, count=count, name=name, image=image, ssh_key=ssh_key,
                                  disk_gb=disk_gb, plan=plan)]
        else:
            made = client.create_many(gpu=gpu, count=count, name=name, image=image,
                                      ssh_key=ssh_key, disk_gb=disk_gb, n=instances, plan=plan)
        if wait:
            for index, instance in enumerate(made):
                if not json_output:
                    output.err(f"waiting for {instance.ref} to be running "
                               f"(at most {timeout} s)...")
                made[index] = client.wait(instance, until="running", timeout=timeout)
    except GpuCloudError as exc:
        exc.instances = made or client.last_created  # a script must learn what to clean up
        raise
    except KeyboardInterrupt:
        _interrupted(made or client.last_created, client.in_flight, json_output)
    if json_output:
        output.emit_json({"instance": output.dump(made[0]) if instances == 1 else None,
                          "instances": [output.dump(i) for i in made],
                          "plan": output.dump(plan),
                          "attempts": [output.dump(a) for a in client.last_attempts],
                          "warnings": client.warnings})
        return
    for instance in made:
        output.out(f"created {instance.ref} ({instance.status.value})")
        output.out(output.instance_text(instance))
    output.out(f"delete with: gpucloud delete {' '.join(i.ref for i in made)}")


def _interrupted(made: list[Any], in_flight: list[Any], as_json: bool) -> None:
    """Ctrl-C during create: name every machine that exists or may exist."""
    refs = " ".join(i.ref for i in made)
    parts = []
    if made:
        parts.append(f"{len(made)} machine(s) were created and are running: {refs}")
    if in_flight:
        parts.append("launch(es) in flight may have created a machine: " + ", ".join(
            f"{a.provider} launch id {a.launch_id}" for a in in_flight))
    if not parts:
        fail(130, "interrupted", "interrupted: no machine was created", None, as_json)
    hints = []
    if made:
        hints.append(f"delete with: gpucloud delete {refs}")
    for provider in sorted({a.provider for a in in_flight}):
        ids = ", ".join(a.launch_id for a in in_flight if a.provider == provider)
        hints.append(f"look for launch id {ids} in `gpucloud list --provider {provider}`")
    if not as_json:
        for instance in made:
            output.err(f"exists: {instance.ref} (launch id {instance.launch_id or '-'})")
        for attempt in in_flight:
            output.err(f"may exist: {attempt.provider} {attempt.instance_type} in "
                       f"{attempt.region} (launch id {attempt.launch_id})")
    fail(130, "interrupted", "interrupted: " + "; ".join(parts), "; ".join(hints), as_json,
         {"instances": [output.dump(i) for i in made],
          "in_flight": [output.dump(a) for a in in_flight]})


@app.command("list")
def list_(
    provider: Optional[str] = params.PROVIDER,
    json_output: bool = params.JSON,
) -> None:
    """List machines on every provider with credentials."""
    from ..client import Client

    client = Client()
    instances = client.list(provider=provider)
    if json_output:
        output.emit_json({"instances": [output.dump(i) for i in instances],
                          "warnings": client.warnings})
        return
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
    from ..client import Client

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
    refs: List[str] = typer.Argument(..., metavar="REF",
                                     help="Each machine to delete: provider/id, name or id "
                                          "prefix."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Delete (terminate) machines. Their disks are gone for good."""
    from ..client import Client
    from ..errors import GpuCloudError, exit_code_for

    client = Client()
    # Every name is resolved before anything is asked or deleted: an ambiguous
    # or unknown one (exit 2 / 5) deletes nothing, not just the refs before it.
    named = _refs_of(client, refs)
    shown = ", ".join(ref if typed == ref else f"{ref} ({typed})" for ref, typed in named.items())
    _confirm(f"Delete {shown}? This cannot be undone.", yes, json_output, "deleting machines")
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
        if len(failures) > 1:
            first.message = (f"{len(failures)} of {len(named)} deletes failed; "
                             f"first: {failures[0][0]}: {first.message}")
        fail(exit_code_for(first), first.code, first.message, first.hint, json_output,
             {"deleted": deleted, "failed": failed, "warnings": warnings})
    if json_output:
        output.emit_json({"deleted": deleted, "failed": [], "warnings": warnings})


def _refs_of(client: Any, refs: List[str]) -> dict[str, str]:
    """provider/id of each machine (once each, in order) -> the reference the user
    gave for it. Malformed provider/ids fail before any lookup; names and id
    prefixes are looked up, all of them before the caller acts on any."""
    from ..ops import split_ref
    from ..refs import needs_lookup

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
    from ..client import Client

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
    from ..client import Client

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
