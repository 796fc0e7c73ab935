"""Reaching a machine with the system OpenSSH client.

Only command lines are built here; OpenSSH does the connecting, with the
user's own keys, agent and ~/.ssh/config. Nothing is copied to the machine.

Host keys: every machine gets its own known_hosts entry under a
``HostKeyAlias`` (``gpucloud-<provider>-<id>``), accepted on first use
(``StrictHostKeyChecking=accept-new``). Cloud addresses and proxy ports are
reused from one renter to the next, so a key remembered for ``ip:port``
would fail a later machine at the same address for no fault of its own,
while a key remembered for the machine still catches a change on it.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from gpucloud.models import Connection, ExecResult, Instance
    from gpucloud.safety.journal import Journal

CONNECT_TIMEOUT = 15  # seconds; a machine that does not answer fails fast, not at `timeout`


def host_key_alias(instance: Instance) -> str:
    return "gpucloud-" + re.sub(r"[^A-Za-z0-9_.-]", "-", f"{instance.provider}-{instance.id}")


def default_identity() -> str | None:
    """The private key beside the public key `create` uses by default
    (~/.ssh/id_ed25519.pub, else id_rsa.pub), when both files exist; else None
    and ssh chooses (agent, ~/.ssh/config, its own defaults)."""
    from gpucloud.core.context import DEFAULT_KEYS

    for public in DEFAULT_KEYS:
        public_path = Path(public).expanduser()
        private = public_path.with_suffix("")
        if public_path.is_file() and private.is_file():
            return str(private)
    return None


def identity_file(identity: str | None) -> str | None:
    """The key to pass with -i: `identity` (a private key, or a .pub whose
    private half sits beside it), else the default one."""
    from gpucloud.errors import SpecError

    if identity is None:
        return default_identity()
    if not usable_path(identity):
        raise SpecError("the identity path holds a quote or a control character",
                        hint="rename the key file, or give a path without them")
    path = Path(identity).expanduser()
    if path.suffix == ".pub" and path.with_suffix("").is_file():
        path = path.with_suffix("")
    if not path.is_file():
        raise SpecError(f"identity file not found: {path}",
                        hint="pass the private key that matches the public key the machine "
                             "was created with (--identity PATH)")
    return str(path)


def remembered_key(instance: Instance, journal: Journal | None = None) -> Path | None:
    """The private key beside the public key file `create` sent for this
    machine, as journaled on this computer (whether or not it still exists);
    None for a machine launched elsewhere, with a registered key name, or a
    journal that cannot be read (the default key is tried then, as before)."""
    from gpucloud.errors import StateError

    try:
        public = _journal(journal).ssh_key_path(instance.provider, instance.id)
    except StateError:
        return None
    return private_half(public)


# ssh(1) exits 255 on its own errors: no route, refused connection, a changed
# host key, a refused key. (A remote command that exits 255 looks the same.)
SSH_FAILED = 255
LOGIN_HINT = ("ssh failed (exit 255: no connection, or the login was refused): if the "
              "machine was created with another key, pass its private key with "
              "--identity PATH; `gpucloud ssh REF` shows ssh's own messages")


def private_half(public: str | None) -> Path | None:
    """The private key beside a journaled .pub path; None when the name says
    nothing (no .pub) or the path could not be written into an ssh_config."""
    if not public or not public.endswith(".pub") or not usable_path(public):
        return None
    return Path(public).with_suffix("")


def usable_path(path: str) -> bool:
    """No quote and no control character: the path goes into ssh_config files
    (`IdentityFile "..."`), where either would end the value or the line."""
    return '"' not in path and not any(ord(c) < 32 or ord(c) == 127 for c in path)


def ssh_escape(word: str) -> str:
    """A literal word for ssh, which expands %-tokens in IdentityFile/-i and
    HostName (an IPv6 zone as in fe80::1%eth0, a % in a key's path)."""
    return word.replace("%", "%%")


def remembered_keys(instances: Iterable[Instance],
                    journal: Journal | None = None) -> dict[str, str]:
    """ref -> the private key create used, for each machine whose key this
    computer remembers and still has (one journal query per provider)."""
    from gpucloud.errors import StateError

    journal = _journal(journal)
    by_provider: dict[str, list[Instance]] = {}
    for i in instances:
        by_provider.setdefault(i.provider, []).append(i)
    found: dict[str, str] = {}
    for provider, group in by_provider.items():
        try:
            records = journal.by_instances(provider, [i.id for i in group])
        except StateError:
            return {}  # an unreadable journal: every machine gets the default key
        for i in group:
            private = private_half(records[i.id].ssh_key_path if i.id in records else None)
            if private is not None and private.is_file():
                found[i.ref] = str(private)
    return found


def login_identity(instance: Instance, identity: str | None,
                   journal: Journal | None = None) -> str | None:
    """The key to log in to `instance` with (see pick_identity)."""
    return pick_identity(identity, None if identity is not None
                         else remembered_key(instance, journal))


def pick_identity(identity: str | None, remembered: Path | None) -> str | None:
    """`identity` when given (see identity_file), else `remembered` (the private
    half of the key create used, from remembered_key) when that file still
    exists, else the default one."""
    if identity is not None:
        return identity_file(identity)
    if remembered is not None and remembered.is_file():
        return str(remembered)
    return default_identity()


def _journal(journal: Journal | None) -> Journal:
    """The journal given, else this computer's (the team's in team mode: the
    key file a launch sent is a path on the computer that made it)."""
    if journal is not None:
        return journal
    from gpucloud.config.settings import load_config
    from gpucloud.safety.state_store import open_journal

    return open_journal(load_config())


def ssh_binary() -> str:
    from gpucloud.errors import ConfigurationError

    found = shutil.which("ssh")
    if found is None:
        raise ConfigurationError("no `ssh` client on this machine (OpenSSH is needed)",
                                 hint="install OpenSSH: apt install openssh-client, "
                                      "brew install openssh, or Windows' OpenSSH client")
    return found


def ssh_args(instance: Instance, *, identity: str | None = None, batch: bool = True,
             command: list[str] | None = None) -> list[str]:
    """The `ssh` command line for an ssh connection. `identity` is used as
    given (see identity_file). `batch`: never prompt (scripts; a locked key
    or an unknown password fails instead of hanging). `command` follows a
    ``--``; ssh joins its words with spaces for the remote shell, as always."""
    from gpucloud.models import ssh_endpoint_ok

    connection: Connection | None = instance.connection
    if connection is None or connection.method != "ssh" \
            or not ssh_endpoint_ok(connection.host, connection.port, connection.user):
        # Checked again here, where the words become an argv: nothing else stands
        # between an Instance built by hand and `ssh -oProxyCommand=...`.
        raise ValueError(f"{instance.ref} has no usable ssh connection")
    args = ["ssh"]
    if connection.port and connection.port != 22:
        args += ["-p", str(connection.port)]
    if identity:
        args += ["-i", ssh_escape(identity), "-o", "IdentitiesOnly=yes"]
    args += ["-o", "StrictHostKeyChecking=accept-new",
             "-o", f"HostKeyAlias={host_key_alias(instance)}"]
    if batch:
        # LogLevel=ERROR: ssh's own notices ("Warning: Permanently added ... to the
        # list of known hosts.", logged at INFO) stay out of the command's stderr;
        # its errors (a refused key, a changed host key) do not.
        args += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
                 "-o", "LogLevel=ERROR"]
    args.append(f"{connection.user}@{connection.host}")
    if command:
        args += ["--", *command]
    return args


def shell_line(args: list[str]) -> str:
    """The command line as one could paste it into a POSIX shell."""
    return shlex.join(args)


def run_ssh(instance: Instance, command: str, timeout: float, *,
            identity: str | None = None, journal: Journal | None = None,
            stdin: str | None = None) -> ExecResult:
    """Blocking: run `command` through the remote shell; ssh's own failures
    (unreachable, key refused) are exit code 255 with ssh's message in stderr,
    as OpenSSH reports them. The key: see login_identity. ``stdin``: text the
    command reads (what must never be on a command line: a job's secrets)."""
    from gpucloud.errors import WaitTimeoutError
    from gpucloud.models import ExecResult

    binary = ssh_binary()
    args = ssh_args(instance, identity=login_identity(instance, identity, journal),
                    command=[command])
    try:
        done = subprocess.run([binary, *args[1:]], capture_output=True, text=True,
                              input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                              timeout=timeout, check=False, errors="replace")
    except subprocess.TimeoutExpired as exc:
        raise WaitTimeoutError(f"{instance.ref}: `{command}` did not finish in {timeout:g} s",
                               hint="raise timeout= or run it in the background "
                                    "(nohup ... &)") from exc
    return ExecResult(command=command, exit_code=done.returncode, stdout=done.stdout,
                      stderr=ssh_notices_removed(done.stderr))


# OpenSSH's own INFO-level notice, removed as well in case an `ssh` wrapper on
# PATH prints it despite LogLevel=ERROR.
_SSH_NOTICE = re.compile(r"^Warning: Permanently added .* to the list of known hosts\.\r?$")


def ssh_notices_removed(stderr: str) -> str:
    """The remote command's stderr without ssh's own host-key notices."""
    if "Warning: Permanently added" not in stderr:
        return stderr
    return "".join(line for line in stderr.splitlines(keepends=True)
                   if not _SSH_NOTICE.match(line.rstrip("\n")))


def message_line(result: ExecResult) -> str:
    """The line that explains a failed command: the first of its stderr (else
    stdout) that says something. OpenSSH frames its loudest errors ("REMOTE HOST
    IDENTIFICATION HAS CHANGED") in lines of `@`: the frame says nothing."""
    for line in (result.stderr or result.stdout).splitlines():
        words = line.strip().strip("@").strip()
        if words:
            return words
    return f"exit code {result.exit_code}"


__all__ = ["CONNECT_TIMEOUT", "default_identity", "host_key_alias", "identity_file",
           "login_identity", "message_line", "pick_identity", "remembered_key", "remembered_keys",
           "run_ssh", "shell_line", "ssh_args", "ssh_binary"]
