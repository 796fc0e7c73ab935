"""The warnings a command prints on stderr before its answer.

Each warning once; the providers the bundled catalog has nothing for in one
line (catalog/gaps.py), left out under ``--quiet`` or ``[defaults]
quiet_missing = true``. Under ``--json`` none of this is printed: the
document's ``warnings`` holds them all.
"""

from __future__ import annotations

from typing import Any

import typer

from gpucloud.cli import output

QUIET = typer.Option(False, "--quiet",
                     help="Do not say which providers the bundled catalog has nothing for "
                          "([defaults] quiet_missing = true in config.toml does the same).")


def show_warnings(client: Any, quiet: bool = False) -> None:
    from gpucloud.catalog.gaps import summary

    gaps = client.catalog_gaps
    skip = {g.warning for g in gaps}
    for warning in client.warnings:
        if warning not in skip:
            output.warn(warning)
    if gaps and not (quiet or client.config.quiet_missing):
        output.warn(summary(gaps))
