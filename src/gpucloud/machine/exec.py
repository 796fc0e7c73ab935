"""Running a command on a machine (``Client.exec``, ``gpucloud ssh REF -- CMD``).

A machine is reached the way its ``Instance.connection`` says: ``ssh`` runs
the system OpenSSH client (ssh.py), ``api`` goes through the provider's own
exec API (``Provider.exec_command``: Kubernetes pods, the sandbox). Nothing
long-lived is copied to the machine either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.models import Connection, ExecResult, Instance
    from gpucloud.providers.base import Provider
    from gpucloud.safety.journal import Journal

DEFAULT_EXEC_TIMEOUT = 120.0  # seconds a command may run before it is cut off


def reachable(instance: Instance) -> Connection:
    """The machine's connection, or a clear error (exit 2) while it cannot be
    reached: no address yet (pending), or a machine stopped, failed or gone
    (its last address may already be someone else's machine)."""
    from gpucloud.errors import SpecError
    from gpucloud.models import InstanceStatus, ssh_endpoint_ok

    gone = (InstanceStatus.STOPPED, InstanceStatus.FAILED, InstanceStatus.TERMINATING,
            InstanceStatus.TERMINATED)
    if instance.status in gone:
        hint = (f"start it first: `gpucloud start {instance.ref}`"
                if instance.status is InstanceStatus.STOPPED
                else "`gpucloud list` shows the machines that are up")
        raise SpecError(f"{instance.ref} is {instance.status.value}: nothing to connect to",
                        hint=hint)
    if instance.connection is None:
        raise SpecError(
            f"{instance.ref} has no address yet (status {instance.status.value})",
            hint=f"wait until it runs: `gpucloud get {instance.ref}` shows its status and "
                 "connection (create --wait returns once it runs)")
    c = instance.connection
    if c.method == "ssh" and not ssh_endpoint_ok(c.host, c.port, c.user):
        # Adapters never build one; an Instance made by hand (model_construct) can.
        raise SpecError(f"{instance.ref} has no usable ssh address: its host or user could "
                        "pass for an ssh option", hint="a hostname or IP address and a plain "
                        "user name are needed; fetch the machine again with client.get")
    return c


def run(adapter: Provider, instance: Instance, command: str, timeout: float,
        identity: str | None = None, journal: Journal | None = None) -> ExecResult:
    """Blocking: run `command` on `instance` through its connection; over ssh
    without `identity`, with the key create used for it (ssh.login_identity)."""
    connection = reachable(instance)
    if connection.method == "api":
        result: ExecResult = adapter.exec_command(instance.id, command, timeout)
        return result
    from gpucloud.machine.ssh import run_ssh

    return run_ssh(instance, command, timeout, identity=identity, journal=journal)


def run_on(ctx: ClientContext, instance: Instance, command: str, timeout: float,
           identity: str | None = None) -> ExecResult:
    """Blocking: `run` with the machine's adapter and the journal of `ctx`."""
    return run(ctx.adapter(instance.provider), instance, command, timeout, identity,
               ctx.journal)


__all__ = ["DEFAULT_EXEC_TIMEOUT", "reachable", "run", "run_on"]
