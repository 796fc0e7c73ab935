"""kubeconfig exec credential plugins as a TokenSource, run as client-go runs them.

The plugin (``kubelogin``, ``aws eks get-token``, a cloud's CLI) is a command
that prints an ExecCredential whose ``status.token`` and/or
``status.clientCertificateData`` + ``clientKeyData`` expire at
``status.expirationTimestamp``. RefreshingTokenAuth runs it through
``TokenSource.obtain`` ahead of that time (and once after a 401), under its
lock, so concurrent requests run it once. A certificate is loaded into the
adapter's SSLContext (``on_certificate``) before the request that needed it
connects: new connections present it.

What the plugin is told and what it must answer follow client-go
(plugin/pkg/client/auth/exec/exec.go, rest/exec.go ``ConfigToExecCluster``):
``KUBERNETES_EXEC_INFO`` holds an ExecCredential of the configured
apiVersion with ``spec.interactive`` and, under ``provideClusterInfo: true``,
``spec.cluster`` (server, tls-server-name, insecure-skip-tls-verify,
certificate-authority-data, proxy-url, and ``config``: the cluster's
``client.authentication.k8s.io/exec`` extension). ``interactiveMode``:
``Never`` gives the plugin no stdin; ``IfAvailable`` gives it the terminal
when stdin is one; ``Always`` refuses to run without a terminal. An answer
of another apiVersion, without status, or with a certificate but no key is
refused.

Its output is a secret: never logged, never in an exception (only its exit
code and the first line of its stderr, which plugins use for their
diagnostics). Under AsyncClient the command runs inside the event loop,
blocking it while it runs: once an hour or so, against the cost of a second
code path.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
from pydantic import SecretStr

from gpucloud.errors import ConfigurationError, CredentialsError
from gpucloud.transport.tokens import RefreshingTokenAuth, Token, TokenSource
from gpucloud.providers.base import parse_utc
from gpucloud.providers.kubernetes._kubeconfig import ExecConfig, KubeTarget

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
TIMEOUT = 120.0  # a plugin may open a browser for a login; not forever

CertificateSink = Callable[[bytes, bytes], None]


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):
        return False


class ExecTokenSource(TokenSource):
    def __init__(self, config: ExecConfig, *, environ: dict[str, str] | None = None,
                 target: KubeTarget | None = None, on_certificate: CertificateSink | None = None,
                 is_terminal: Callable[[], bool] = _stdin_is_terminal) -> None:
        if config.api_version not in API_VERSIONS:
            raise CredentialsError(f"kubeconfig exec plugin apiVersion {config.api_version} "
                                   "is not supported", hint="use " + " or ".join(API_VERSIONS))
        self.config = config
        self._environ = environ
        self._target = target
        self._on_certificate = on_certificate
        self._is_terminal = is_terminal

    def __repr__(self) -> str:
        return f"ExecTokenSource(command={self.config.command!r})"

    def initial_request(self) -> httpx.Request:  # pragma: no cover - obtain() always answers
        raise NotImplementedError("exec plugin tokens come from a command, not a request")

    def parse(self, response: httpx.Response, now: float) -> Token:  # pragma: no cover
        raise NotImplementedError("exec plugin tokens come from a command, not a request")

    def _command(self) -> list[str]:
        # A relative path was made absolute against its kubeconfig file when loaded.
        command = self.config.command
        if os.sep not in command:
            command = shutil.which(command) or command
        return [command, *self.config.args]

    def interactive(self) -> bool:
        mode = self.config.interactive_mode
        if mode == "Never":
            return False
        terminal = self._is_terminal()
        if mode == "Always" and not terminal:
            raise CredentialsError(
                f"the kubeconfig's credential plugin {self.config.command!r} cannot run: "
                "exec plugin cannot support interactive mode: standard input is not a terminal",
                hint="its interactiveMode is Always: run gpucloud from a terminal once to log "
                     "in, or use a plugin that can run unattended (interactiveMode Never)")
        return terminal

    def exec_info(self, interactive: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {"interactive": interactive}
        if self.config.provide_cluster_info and self._target is not None:
            spec["cluster"] = cluster_info(self._target)
        return {"apiVersion": self.config.api_version, "kind": "ExecCredential", "spec": spec}

    def obtain(self, now: float) -> Token:
        interactive = self.interactive()
        env = dict(os.environ if self._environ is None else self._environ)
        env.update(self.config.env)
        env["KUBERNETES_EXEC_INFO"] = json.dumps(self.exec_info(interactive))
        name = self.config.command
        try:
            # Interactive: the plugin gets our terminal (stdin, and stderr for its
            # prompts); otherwise no stdin, and stderr kept for the error message.
            done = subprocess.run(self._command(), env=env,
                                  stdin=None if interactive else subprocess.DEVNULL,
                                  stdout=subprocess.PIPE,
                                  stderr=None if interactive else subprocess.PIPE,
                                  timeout=TIMEOUT, check=False)
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
            first = ((done.stderr or b"").decode("utf-8", "replace").strip().splitlines()
                     or [""])[0]
            raise CredentialsError(
                f"the kubeconfig's credential plugin {name!r} failed (exit {done.returncode})"
                + (f": {first[:200]}" if first else ""),
                hint="run it by hand (a login may be needed)")
        return self._credential(done.stdout, name)

    def _credential(self, stdout: bytes, name: str) -> Token:
        def bad(what: str, hint: str = "run it by hand to see what it prints") -> CredentialsError:
            return CredentialsError(f"the credential plugin {name!r} {what}", hint=hint)

        try:
            raw: Any = json.loads(stdout)
        except ValueError:
            raise bad("printed no ExecCredential (not JSON)") from None
        if not isinstance(raw, dict):
            raise bad("printed no ExecCredential (not an object)")
        version = raw.get("apiVersion")
        if version != self.config.api_version:
            raise bad(f"answered with apiVersion {version or 'none'!s}, but the kubeconfig "
                      f"configures it with {self.config.api_version}",
                      hint="set users[].user.exec.apiVersion to the version the plugin speaks")
        status = raw.get("status")
        if not isinstance(status, dict):
            raise bad("returned no status field")
        token: str = status["token"] if isinstance(status.get("token"), str) else ""
        cert = status.get("clientCertificateData")
        key = status.get("clientKeyData")
        cert = cert if isinstance(cert, str) else ""
        key = key if isinstance(key, str) else ""
        if not token and not cert and not key:
            raise bad("returned neither a token nor a client certificate and key")
        if bool(cert) != bool(key):
            raise bad("returned only a client certificate or only its key, not both")
        if cert:
            if self._on_certificate is None:
                raise bad("returned a client certificate, which a plain http:// server "
                          "cannot use", hint="the cluster's server must be https://")
            self._on_certificate(cert.encode(), key.encode())
        expires = parse_utc(status.get("expirationTimestamp"))
        return Token(access_token=SecretStr(token),
                     expires_at=expires.timestamp() if expires is not None else None)


def cluster_info(target: KubeTarget) -> dict[str, Any]:
    """``spec.cluster`` of KUBERNETES_EXEC_INFO (clientauthentication v1 Cluster)."""
    ca = target.ca_data
    if ca is None and target.ca_file is not None:
        try:
            with open(target.ca_file, "rb") as handle:
                ca = handle.read()
        except OSError as exc:
            raise ConfigurationError(f"kubeconfig {target.path}: cannot read "
                                     f"certificate-authority {target.ca_file} for the exec "
                                     f"plugin: {exc.strerror}", hint="fix the cluster entry"
                                     ) from None
    cluster: dict[str, Any] = {"server": target.server}
    if target.tls_server_name:
        cluster["tls-server-name"] = target.tls_server_name
    if target.insecure:
        cluster["insecure-skip-tls-verify"] = True
    if ca:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode("ascii")
    if target.proxy_url:
        cluster["proxy-url"] = target.proxy_url
    if target.exec_cluster_config is not None:
        cluster["config"] = target.exec_cluster_config
    return cluster


class ExecAuth(RefreshingTokenAuth):
    """RefreshingTokenAuth for a plugin that may answer with a certificate only:
    then no Authorization header is sent (client-go sends none for an empty token)."""

    def _sign(self, request: httpx.Request, token: Token | None) -> httpx.Request:
        if token is not None and not token.access_token.get_secret_value():
            return request
        return super()._sign(request, token)
