"""Option types shared by the commands.

Every option shows a metavar that says what it wants (GPU, N, USD, DURATION,
GB, SECONDS), never a type name: tests/cli/test_help.py checks them all.
"""

from __future__ import annotations

from typing import Any

import typer

from gpucloud.errors import UnknownGPUError
from gpucloud.catalog.gpus import parse_gpu


def gpu_param(value: str) -> str:
    """GPU names: aliases resolve ("h100", "H100 80GB"); typos get suggestions."""
    try:
        return parse_gpu(value)
    except UnknownGPUError as exc:
        raise typer.BadParameter(f"{exc.message}: {exc.hint}") from None


GPU = typer.Option(..., "--gpu", "-g", parser=gpu_param, metavar="GPU",
                   help="GPU model, e.g. h100, a100-80gb, l40s (`gpucloud gpus` lists them).")
COUNT = typer.Option(1, "--count", "-c", min=1, metavar="N", help="GPUs on one machine.")
PROVIDER = typer.Option(None, "--provider", "-p", metavar="PROVIDER", help="Only this provider.")
REGION = typer.Option(None, "--region", "-r", metavar="REGION", help="Only this region.")
JSON = typer.Option(False, "--json", help="One JSON document on stdout; never prompts.")
PROJECT = typer.Option(None, "--project", metavar="NAME",
                       help="The project this is for (a-z, 0-9, -, _, .): journaled with "
                            "the launch, and held to [budget.projects] NAME.")


def identity(*short: str) -> Any:
    """--identity PATH for commands that log in over ssh (`-i` where free)."""
    return typer.Option(
        None, "--identity", *short, metavar="PATH",
        help="Private key to log in with (default: the private half of the .pub file create "
             "used for the machine, when this computer created it; else the one beside "
             "~/.ssh/id_ed25519.pub or id_rsa.pub; else ssh's own choice).")
