"""Commands that reach a machine: ssh and ssh-config."""

from __future__ import annotations

import sys
from typing import Any, List, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import app, fail

IDENTITY = params.identity("-i")


def _api_exec(client: Any, instance: Any, command: List[str], timeout: Optional[float],
              as_json: bool) -> None:
    """A machine without sshd (Kubernetes pod, sandbox): one command through the
    provider's exec API, its output printed, its exit code passed on."""
    from gpucloud.machine.exec import DEFAULT_EXEC_TIMEOUT

    result = client.exec(instance, " ".join(command),
                         timeout=timeout if timeout is not None else DEFAULT_EXEC_TIMEOUT)
    if as_json:
        output.emit_json(_exec_json(instance, result))
    else:  # the command's own bytes, not cleaned: this is the user's program talking
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
    raise typer.Exit(result.exit_code)


def _exec_json(instance: Any, result: Any) -> dict[str, Any]:
    return {"ref": instance.ref, "command": result.command, "exit_code": result.exit_code,
            "stdout": result.stdout, "stderr": result.stderr}


@app.command("ssh")
def ssh(
    ref: str = typer.Argument(..., metavar="REF",
                              help="provider/id, the machine's name, or a unique prefix of "
                                   "its id."),
    command: Optional[List[str]] = typer.Argument(
        None, metavar="[-- CMD...]",
        help="Run this command instead of a login shell (after `--`); its exit code is "
             "gpucloud's."),
    print_only: bool = typer.Option(False, "--print",
                                    help="Print the ssh command line; run nothing."),
    identity: Optional[str] = IDENTITY,
    timeout: Optional[float] = typer.Option(
        None, "--timeout", min=1, metavar="SECONDS",
        help="End CMD after this long (default: no limit over ssh; 120 s through an exec "
             "API)."),
    json_output: bool = params.JSON,
) -> None:
    """Log in to a machine with OpenSSH, or run one command on it.

    The host, port and user come from the provider (`gpucloud get REF` shows
    them). Machines without an ssh server (Kubernetes pods, the sandbox) run
    `-- CMD` through the provider's exec API; they have no interactive shell.
    """
    from gpucloud.machine import ssh as ssh_cli
    from gpucloud.client import Client
    from gpucloud.machine.exec import reachable

    if json_output and not (print_only or command):
        fail(2, "usage", "--json needs --print or a command (`-- CMD`): a login shell is "
                         "no JSON document", None, True)
    client = Client()
    instance = client.get(ref)
    connection = reachable(instance)
    if connection.method == "api":
        if print_only or not command:
            what = "no ssh command to print" if print_only else "no interactive shell"
            fail(2, "no_ssh", f"{instance.ref} is reached through {instance.provider}'s exec "
                              f"API, not ssh: {what}",
                 f"run one command at a time: `gpucloud ssh {instance.ref} -- CMD`",
                 json_output)
        _api_exec(client, instance, command or [], timeout, json_output)
    remembered = ssh_cli.remembered_key(instance) if identity is None else None  # one read
    key = ssh_cli.pick_identity(identity, remembered)
    if remembered is not None and not remembered.is_file():
        output.err(f"note: {remembered}, the key {instance.ref} was created with, is gone: "
                   f"trying {key or 'the keys ssh picks'} instead (if the login fails, pass "
                   "--identity PATH)")
    if json_output and not print_only:  # captured, so it can be one JSON document
        from gpucloud.machine.exec import DEFAULT_EXEC_TIMEOUT

        result = client.exec(instance, " ".join(command or []), identity=key,
                             timeout=timeout if timeout is not None else DEFAULT_EXEC_TIMEOUT)
        output.emit_json(_exec_json(instance, result))
        raise typer.Exit(result.exit_code)
    argv = ssh_cli.ssh_args(instance, identity=key, batch=False, command=command or None)
    if print_only:
        if json_output:
            output.emit_json({"ref": instance.ref, "connection": output.dump(connection),
                              "argv": argv, "command": ssh_cli.shell_line(argv)})
        else:
            output.out(ssh_cli.shell_line(argv))
        return
    binary = ssh_cli.ssh_binary()
    if not command:
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os.execvp(binary, argv)  # the terminal is ssh's from here; nothing returns
    import subprocess

    try:
        done = subprocess.run([binary, *argv[1:]], check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(9, "timeout", f"{instance.ref}: the command did not finish in {timeout:g} s",
             "raise --timeout, or run it in the background (nohup ... &)", False)
    if done.returncode == ssh_cli.SSH_FAILED:  # ssh's own failure, or the command's 255
        output.err(f"hint: {ssh_cli.LOGIN_HINT}")
    raise typer.Exit(done.returncode)


@app.command("ssh-config")
def ssh_config(
    provider: Optional[str] = params.PROVIDER,
    path: str = typer.Option("~/.ssh/gpucloud/config", "--path", metavar="PATH",
                             help="The file to write (gpucloud's alone: rewritten whole)."),
    print_only: bool = typer.Option(False, "--print",
                                    help="Print the file's new content; write nothing."),
    identity: Optional[str] = IDENTITY,
    install_include: bool = typer.Option(
        False, "--install-include",
        help="Also add `Include PATH` at the top of ~/.ssh/config (never done otherwise)."),
    json_output: bool = params.JSON,
) -> None:
    """Write a `Host` entry per running machine, so `ssh NAME`, scp and editors work.

    Each entry is named after the machine (its id when it has no name or
    shares it). Machines that are gone lose their entry on the next run.
    """
    from pathlib import Path

    from gpucloud.machine import ssh_config as sc
    from gpucloud.client import Client
    from gpucloud.machine.ssh import identity_file, remembered_keys

    target = Path(path).expanduser()
    client = Client()
    instances = client.list(provider=provider)
    # --identity is every host's key; else each its own, when create's is remembered.
    keys = remembered_keys(instances) if identity is None else {}
    made, skipped = sc.entries(instances, identity_file(identity), keys)
    failed = sc.unlisted(client.warnings)
    kept = sc.kept_blocks(target, lambda p: p in failed or (provider is not None
                                                           and p != provider))
    text = sc.render(made, target, kept)
    user_config = Path(sc.USER_CONFIG).expanduser()
    include = sc.include_line(target)
    written = installed = False
    if not print_only:
        sc.write_private(target, text)
        written = True
        if install_include:
            installed = sc.install_include(user_config, target)
    included = sc.includes(user_config, target)
    if json_output:
        output.emit_json({
            "path": str(target), "written": written, "include": include, "included": included,
            "hosts": [{"host": e.host, "ref": e.ref, "hostname": e.hostname, "port": e.port,
                       "user": e.user, "identity_file": e.identity_file} for e in made],
            "skipped": [{"ref": r, "reason": why} for r, why in skipped],
            "warnings": client.warnings})
        return
    for warning in client.warnings:
        output.warn(warning)
    for ref, why in skipped:
        output.err(f"skipped {ref}: {why}")
    if print_only:
        sys.stdout.write(text)
        return
    for e in made:
        output.out(f"{e.host:<24} {e.user}@{e.hostname}:{e.port}  ({e.ref})")
    output.err(f"wrote {len(made)} host(s) to {target}")
    if installed:
        output.err(f"added `{include}` at the top of {user_config}")
    elif not included:
        output.err(f"add this line at the TOP of {user_config}, before any Host block: "
                   f"{include}  (or rerun with --install-include)")
