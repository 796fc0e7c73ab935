"""kubeconfig (clientcmd v1): which cluster, as whom, in which namespace.

Written here rather than taken from lightkube: lightkube 1.x is built on the
``httpx2`` fork and msgspec, its auth classes sign that fork's requests, not
ours, and its exec plugin auth re-runs the command only after a 401 (it ignores
``status.expirationTimestamp``). What would remain is the YAML-to-struct step
below, not worth three dependencies. Exec tokens go through the engine's
RefreshingTokenAuth (``_exec.py``) like every other short-lived token.

Supported: one kubeconfig file (the first existing one of KUBECONFIG's list);
a context chosen by name or ``current-context``; ``server``,
``certificate-authority(-data)``, ``insecure-skip-tls-verify``; users with
``token``, ``tokenFile``, ``client-certificate(-data)`` + ``client-key(-data)``,
or ``exec``. Not supported (a clear error says so): ``auth-provider`` (removed
from kubectl) and ``username``/``password``.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from ...errors import ConfigurationError

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class ExecConfig:
    """A user's ``exec`` credential plugin (client.authentication.k8s.io)."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = "client.authentication.k8s.io/v1"
    install_hint: str | None = None
    interactive_mode: str | None = None
    base_dir: str | None = None  # a relative command is relative to the kubeconfig's folder


@dataclass(frozen=True)
class KubeTarget:
    """One context of a kubeconfig, resolved: what the adapter connects with."""

    path: str
    context: str
    server: str
    namespace: str = DEFAULT_NAMESPACE
    ca_file: str | None = None
    ca_data: bytes | None = field(default=None, repr=False)
    insecure: bool = False
    token: SecretStr | None = field(default=None, repr=False)
    token_file: str | None = None
    client_cert: tuple[str | None, bytes | None] | None = field(default=None, repr=False)
    client_key: tuple[str | None, bytes | None] | None = field(default=None, repr=False)
    exec: ExecConfig | None = None

    def ssl_context(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: the cluster's CA (and our client certificate)."""
        if self.insecure and self.client_cert is None:
            return False
        try:
            if self.ca_data is not None:
                ctx = ssl.create_default_context(cadata=self.ca_data.decode("ascii", "replace"))
            elif self.ca_file is not None:
                ctx = ssl.create_default_context(cafile=self.ca_file)
            else:
                ctx = ssl.create_default_context()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"kubeconfig {self.path}: the cluster's certificate "
                                     f"authority is unusable: {type(exc).__name__}",
                                     hint="check certificate-authority(-data)") from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert is not None and self.client_key is not None:
            _load_cert_chain(ctx, self.client_cert, self.client_key)
        return ctx

    def static_token(self) -> SecretStr | None:
        if self.token is not None:
            return self.token
        if self.token_file is not None:
            try:
                return SecretStr(Path(self.token_file).read_text(encoding="utf-8").strip())
            except OSError as exc:
                raise ConfigurationError(f"{self.path}: cannot read tokenFile {self.token_file}: "
                                         f"{exc.strerror}", hint="fix the kubeconfig") from None
        return None


def _load_cert_chain(ctx: ssl.SSLContext, cert: tuple[str | None, bytes | None],
                     key: tuple[str | None, bytes | None]) -> None:
    # ssl only loads certificates from files: inline data goes to a private
    # temporary folder for the moment of loading, then is removed.
    with tempfile.TemporaryDirectory(prefix="gpucloud-kube-") as folder:
        paths: list[str] = []
        for name, (path, data) in (("cert.pem", cert), ("key.pem", key)):
            if data is not None:
                path = os.path.join(folder, name)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            paths.append(path or "")
        try:
            ctx.load_cert_chain(paths[0], paths[1])
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"the kubeconfig's client certificate or key is unusable: "
                                     f"{type(exc).__name__}",
                                     hint="check client-certificate(-data) and client-key(-data)"
                                     ) from None


def load(path: str, context: str | None = None) -> KubeTarget:
    """The chosen context of the kubeconfig at ``path`` (``context`` None: current)."""
    import yaml  # type: ignore[import-untyped]  # lazily: only Kubernetes needs YAML here

    from ...safe_yaml import load_file

    try:
        raw = load_file(path, 4 << 20, error=ConfigurationError, what="kubeconfig")  # 4 MiB
    except OSError as exc:
        raise ConfigurationError(f"cannot read kubeconfig {path}: {exc.strerror}",
                                 hint="set KUBECONFIG to a readable file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigurationError(f"kubeconfig {path} is not valid YAML{where}",
                                 hint="fix the file (kubectl config view shows how it reads)"
                                 ) from None
    return from_dict(raw, path, context)


def _named(raw: dict[str, Any], section: str, key: str, path: str) -> dict[str, dict[str, Any]]:
    items = raw.get(section) or []
    if not isinstance(items, list):
        raise ConfigurationError(f"kubeconfig {path}: {section} must be a list")
    out = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            value = item.get(key) or {}
            out[item["name"]] = value if isinstance(value, dict) else {}
    return out


def from_dict(raw: Any, path: str, context: str | None = None) -> KubeTarget:
    if not isinstance(raw, dict):
        raise ConfigurationError(f"kubeconfig {path} is not a kubeconfig (not a mapping)")
    contexts = _named(raw, "contexts", "context", path)
    name = context or raw.get("current-context")
    if not name:
        raise ConfigurationError(f"kubeconfig {path} names no current-context",
                                 hint="choose one with GPUCLOUD_KUBERNETES_CONTEXT or "
                                      "`kubectl config use-context NAME`")
    if name not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise ConfigurationError(f"kubeconfig {path} has no context {name!r}",
                                 hint=f"contexts in the file: {known}")
    ctx = contexts[name]
    clusters = _named(raw, "clusters", "cluster", path)
    cluster = clusters.get(str(ctx.get("cluster")))
    if cluster is None or not isinstance(cluster.get("server"), str):
        raise ConfigurationError(f"kubeconfig {path}: context {name!r} names no cluster "
                                 "with a server", hint="fix the context's cluster entry")
    user = _named(raw, "users", "user", path).get(str(ctx.get("user")), {})
    base = os.path.dirname(os.path.abspath(path))
    return KubeTarget(
        path=path, context=name, server=cluster["server"].rstrip("/"),
        namespace=str(ctx.get("namespace") or DEFAULT_NAMESPACE),
        ca_file=_file(cluster.get("certificate-authority"), base),
        ca_data=_data(cluster.get("certificate-authority-data"), path, "certificate-authority"),
        insecure=cluster.get("insecure-skip-tls-verify") is True,
        **_user(user, path, base),
    )


def _user(user: dict[str, Any], path: str, base: str) -> dict[str, Any]:
    if user.get("auth-provider"):
        raise ConfigurationError(f"kubeconfig {path}: auth-provider users are not supported",
                                 hint="use an exec plugin (e.g. kubelogin) or a token instead")
    if user.get("username") or user.get("password"):
        raise ConfigurationError(f"kubeconfig {path}: basic auth (username/password) is not "
                                 "supported", hint="use a token, a client certificate or exec")
    out: dict[str, Any] = {}
    if isinstance(user.get("token"), str) and user["token"]:
        out["token"] = SecretStr(user["token"])
    out["token_file"] = _file(user.get("tokenFile"), base)
    cert = (_file(user.get("client-certificate"), base),
            _data(user.get("client-certificate-data"), path, "client-certificate"))
    key = (_file(user.get("client-key"), base),
           _data(user.get("client-key-data"), path, "client-key"))
    if any(cert) != any(key):
        raise ConfigurationError(f"kubeconfig {path}: a client certificate needs its key "
                                 "(and a key its certificate)", hint="fix the user entry")
    if any(cert):
        out["client_cert"], out["client_key"] = cert, key
    exe = user.get("exec")
    if isinstance(exe, dict):
        if not isinstance(exe.get("command"), str) or not exe["command"]:
            raise ConfigurationError(f"kubeconfig {path}: exec has no command")
        env = tuple((str(e.get("name")), str(e.get("value", "")))
                    for e in exe.get("env") or () if isinstance(e, dict) and e.get("name"))
        out["exec"] = ExecConfig(
            command=exe["command"], args=tuple(str(a) for a in exe.get("args") or ()),
            env=env, api_version=str(exe.get("apiVersion") or ExecConfig.api_version),
            install_hint=exe.get("installHint") if isinstance(exe.get("installHint"), str)
            else None, interactive_mode=exe.get("interactiveMode"), base_dir=base)
    return out


def _file(value: Any, base: str) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return value if os.path.isabs(value) else os.path.join(base, value)


def _data(value: Any, path: str, what: str) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise ConfigurationError(f"kubeconfig {path}: {what}-data is not base64",
                                 hint="the field holds the PEM file, base64-encoded") from None
