"""Commands for network volumes: volumes list|create|delete."""

from __future__ import annotations

from typing import Any, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import HelpGroup, app
from gpucloud.cli.commands.instance import _confirm

volumes_app = typer.Typer(cls=HelpGroup, no_args_is_help=True,
                          help="List, create and delete network volumes (billed by the "
                               "GB-month, machine or not).")
app.add_typer(volumes_app, name="volumes")

HEADERS = ("REF", "NAME", "SIZE", "REGION", "$/GB-MONTH", "$/MONTH", "ATTACHED")


def _money(value: Any, places: int = 2) -> str:
    # An unknown rate is said, never shown as a price of 0.
    return output.usd(value, places) if value is not None else "unknown"


def volumes_table(volumes: list[Any]) -> str:
    return output.table(
        HEADERS,
        [[v.ref + (" (simulated)" if v.simulated else ""), v.name, f"{v.size_gb} GB",
          v.region or "-", _money(v.price_per_gb_month, 3), _money(v.price_per_month),
          ", ".join(v.attached_to) or "-"] for v in volumes],
        shrink=(1, 6), keep=(0,))


@volumes_app.command("list")
def list_volumes(
    provider: Optional[str] = params.PROVIDER,
    json_output: bool = params.JSON,
) -> None:
    """List network volumes on every provider in scope that has them."""
    from gpucloud.client import Client

    client = Client()
    found = client.volumes(provider=provider)
    if json_output:
        output.emit_json({"volumes": [output.dump(v) for v in found],
                          "warnings": client.warnings})
        return
    for warning in client.warnings:
        output.warn(warning)
    if found:
        output.out(volumes_table(found))
    else:
        output.err("no volumes")


@volumes_app.command("create")
def create(
    name: str = typer.Argument(..., metavar="NAME", help="The volume's name (a job mounts "
                                                         "it by this name)."),
    size_gb: int = typer.Option(..., "--size-gb", "-s", min=1, metavar="GB",
                                help="Size in GB; billed per GB-month until deleted."),
    region: Optional[str] = typer.Option(
        None, "--region", "-r", metavar="REGION",
        help="Where it lives: it mounts only on machines in this region."),
    provider: Optional[str] = params.PROVIDER,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Create a network volume: shows its monthly cost first, then asks.

    It bills by the GB-month from now until it is deleted, whether or not a
    machine uses it.
    """
    from gpucloud.client import Client

    client = Client()
    planned = client.plan_volume(name, size_gb, region=region, provider=provider)
    monthly = planned.price_per_month
    if not json_output:
        output.err(f"volume {name}: {size_gb} GB on {planned.provider} in {planned.region}, "
                   f"{_money(planned.price_per_gb_month, 3)}/GB-month: "
                   f"{_money(monthly) if monthly is not None else 'an unknown amount'} a month "
                   "until deleted, machine or not"
                   + (" (simulated: nothing is billed)" if planned.simulated else ""))
    _confirm(f"Create volume {name} ({size_gb} GB)?", yes, json_output, "creating a volume")
    volume = client.create_volume(name, size_gb, region=planned.region,
                                  provider=planned.provider)
    if json_output:
        output.emit_json({"volume": output.dump(volume), "warnings": client.warnings})
        return
    for warning in client.warnings:
        output.warn(warning)
    output.out(f"created {volume.ref} ({volume.name}, {volume.size_gb} GB, "
               f"{volume.region or 'region unknown'}); delete with: "
               f"gpucloud volumes delete {volume.ref}")


@volumes_app.command("delete")
def delete(
    ref: str = typer.Argument(..., metavar="VOLUME",
                              help="provider/id (REF in `gpucloud volumes list`) or its name."),
    force: bool = typer.Option(False, "--force",
                               help="Delete it even while a machine uses it."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Delete a network volume: its data is gone for good, and its billing ends.

    A volume a machine still uses is refused unless --force.
    """
    from gpucloud.client import Client

    client = Client()
    volume = client.volume(ref)
    if volume.attached_to and not force:
        client.delete_volume(volume)  # refuses, naming the machines (exit 2)
    _confirm(f"Delete volume {volume.ref} ({volume.name}, {volume.size_gb} GB)? Its data is "
             "gone for good.", yes, json_output, "deleting a volume")
    client.delete_volume(volume, force=force)
    if json_output:
        output.emit_json({"deleted": volume.ref, "warnings": client.warnings})
        return
    for warning in client.warnings:
        output.warn(warning)
    output.out(f"deleted {volume.ref} ({volume.name})")

