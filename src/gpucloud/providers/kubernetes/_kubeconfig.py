"""kubeconfig (clientcmd v1): which cluster, as whom, in which namespace.

Written here rather than taken from lightkube: lightkube 1.x is built on the
``httpx2`` fork and msgspec, its auth classes sign that fork's requests, not
ours, and its exec plugin auth re-runs the command only after a 401 (it ignores
``status.expirationTimestamp``). What would remain is the YAML-to-struct step
below, not worth three dependencies. Exec tokens go through the engine's
RefreshingTokenAuth (``_exec.py``) like every other short-lived token.

Read as kubectl reads it (k8s.io/client-go tools/clientcmd):

* every file of ``KUBECONFIG`` (``_loading.py``: first file to name a
  cluster/user/context or set current-context wins, missing files skipped,
  relative paths relative to the file that holds them);
* a context chosen by name (``context =`` / GPUCLOUD_<P>_CONTEXT) or
  ``current-context``; its namespace;
* clusters: ``server``, ``certificate-authority(-data)``,
  ``insecure-skip-tls-verify``, ``tls-server-name`` (SNI and the name the
  certificate must carry), ``proxy-url`` (http, https; else the HTTPS_PROXY /
  NO_PROXY environment, ``_transport.py``), and the
  ``client.authentication.k8s.io/exec`` extension given to exec plugins;
* users: ``token``, ``tokenFile``, ``client-certificate(-data)`` +
  ``client-key(-data)``, ``exec`` plugins (tokens or client certificates,
  ``provideClusterInfo``, ``interactiveMode``), and impersonation (``as``,
  ``as-uid``, ``as-groups``, ``as-user-extra``).

Refused with a clear error, never ignored: ``auth-provider`` (removed from
kubectl), ``username``/``password`` (basic auth), a ``socks5`` proxy-url,
impersonation details without ``as``.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from gpucloud.errors import ConfigurationError
from gpucloud.providers.kubernetes import _loading

DEFAULT_NAMESPACE = "default"
EXEC_EXTENSION = "client.authentication.k8s.io/exec"
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
# v1beta1 plugins predate interactiveMode: client-go defaults them to IfAvailable
# (tools/clientcmd/api/v1/defaults.go); v1 ones must say it.
LEGACY_EXEC_VERSIONS = ("client.authentication.k8s.io/v1beta1",
                        "client.authentication.k8s.io/v1alpha1")
PROXY_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class ExecConfig:
    """A user's ``exec`` credential plugin (client.authentication.k8s.io)."""

    command: str
    api_version: str
    interactive_mode: str = "Never"
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold keys
    install_hint: str | None = None
    provide_cluster_info: bool = False


@dataclass(frozen=True)
class Impersonation:
    """``as``, ``as-uid``, ``as-groups``, ``as-user-extra``: act as someone else."""

    user: str
    uid: str | None = None
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class ServerNameContext(ssl.SSLContext):
    """An SSLContext that always says (SNI) and checks ``server_name``.

    httpcore honours the ``sni_hostname`` request extension on direct
    connections but not through a CONNECT proxy (it uses the tunnel's host),
    and websockets has its own parameter: pinning the name in the context
    makes every path (REST, proxy tunnel, async, pods/exec) use
    tls-server-name, as client-go's tls.Config.ServerName does."""

    server_name: str | None = None

    def wrap_socket(self, sock: Any, server_side: bool = False,  # type: ignore[override]
                    do_handshake_on_connect: bool = True, suppress_ragged_eofs: bool = True,
                    server_hostname: str | bytes | None = None, session: Any = None) -> Any:
        return super().wrap_socket(sock, server_side, do_handshake_on_connect,
                                   suppress_ragged_eofs, self.server_name or server_hostname,
                                   session)

    def wrap_bio(self, incoming: Any, outgoing: Any,  # type: ignore[override]
                 server_side: bool = False, server_hostname: str | bytes | None = None,
                 session: Any = None) -> Any:
        return super().wrap_bio(incoming, outgoing, server_side,
                                self.server_name or server_hostname, session)


@dataclass(frozen=True)
class KubeTarget:
    """One context of a kubeconfig, resolved: what the adapter connects with."""

    path: str  # the file(s) read, for messages
    context: str
    server: str
    namespace: str = DEFAULT_NAMESPACE
    ca_file: str | None = None
    ca_data: bytes | None = field(default=None, repr=False)
    insecure: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = field(default=None, repr=False)  # may hold user:password@
    token: SecretStr | None = field(default=None, repr=False)
    token_file: str | None = None
    client_cert: tuple[str | None, bytes | None] | None = field(default=None, repr=False)
    client_key: tuple[str | None, bytes | None] | None = field(default=None, repr=False)
    exec: ExecConfig | None = None
    exec_cluster_config: Any = field(default=None, repr=False)  # the cluster's exec extension
    impersonate: Impersonation | None = None

    def ssl_context(self) -> ServerNameContext:
        """httpx's ``verify``: the cluster's CA, tls-server-name, our client certificate."""
        ctx = ServerNameContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.server_name = self.tls_server_name
        try:
            if self.insecure:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            elif self.ca_data is not None:
                ctx.load_verify_locations(cadata=self.ca_data.decode("ascii", "replace"))
            elif self.ca_file is not None:
                ctx.load_verify_locations(cafile=self.ca_file)
            else:
                ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"kubeconfig {self.path}: the cluster's certificate "
                                     f"authority is unusable: {type(exc).__name__}",
                                     hint="check certificate-authority(-data)") from None
        if self.client_cert is not None and self.client_key is not None:
            load_cert_chain(ctx, self.client_cert, self.client_key)
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


def load_cert_chain(ctx: ssl.SSLContext, cert: tuple[str | None, bytes | None],
                    key: tuple[str | None, bytes | None], what: str = "the kubeconfig's") -> None:
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
            raise ConfigurationError(f"{what} client certificate or key is unusable: "
                                     f"{type(exc).__name__}",
                                     hint="check client-certificate(-data) and client-key(-data)"
                                     ) from None


def load(paths: str | Sequence[str], context: str | None = None) -> KubeTarget:
    """The chosen context (``context`` None: current) of the kubeconfig file(s):
    a list, or one string that may hold several paths joined as in KUBECONFIG."""
    if isinstance(paths, str):
        paths = paths.split(os.pathsep)
    return resolve(_loading.load(paths), context)


def resolve(merged: _loading.Merged, context: str | None = None) -> KubeTarget:
    where = merged.where
    name = context or merged.current_context
    if not name:
        raise ConfigurationError(f"kubeconfig {where} names no current-context",
                                 hint="choose one with GPUCLOUD_KUBERNETES_CONTEXT or "
                                      "`kubectl config use-context NAME`")
    if name not in merged.contexts:
        known = ", ".join(sorted(merged.contexts)) or "none"
        raise ConfigurationError(f"kubeconfig {where} has no context {name!r}",
                                 hint=f"contexts in the file(s): {known}")
    ctx = merged.contexts[name].value
    entry = merged.clusters.get(str(ctx.get("cluster")))
    cluster = entry.value if entry is not None else {}
    if not isinstance(cluster.get("server"), str) or not cluster["server"]:
        raise ConfigurationError(f"kubeconfig {where}: context {name!r} names no cluster "
                                 "with a server", hint="fix the context's cluster entry")
    origin = entry.origin if entry is not None else where
    user_entry = merged.users.get(str(ctx.get("user")))
    user = user_entry.value if user_entry is not None else {}
    user_origin = user_entry.origin if user_entry is not None else where
    return KubeTarget(
        path=where, context=name, server=cluster["server"].rstrip("/"),
        namespace=str(ctx.get("namespace") or DEFAULT_NAMESPACE),
        ca_file=_text(cluster.get("certificate-authority")),
        ca_data=_data(cluster.get("certificate-authority-data"), origin,
                      "certificate-authority"),
        insecure=cluster.get("insecure-skip-tls-verify") is True,
        tls_server_name=_text(cluster.get("tls-server-name")),
        proxy_url=_proxy_url(cluster.get("proxy-url"), origin),
        exec_cluster_config=_extension(cluster.get("extensions"), EXEC_EXTENSION),
        **_user(user, user_origin, str(ctx.get("user"))),
    )


def _proxy_url(value: Any, path: str) -> str | None:
    """client-go's parseProxyURL: http, https or socks5. httpx speaks SOCKS only
    through an extra package (socksio), which gpucloud does not depend on."""
    from urllib.parse import urlsplit

    url = _text(value)
    if url is None:
        return None
    scheme = urlsplit(url).scheme
    if scheme == "socks5":
        raise ConfigurationError(f"kubeconfig {path}: proxy-url {_no_password(url)} is a SOCKS5 "
                                 "proxy, which gpucloud does not support",
                                 hint="use an http:// or https:// proxy (CONNECT), or an SSH "
                                      "tunnel with -L to the API server")
    if scheme not in PROXY_SCHEMES:
        raise ConfigurationError(f"kubeconfig {path}: proxy-url has the unsupported scheme "
                                 f"{scheme!r}", hint="it must be http, https (or socks5 for "
                                                     "kubectl)")
    return url


def _no_password(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return url if parts.password is None else url.replace(f":{parts.password}@", ":***@", 1)


def _extension(items: Any, name: str) -> Any:
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("name") == name:
            return item.get("extension")
    return None


def _user(user: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    if user.get("auth-provider"):
        raise ConfigurationError(f"kubeconfig {path}: auth-provider users are not supported",
                                 hint="use an exec plugin (e.g. kubelogin) or a token instead")
    if user.get("username") or user.get("password"):
        raise ConfigurationError(f"kubeconfig {path}: basic auth (username/password) is not "
                                 "supported", hint="use a token, a client certificate or exec")
    out: dict[str, Any] = {}
    if isinstance(user.get("token"), str) and user["token"]:
        out["token"] = SecretStr(user["token"])
    out["token_file"] = _text(user.get("tokenFile"))
    cert = (_text(user.get("client-certificate")),
            _data(user.get("client-certificate-data"), path, "client-certificate"))
    key = (_text(user.get("client-key")),
           _data(user.get("client-key-data"), path, "client-key"))
    if any(cert) != any(key):
        raise ConfigurationError(f"kubeconfig {path}: a client certificate needs its key "
                                 "(and a key its certificate)", hint="fix the user entry")
    if any(cert):
        out["client_cert"], out["client_key"] = cert, key
    exe = user.get("exec")
    if isinstance(exe, dict):
        out["exec"] = _exec(exe, path, name)
    out["impersonate"] = _impersonation(user, path, name)
    return out


def _exec(exe: dict[str, Any], path: str, name: str) -> ExecConfig:
    """client-go's validateAuthInfo rules for exec, in its words."""
    where = f"kubeconfig {path}: user {name!r}"
    if not isinstance(exe.get("command"), str) or not exe["command"]:
        raise ConfigurationError(f"{where}: exec has no command",
                                 hint="command must be specified to use an exec plugin")
    version = exe.get("apiVersion")
    if not isinstance(version, str) or not version:
        raise ConfigurationError(f"{where}: exec has no apiVersion",
                                 hint="apiVersion must be specified to use an exec plugin "
                                      "(e.g. client.authentication.k8s.io/v1)")
    mode = exe.get("interactiveMode") or (
        "IfAvailable" if version in LEGACY_EXEC_VERSIONS else None)
    if mode is None:
        raise ConfigurationError(f"{where}: exec has no interactiveMode",
                                 hint="interactiveMode must be specified for "
                                      f"{version}: Never, IfAvailable or Always")
    if mode not in INTERACTIVE_MODES:
        raise ConfigurationError(f"{where}: invalid interactiveMode {mode!r}",
                                 hint="it must be Never, IfAvailable or Always")
    env = []
    for item in exe.get("env") or ():
        if not isinstance(item, dict) or not item.get("name"):
            raise ConfigurationError(f"{where}: an exec env entry has no name",
                                     hint="env variable name must be specified")
        env.append((str(item["name"]), str(item.get("value", ""))))
    hint = exe.get("installHint")
    return ExecConfig(command=exe["command"], api_version=version, interactive_mode=mode,
                      args=tuple(str(a) for a in exe.get("args") or ()), env=tuple(env),
                      install_hint=hint if isinstance(hint, str) else None,
                      provide_cluster_info=exe.get("provideClusterInfo") is True)


def _impersonation(user: dict[str, Any], path: str, name: str) -> Impersonation | None:
    who = _text(user.get("as"))
    uid = _text(user.get("as-uid"))
    groups = user.get("as-groups") or []
    extra = user.get("as-user-extra") or {}
    if not isinstance(groups, list) or not isinstance(extra, dict):
        raise ConfigurationError(f"kubeconfig {path}: user {name!r}: as-groups must be a list "
                                 "and as-user-extra a map of lists",
                                 hint="fix the user entry")
    if who is None:
        if uid or groups or extra:
            # client-go's validation refuses this; sending the requests without
            # the impersonation would run them as the kubeconfig's own identity.
            raise ConfigurationError(f"kubeconfig {path}: user {name!r} asks for as-uid, "
                                     "as-groups or as-user-extra without impersonating a user",
                                     hint="add `as: USER` to the user entry")
        return None
    pairs = []
    for key, values in extra.items():
        values = values if isinstance(values, list) else [values]
        pairs.append((str(key), tuple(str(v) for v in values)))
    return Impersonation(user=who, uid=uid, groups=tuple(str(g) for g in groups),
                         extra=tuple(pairs))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _data(value: Any, path: str, what: str) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise ConfigurationError(f"kubeconfig {path}: {what}-data is not base64",
                                 hint="the field holds the PEM file, base64-encoded") from None
