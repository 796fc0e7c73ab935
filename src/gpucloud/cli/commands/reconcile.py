"""`gpucloud reconcile`: repair the journal from the providers after a crash."""

from __future__ import annotations

from typing import Any, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import app
from gpucloud.cli.commands.instance import _confirm, _interactive


@app.command()
def reconcile(
    terminate_orphans: bool = typer.Option(
        False, "--terminate-orphans",
        help="Terminate orphans: machines with a launch id of this journal that it never "
             "recorded as delivered. Asks first unless --yes."),
    provider: Optional[str] = params.PROVIDER,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Adopt machines of launches sent but never recorded (a crash), by their launch id.

    Launches no machine carries are marked failed once the provider's listing
    proves it; orphans and other journals' (foreign) machines are reported.
    """
    from gpucloud.client import Client

    if terminate_orphans and not yes and (json_output or not _interactive()):
        # Refuse before anything is done, like delete.
        _confirm("", yes, json_output, "terminating orphans")
    client = Client()
    report = client.reconcile(terminate_orphans=terminate_orphans and yes, provider=provider)
    if json_output:
        output.emit_json(output.dump(report))
        return
    _show(report)
    if terminate_orphans and not yes and report.orphans:
        refs = [o.instance.ref for o in report.orphans]
        _confirm(f"Terminate {len(refs)} orphan(s): {', '.join(refs)}? This cannot be undone.",
                 yes, json_output, "terminating orphans")
        # A second pass terminates only the machines confirmed, if still orphans.
        report = client.reconcile(terminate_orphans=refs, provider=provider)
        for instance in report.terminated:
            output.out(f"terminated {instance.ref}")
        for warning in report.warnings:
            output.warn(warning)


def _show(report: Any) -> None:
    for warning in report.warnings:
        output.warn(warning)
    for i in report.adopted:
        deadline = f", deadline {output.iso(i.shutdown_at)}" if i.shutdown_at else ""
        output.out(f"adopted {i.ref} (launch id {i.launch_id}, {i.status.value}{deadline})")
    for intent in report.failed:
        output.out(f"failed  {intent.provider} launch id {intent.launch_id}: {intent.reason}")
    for intent in report.pending:
        output.out(f"pending {intent.provider} launch id {intent.launch_id}: {intent.reason}")
    for orphan in report.orphans:
        i = orphan.instance
        was = (f"delivered as {orphan.journal_instance_id}"
               if orphan.journal_status == "delivered" else orphan.journal_status)
        price = (f"{output.usd(i.price_per_hour)}/h" if i.price_per_hour is not None
                 else "price unknown")
        output.out(f"orphan  {i.ref} (launch id {i.launch_id}, journal says {was}; "
                   f"{i.status.value}, {price})")
    for i in report.foreign:
        output.out(f"foreign {i.ref} (launch id {i.launch_id}): another journal's machine, "
                   "left alone")
    for i in report.terminated:
        output.out(f"terminated {i.ref}")
    if report.orphans and not report.terminated:
        output.err("terminate orphans with `gpucloud reconcile --terminate-orphans`, or "
                   "`gpucloud delete REF`")
    if not (report.adopted or report.failed or report.pending or report.orphans
            or report.foreign):
        listed = ", ".join(report.providers) or "no provider"
        output.err(f"nothing to reconcile ({listed} listed)")
