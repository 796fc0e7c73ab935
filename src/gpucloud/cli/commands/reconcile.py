"""`gpucloud reconcile`: repair the journal from the providers after a crash."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import app, fail
from gpucloud.cli.commands.instance import _confirm, _interactive


@app.command()
def reconcile(
    terminate_orphans: bool = typer.Option(
        False, "--terminate-orphans",
        help="Terminate orphans: machines with a launch id of this journal that it never "
             "recorded as delivered. Asks first unless --yes."),
    orphans: bool = typer.Option(
        False, "--orphans",
        help="Also list, on every provider with credentials, unclaimed machines: they "
             "carry gpucloud's launch id but no launch of this journal made them (another "
             "computer's crash, a deleted home), with their age and cost so far."),
    delete: bool = typer.Option(
        False, "--delete",
        help="With --orphans: delete the unclaimed machines. Asks first unless --yes."),
    provider: Optional[str] = params.PROVIDER,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Adopt machines of launches sent but never recorded (a crash), by their launch id.

    Launches no machine carries are marked failed once the provider's listing
    proves it; orphans and other journals' (foreign) machines are reported.
    """
    from gpucloud.client import Client

    if delete and not orphans:
        fail(2, "usage", "--delete goes with --orphans",
             "gpucloud reconcile --orphans --delete", json_output)
    for asked, what in ((terminate_orphans, "terminating orphans"),
                        (delete, "deleting unclaimed machines")):
        if asked and not yes and (json_output or not _interactive()):
            # Refuse before anything is done, like delete.
            _confirm("", yes, json_output, what)
    client = Client()
    report = client.reconcile(terminate_orphans=terminate_orphans and yes, provider=provider,
                              unclaimed=orphans, delete_unclaimed=delete and yes)
    if json_output:
        output.emit_json(output.dump(report))
        _exit_if_left(report)
        return
    _show(report)
    if delete and not yes and report.unclaimed:
        refs = [u.instance.ref for u in report.unclaimed]
        _confirm(f"Delete {len(refs)} unclaimed machine(s): {', '.join(refs)}? No journal "
                 "here launched them (they may be a colleague's). This cannot be undone.",
                 yes, json_output, "deleting unclaimed machines")
        # A second pass deletes only the machines confirmed, if still unclaimed.
        again = client.reconcile(provider=provider, unclaimed=True, delete_unclaimed=refs)
        for instance in again.terminated:
            output.out(f"deleted {instance.ref}")
        for warning in again.warnings:
            output.warn(warning)
        _exit_if_left(again)
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
    _exit_if_left(report)


def _exit_if_left(report: Any) -> None:
    if report.not_deleted:  # asked to delete, and one still bills
        raise typer.Exit(10)


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
    unclaimed = {u.instance.ref for u in report.unclaimed}
    for i in report.foreign:
        if i.ref not in unclaimed:  # shown below, with what it costs
            output.out(f"foreign {i.ref} (launch id {i.launch_id}): another journal's "
                       "machine, left alone")
    for u in report.unclaimed:
        output.out(_unclaimed_line(u))
    for i in report.terminated:
        output.out(f"terminated {i.ref}")
    if report.orphans and not report.terminated:
        output.err("terminate orphans with `gpucloud reconcile --terminate-orphans`, or "
                   "`gpucloud delete REF`")
    ended = {i.ref for i in report.terminated}
    left = [u for u in report.unclaimed if u.instance.ref not in ended]
    if left:
        from gpucloud.safety.unclaimed import total

        together = total(left)
        cost = (f"{output.usd(together)} so far together" if together is not None
                else "cost so far not all known")
        output.err(f"{len(left)} unclaimed machine(s), {cost}; delete them with "
                   "`gpucloud reconcile --orphans --delete`, or `gpucloud delete REF`")
    if not (report.adopted or report.failed or report.pending or report.orphans
            or report.foreign):
        listed = ", ".join(report.providers) or "no provider"
        output.err(f"nothing to reconcile ({listed} listed)")


def _unclaimed_line(u: Any) -> str:
    i = u.instance
    age = (f"up {output.span(timedelta(seconds=u.age_seconds))}" if u.age_seconds is not None
           else "age unknown")
    price = (f"{output.usd(u.price_per_hour)}/h ({u.price_source})"
             if u.price_per_hour is not None else "price unknown")
    cost = f"{output.usd(u.cost_so_far)} so far" if u.cost_so_far is not None else "cost unknown"
    return (f"unclaimed {i.ref} (launch id {i.launch_id}, {i.status.value}, {age}, {price}, "
            f"{cost}): no launch of this journal made it")
