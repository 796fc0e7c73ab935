"""kubeconfig exec credential plugins as a TokenSource.

The plugin (``kubelogin``, ``aws eks get-token``, a cloud's CLI) is a command
that prints an ExecCredential whose ``status.token`` expires at
``status.expirationTimestamp``. RefreshingTokenAuth runs it through
``TokenSource.obtain`` ahead of that time (and once after a 401), under its
lock, so concurrent requests run it once. Its output is a secret: never
logged, never in an exception (only its exit code and the first line of its
stderr, which plugins use for their diagnostics). Under AsyncClient the
command runs inside the event loop, blocking it while it runs: once an hour
or so, against the cost of a second code path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import httpx
from pydantic import SecretStr

from ...errors import CredentialsError
from ...tokens import Token, TokenSource
from ..base import parse_utc
from ._kubeconfig import ExecConfig

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
TIMEOUT = 120.0  # a plugin may open a browser for a login; not forever


class ExecTokenSource(TokenSource):
    def __init__(self, config: ExecConfig, *, environ: dict[str, str] | None = None) -> None:
        if config.api_version not in API_VERSIONS:
            raise CredentialsError(f"kubeconfig exec plugin apiVersion {config.api_version} "
                                   "is not supported", hint="use " + " or ".join(API_VERSIONS))
        self.config = config
        self._environ = environ

    def __repr__(self) -> str:
        return f"ExecTokenSource(command={self.config.command!r})"

    def initial_request(self) -> httpx.Request:  # pragma: no cover - obtain() always answers
        raise NotImplementedError("exec plugin tokens come from a command, not a request")

    def parse(self, response: httpx.Response, now: float) -> Token:  # pragma: no cover
        raise NotImplementedError("exec plugin tokens come from a command, not a request")

    def _command(self) -> list[str]:
        command = self.config.command
        if os.sep in command and not os.path.isabs(command) and self.config.base_dir:
            command = os.path.join(self.config.base_dir, command)
        elif os.sep not in command:
            command = shutil.which(command) or command
        return [command, *self.config.args]

    def obtain(self, now: float) -> Token:
        env = dict(os.environ if self._environ is None else self._environ)
        env.update(self.config.env)
        env["KUBERNETES_EXEC_INFO"] = json.dumps({
            "apiVersion": self.config.api_version, "kind": "ExecCredential",
            "spec": {"interactive": False}})
        name = self.config.command
        try:
            done = subprocess.run(self._command(), env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=TIMEOUT, check=False)
        except FileNotFoundError:
            raise CredentialsError(
                f"the kubeconfig's credential plugin {name!r} is not installed",
                hint=self.config.install_hint or f"install {name} or fix the kubeconfig's "
                                                 "users[].user.exec.command") from None
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CredentialsError(f"the kubeconfig's credential plugin {name!r} could not run: "
                                   f"{type(exc).__name__}",
                                   hint="run it by hand to see what it needs") from None
        if done.returncode != 0:
            first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[0]
            raise CredentialsError(
                f"the kubeconfig's credential plugin {name!r} failed (exit {done.returncode})"
                + (f": {first[:200]}" if first else ""),
                hint="run it by hand (a login may be needed)")
        return self._token(done.stdout, name)

    def _token(self, stdout: bytes, name: str) -> Token:
        try:
            raw: Any = json.loads(stdout)
            status = raw["status"]
            token = status["token"]
        except (ValueError, KeyError, TypeError):
            raise CredentialsError(f"the credential plugin {name!r} printed no ExecCredential "
                                   "with status.token",
                                   hint="client-certificate output of exec plugins is not "
                                        "supported; a token is needed") from None
        if not isinstance(token, str) or not token:
            raise CredentialsError(f"the credential plugin {name!r} printed an empty token")
        expires = parse_utc(status.get("expirationTimestamp"))
        return Token(access_token=SecretStr(token),
                     expires_at=expires.timestamp() if expires is not None else None)
