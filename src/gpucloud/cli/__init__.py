"""The gpucloud command line: a thin layer over the SDK.

Start-up stays close to the bare cost of importing typer: this package
imports only typer and gpucloud's light modules (errors, gpus) at the top;
each command imports the client (httpx, pydantic, keyring, adapters) inside
its own body.
"""

from __future__ import annotations

from .app import app

from . import (  # noqa: E402,F401  (register commands)
    auth_cmds, catalog_cmds, costs_cmds, deadline_cmds, doctor_cmds, instance_cmds, job_cmds,
    queue_cmds, reconcile_cmds, worker_cmds,
)
from . import ssh_cmds  # noqa: E402,F401  (issue 11: ssh, ssh-config)


def main() -> None:
    app()


__all__ = ["app", "main"]
