"""The gpucloud command line: a thin layer over the SDK.

Start-up stays close to the bare cost of importing typer: this package
imports only typer and gpucloud's light modules (errors, gpus) at the top;
each command imports the client (httpx, pydantic, keyring, adapters) inside
its own body.
"""

from __future__ import annotations

from .app import app

from . import auth_cmds, catalog_cmds, instance_cmds  # noqa: E402,F401  (register commands)
from . import costs_cmds  # noqa: E402,F401  (registers `costs`)


def main() -> None:
    app()


__all__ = ["app", "main"]
