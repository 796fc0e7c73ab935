"""Running a command on a machine: Client.exec and AsyncClient.exec.

A machine is reached the way its ``Instance.connection`` says: ``ssh`` runs
the system OpenSSH client (ssh.py), ``api`` goes through the provider's own
exec API (``Provider.exec_command``: Kubernetes pods, the sandbox). Nothing
long-lived is copied to the machine either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from gpucloud.models import ExecResult, Instance

    Ref = Union[Instance, str]

DEFAULT_EXEC_TIMEOUT = 120.0  # seconds a command may run before it is cut off


def reachable(instance: Instance) -> Any:
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


def run(adapter: Any, instance: Instance, command: str, timeout: float,
        identity: str | None = None, journal: Any = None) -> ExecResult:
    """Blocking: run `command` on `instance` through its connection; over ssh
    without `identity`, with the key create used for it (ssh.login_identity)."""
    connection = reachable(instance)
    if connection.method == "api":
        result: ExecResult = adapter.exec_command(instance.id, command, timeout)
        return result
    from gpucloud.machine.ssh import run_ssh

    return run_ssh(instance, command, timeout, identity=identity, journal=journal)


class ExecMethods:
    _engine: Any
    _ctx: Any

    def _run(self, op: Any) -> Any:  # pragma: no cover - Client provides it
        raise NotImplementedError

    def exec(self, ref: Ref, command: str, *, timeout: float = DEFAULT_EXEC_TIMEOUT,
             identity: str | None = None) -> ExecResult:
        """Run a shell command on the machine; its exit code, stdout and stderr.
        `identity` is the private key for SSH (default: the private half of
        the .pub file create used for this machine, when this computer created
        it and that file exists; else the one beside ~/.ssh/id_ed25519.pub or
        id_rsa.pub; else ssh's own choice). `timeout` (seconds) ends a command
        that runs longer with WaitTimeoutError."""
        instance: Instance = self._run(self._engine.get(ref))
        return run(self._ctx.adapter(instance.provider), instance, command, timeout, identity,
                   self._ctx.journal)


class AsyncExecMethods:
    _engine: Any
    _ctx: Any

    async def _run(self, op: Any) -> Any:  # pragma: no cover - AsyncClient provides it
        raise NotImplementedError

    async def exec(self, ref: Ref, command: str, *, timeout: float = DEFAULT_EXEC_TIMEOUT,
                   identity: str | None = None) -> ExecResult:
        import asyncio

        instance: Instance = await self._run(self._engine.get(ref))
        return await asyncio.to_thread(run, self._ctx.adapter(instance.provider), instance,
                                       command, timeout, identity, self._ctx.journal)
