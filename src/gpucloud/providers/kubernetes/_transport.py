"""How requests reach the API server, as client-go's transport sends them.

* Proxy: the cluster's ``proxy-url``; without one, the environment as Go's
  ``http.ProxyFromEnvironment`` reads it (golang.org/x/net/http/httpproxy):
  ``HTTPS_PROXY``/``https_proxy`` for an https server (``HTTP_PROXY`` for
  http, refused under CGI), ``NO_PROXY``/``no_proxy`` exceptions (``*``, IPs,
  CIDRs, ``foo.com`` = it and its subdomains, ``.foo.com`` = subdomains only,
  optional ``:port``), and never for ``localhost`` or a loopback IP. httpx
  would read the environment itself only without a custom transport, and by
  other rules.
* Impersonation: ``Impersonate-User``, ``Impersonate-Uid``, one
  ``Impersonate-Group`` per group, ``Impersonate-Extra-<key>`` per value,
  the key %-escaped where it is not an HTTP token character (client-go
  transport/round_trippers.go, ``headerKeyEscape``) and the name in Go's
  canonical header case.
* A TLS failure is a ConfigurationError naming the server, the name its
  certificate was checked against and OpenSSL's reason: a wrong CA or
  tls-server-name is fixed in the kubeconfig, not by retrying.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from gpucloud.errors import ConfigurationError
from gpucloud.providers.kubernetes._kubeconfig import Impersonation, KubeTarget
from gpucloud.transport.pool import AsyncPooledTransport, PooledTransport

# HTTP token characters (RFC 7230 tchar), as net/http's isTokenTable lists them.
_TOKEN = frozenset("!#$&'*+-.^_`|~0123456789"
                   "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


# -- proxies ---------------------------------------------------------------------------------


def proxy_for(target: KubeTarget, environ: Mapping[str, str]) -> str | None:
    """The proxy URL for the cluster's server, or None to connect directly."""
    if target.proxy_url is not None:
        return target.proxy_url  # http.ProxyURL: for every request, loopback included
    url = urlsplit(target.server)
    if url.scheme == "https":
        value = _env(environ, "HTTPS_PROXY")
    elif url.scheme == "http":
        value = _env(environ, "HTTP_PROXY")
        if value and environ.get("REQUEST_METHOD"):
            raise ConfigurationError("refusing to use HTTP_PROXY in a CGI environment",
                                     hint="see golang.org/s/cgihttpproxy; set proxy-url instead")
    else:
        value = ""
    if not value or not _use_proxy(url.hostname or "", str(url.port or
                                   _DEFAULT_PORTS.get(url.scheme, "")),
                                   _env(environ, "NO_PROXY")):
        return None
    scheme = urlsplit(value).scheme
    if scheme not in ("http", "https", "socks5"):
        value = "http://" + value  # "host:port": the http scheme is assumed
    elif scheme == "socks5":
        raise ConfigurationError("the HTTPS_PROXY environment names a SOCKS5 proxy, which "
                                 "gpucloud does not support",
                                 hint="use an http:// proxy, or exclude the cluster in NO_PROXY")
    return value


def _env(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name) or environ.get(name.lower()) or ""


def _use_proxy(host: str, port: str, no_proxy: str) -> bool:
    host = host.lower().strip()
    if host == "localhost":
        return False
    try:
        ip: Any = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.is_loopback:
        return False
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return False
        if "/" in entry:
            try:
                if ip is not None and ip in ipaddress.ip_network(entry, strict=False):
                    return False
            except ValueError:
                pass
            continue
        name, want_port = _split_host_port(entry)
        if not name:
            continue
        try:
            entry_ip: Any = ipaddress.ip_address(name)
        except ValueError:
            entry_ip = None
        if entry_ip is not None:  # an IP entry matches that IP only, never a name
            if ip is not None and entry_ip == ip and (not want_port or want_port == port):
                return False
            continue
        if name.startswith("*."):
            name = name[1:]
        exact = not name.startswith(".")
        suffix = name if name.startswith(".") else "." + name
        if host.endswith(suffix) or (exact and host == suffix[1:]):
            if not want_port or want_port == port:
                return False
    return True


def _split_host_port(entry: str) -> tuple[str, str]:
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else ""
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port
    return entry, ""


# -- impersonation -------------------------------------------------------------------------------


def header_key_escape(key: str) -> str:
    return "".join(chr(b) if chr(b) in _TOKEN and b != 0x25 else f"%{b:02X}"
                   for b in key.encode("utf-8"))


def canonical_header(name: str) -> str:
    """Go's textproto.CanonicalMIMEHeaderKey: each dash-separated word capitalised."""
    if any(c not in _TOKEN and c != "%" for c in name):
        return name
    return "-".join(word[:1].upper() + word[1:].lower() for word in name.split("-"))


def impersonation_headers(who: Impersonation) -> list[tuple[str, str]]:
    headers = [("Impersonate-User", who.user)]
    if who.uid:
        headers.append(("Impersonate-Uid", who.uid))
    headers += [("Impersonate-Group", group) for group in who.groups]
    for key, values in who.extra:
        name = canonical_header("Impersonate-Extra-" + header_key_escape(key))
        headers += [(name, value) for value in values]
    return headers


# -- the transports --------------------------------------------------------------------------------


class _Shared:
    def __init__(self, target: KubeTarget) -> None:
        self.target = target
        self.headers = impersonation_headers(target.impersonate) if target.impersonate else []

    def prepare(self, request: httpx.Request) -> None:
        # The user header marks requests that impersonate already (client-go's rule).
        if self.headers and "Impersonate-User" not in request.headers:
            request.headers = httpx.Headers([*request.headers.multi_items(), *self.headers])

    def tls_error(self, exc: httpx.ConnectError) -> ConfigurationError | None:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ssl.SSLError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            return None
        return tls_failure(self.target, cause)


def tls_failure(target: KubeTarget, error: ssl.SSLError) -> ConfigurationError:
    host = urlsplit(target.server).hostname
    checked = (f"checked against tls-server-name {target.tls_server_name!r}"
               if target.tls_server_name else f"checked against {host!r}")
    reason = getattr(error, "verify_message", None) or error.reason or type(error).__name__
    if isinstance(error, ssl.SSLCertVerificationError):
        what = f"the certificate of {target.server} was refused ({checked}): {reason}"
        hint = ("the kubeconfig's certificate-authority(-data) must sign the server's "
                "certificate, and the name checked must be in it (tls-server-name sets that "
                "name); `kubectl --context " + target.context + " get --raw /version` shows "
                "whether kubectl agrees")
    else:
        what = f"the TLS handshake with {target.server} failed ({checked}): {reason}"
        hint = ("check the kubeconfig's client certificate, certificate-authority and "
                "tls-server-name")
    return ConfigurationError(f"kubeconfig {target.path}, context {target.context}: {what}",
                              hint=hint)


class KubeTransport(httpx.BaseTransport):
    def __init__(self, target: KubeTarget, verify: Any, proxy: str | None) -> None:
        self._shared = _Shared(target)
        self._inner = PooledTransport(verify, proxy)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self._shared.prepare(request)
        try:
            return self._inner.handle_request(request)
        except httpx.ConnectError as exc:
            failure = self._shared.tls_error(exc)
            if failure is None:
                raise
            raise failure from None

    def close(self) -> None:
        self._inner.close()


class AsyncKubeTransport(httpx.AsyncBaseTransport):
    def __init__(self, target: KubeTarget, verify: Any, proxy: str | None) -> None:
        self._shared = _Shared(target)
        self._inner = AsyncPooledTransport(verify, proxy)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self._shared.prepare(request)
        try:
            return await self._inner.handle_async_request(request)
        except httpx.ConnectError as exc:
            failure = self._shared.tls_error(exc)
            if failure is None:
                raise
            raise failure from None

    async def aclose(self) -> None:
        await self._inner.aclose()
