"""`gpucloud auth`: log in (verify, then keep in the keyring), status, log out."""

from __future__ import annotations

import os
import sys

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import HelpGroup, app, fail

auth = typer.Typer(cls=HelpGroup,
                   help="Manage provider credentials (kept in the system keyring).",
                   no_args_is_help=True)
app.add_typer(auth, name="auth")


def _kind(provider: str) -> str:
    from gpucloud.client import Client

    known = Client(use_keyring=False).provider(provider)  # an unknown name fails here
    if not known.has_adapter:
        fail(3, "configuration", f"{provider} has catalog prices only in this version",
             "its adapter is not available yet", False)
    return known.auth_kind


def _stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def _read(provider: str, kind: str, from_env: bool, as_json: bool) -> str:
    from gpucloud.config.credentials import env_vars

    names = env_vars(provider, kind)
    if from_env:
        values = [os.environ.get(n, "").strip() for n in names]
        if not all(values):
            missing = [n for n, v in zip(names, values) if not v]
            fail(3, "credentials", f"{' and '.join(missing)} not set",
                 f"export {' and '.join(names)}, or log in without --from-env", as_json)
        return ":".join(values)
    if not _stdin_is_terminal():
        # A pipe or a file: no hidden prompt is possible (getpass would warn that
        # it echoes), so the secret is read as data.
        return _from_stdin(provider, kind, as_json)
    if as_json:  # --json never prompts
        fail(8, "confirmation_required", "a prompt is needed to read the credential",
             "pass --from-env, or pipe the credential in on standard input", as_json)
    if kind == "oauth2":
        client_id = typer.prompt(f"{provider} client id", err=True).strip()
        secret = typer.prompt(f"{provider} client secret", hide_input=True, err=True).strip()
        return f"{client_id}:{secret}"
    return typer.prompt(f"{provider} API key", hide_input=True, err=True).strip()


def _from_stdin(provider: str, kind: str, as_json: bool) -> str:
    """One line (the API key), or for OAuth2 two lines "id\\nsecret" or one "id:secret"."""
    lines = [line.strip() for line in sys.stdin.read().splitlines() if line.strip()]
    if kind == "oauth2":
        if len(lines) >= 2 and ":" not in lines[0]:
            return f"{lines[0]}:{lines[1]}"
        if lines and ":" in lines[0]:
            return lines[0]
        fail(2, "usage", f"no {provider} client id and secret on standard input",
             f"pipe them in as two lines (id, then secret) or as id:secret, e.g. "
             f"`printf '%s\\n%s\\n' \"$ID\" \"$SECRET\" | gpucloud auth login {provider}`, "
             "or use --from-env", as_json)
    if not lines:
        fail(2, "usage", f"no {provider} API key on standard input (it is not a terminal)",
             f"pipe the key in, e.g. `printf '%s\\n' \"$KEY\" | gpucloud auth login {provider}`, "
             "or use --from-env, or run it in a terminal for a hidden prompt", as_json)
    return lines[0]


@auth.command()
def login(
    provider: str = typer.Argument(..., metavar="PROVIDER", help="Provider name, e.g. lambda."),
    from_env: bool = typer.Option(False, "--from-env",
                                  help="Take the credential from GPUCLOUD_* variables."),
    json_output: bool = params.JSON,
) -> None:
    """Verify a credential with a cheap read, then keep it in the system keyring.

    In a terminal the secret is asked for with a hidden prompt; otherwise it is
    read from standard input (one line; for OAuth2 "id" and "secret" on two
    lines, or "id:secret").
    """
    from gpucloud.client import Client
    from gpucloud.config.credentials import store_credential

    kind = _kind(provider)
    if kind == "none":
        fail(2, "usage", f"{provider} needs no credentials", None, json_output)
    if kind == "kubeconfig":
        from gpucloud.config.credentials import how_to_set

        fail(2, "usage", f"{provider} takes its credentials from a kubeconfig file, not the "
             "keyring", how_to_set(provider, kind), json_output)
    if kind == "hosts":
        from gpucloud.config.credentials import how_to_set

        fail(2, "usage", f"{provider} has nothing to log in to: its machines are listed in "
             "config.toml, each with its ssh key", how_to_set(provider, kind), json_output)
    value = _read(provider, kind, from_env, json_output)
    expires = Client(credentials={provider: value}, use_keyring=False).verify(provider)
    backend = store_credential(provider, kind, value)
    warnings = [backend.warning] if backend.warning else []
    if json_output:
        output.emit_json({"provider": provider, "verified": True, "stored": "keyring",
                          "keyring_backend": backend.name, "plaintext": backend.plaintext,
                          "token_expires_at": output.iso(expires), "warnings": warnings})
        return
    output.out(f"{provider}: credential verified and stored in the system keyring "
               f"({backend.name})")
    for warning in warnings:
        output.warn(warning)


@auth.command()
def status(json_output: bool = params.JSON) -> None:
    """Per provider: where the credential comes from and whether it works.

    Exits 4 when a configured credential does not work.
    """
    from gpucloud.client import Client
    from gpucloud.config.credentials import NO_KEYRING_ADVICE, keyring_backend

    client = Client()
    statuses = client.auth_status()
    failing = [s.provider for s in statuses if s.works is False]
    backend = None if client.keyring_problem else keyring_backend()
    warnings = [backend.warning] if backend is not None and backend.warning else []
    if json_output:
        output.emit_json({"providers": [output.dump(s) for s in statuses],
                          "keyring_problem": client.keyring_problem,
                          "keyring_backend": backend.name if backend else None,
                          "warnings": warnings})
        if failing:
            raise typer.Exit(4)
        return
    rows = []
    for s in statuses:
        works = {True: "yes", False: "NO", None: "-"}[s.works]
        note = s.error or s.hint or ""
        rows.append([s.provider, s.source or "not configured", works,
                     output.iso(s.token_expires_at) or "-", note])
    output.out(output.table(["PROVIDER", "CREDENTIAL FROM", "WORKS", "TOKEN EXPIRES", "NOTE"],
                            rows, shrink=(4,)))
    if client.keyring_problem:
        output.note(f"note: the system keyring is unusable here ({client.keyring_problem}): "
                    + NO_KEYRING_ADVICE)
    for warning in warnings:
        output.warn(warning)
    if failing:
        output.err(f"error: the credential for {', '.join(failing)} does not work")
        raise typer.Exit(4)


@auth.command()
def logout(
    provider: str = typer.Argument(..., metavar="PROVIDER", help="Provider name."),
    json_output: bool = params.JSON,
) -> None:
    """Remove a provider's credential from the system keyring."""
    from gpucloud.config.credentials import delete_credential, env_vars

    kind = _kind(provider)
    removed = delete_credential(provider, kind)
    still = [n for n in env_vars(provider, kind) if os.environ.get(n)]
    if json_output:
        output.emit_json({"provider": provider, "removed": removed,
                          "environment_still_set": still})
        return
    output.out(f"{provider}: " + ("removed from the keyring" if removed
                                  else "nothing stored in the keyring"))
    if still:
        output.err(f"note: {', '.join(still)} still set in this environment")


@auth.command()
def token(
    provider: str = typer.Argument(..., metavar="PROVIDER",
                                   help="A Kubernetes provider: kubernetes or coreweave."),
    service_account: str = typer.Option(..., "--service-account", "-s", metavar="NAME",
                                        help="The service account the token is for."),
    namespace: str = typer.Option(None, "--namespace", "-n", metavar="NAMESPACE",
                                  help="Its namespace (default: the kubeconfig context's)."),
    ttl: str = typer.Option("1h", "--ttl", metavar="DURATION",
                            help="Lifetime, at least 10m (the API's minimum), e.g. 1h."),
    json_output: bool = params.JSON,
) -> None:
    """Mint a short-lived service-account token (Kubernetes TokenRequest API).

    Prints the token alone on stdout (with --json: {"token", "expires_at", ...}),
    so a CI job or a worker gets a credential that expires by itself.
    """
    from gpucloud.client import Client

    minted = Client().provider(provider).service_account_token(
        service_account, namespace=namespace, ttl=ttl)
    secret = minted.token.get_secret_value()
    if json_output:
        output.emit_json({"provider": minted.provider, "namespace": minted.namespace,
                          "service_account": minted.service_account, "token": secret,
                          "expires_at": output.iso(minted.expires_at)})
        return
    typer.echo(secret)
