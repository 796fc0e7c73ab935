"""Reaching a machine with the system OpenSSH client."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import ExecResult, Instance


def ssh_args(instance: Instance, *, identity: str | None = None) -> list[str]:
    """The `ssh` command line (without the remote command) for an ssh connection."""
    connection = instance.connection
    assert connection is not None and connection.method == "ssh" and connection.host
    args = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new"]
    if connection.port and connection.port != 22:
        args += ["-p", str(connection.port)]
    if identity:
        args += ["-i", identity, "-o", "IdentitiesOnly=yes"]
    user = f"{connection.user}@" if connection.user else ""
    return args + [f"{user}{connection.host}"]


def run_ssh(instance: Instance, command: str, timeout: float, *,
            identity: str | None = None) -> ExecResult:
    from .errors import ConfigurationError, WaitTimeoutError
    from .models import ExecResult

    if shutil.which("ssh") is None:
        raise ConfigurationError("no `ssh` client on this machine",
                                 hint="install OpenSSH (e.g. apt install openssh-client)")
    try:
        done = subprocess.run([*ssh_args(instance, identity=identity), "--", command],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise WaitTimeoutError(f"{instance.ref}: `{command}` did not finish in {timeout:g} s",
                               hint="raise timeout= or run it in the background") from exc
    return ExecResult(command=command, exit_code=done.returncode, stdout=done.stdout,
                      stderr=done.stderr)
