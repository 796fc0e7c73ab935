"""Running a command in a pod: the ``pods/exec`` subresource over WebSocket.

``GET /api/v1/namespaces/{ns}/pods/{name}/exec?command=sh&command=-c&command=CMD
&stdout=true&stderr=true&container=main`` upgraded to a WebSocket whose
subprotocol is ``v5.channel.k8s.io`` or, from an older API server,
``v4.channel.k8s.io`` (both offered, the server picks; v4 is the first with
exit codes). Every binary message starts with a channel byte: 1 stdout,
2 stderr, 3 the error channel, which carries one meta/v1 Status when the
command ends: ``Success``, or ``Failure`` with reason ``NonZeroExitCode`` and
the exit code in ``details.causes[{reason: ExitCode, message: "N"}]``; v5 adds
255, a CLOSE signal for a channel, ignored here (sources: apimachinery
pkg/util/remotecommand/constants.go and httpstream/wsstream/conn.go, KEP-3396
and KEP-4006).

The request carries the adapter's own credentials (kubeconfig bearer token,
exec-plugin token through the same RefreshingTokenAuth, client certificate,
CA): nothing is copied to the pod. Since Kubernetes 1.35 a WebSocket exec
needs both ``get`` and ``create`` on ``pods/exec`` (before, ``get``).

``websockets`` is imported here, inside the call: the CLI's start-up stays
free of it. Its logger is our own, kept above DEBUG: websockets logs the
handshake's headers at DEBUG, and they hold the bearer token.
"""

from __future__ import annotations

import functools
import json
import logging
import ssl
import time
from collections.abc import Sequence
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import httpx

from gpucloud.errors import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APITimeoutError,
    WaitTimeoutError,
)
from gpucloud.models import ExecResult
from gpucloud.providers.error_table import ErrorRule
from gpucloud.providers.kubernetes._manifests import CONTAINER
from gpucloud.providers.kubernetes._wire import EXEC_ERRORS


class Cluster(Protocol):
    """What exec needs of the adapter (a Protocol: no import of adapter.py,
    which imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def base_url(self) -> str: ...

    def auth(self) -> httpx.Auth | None: ...

    def _verify(self) -> Any: ...

    def proxy(self) -> str | None: ...

    def identity_headers(self) -> list[tuple[str, str]]: ...

    def map_error(self, response: httpx.Response, *,
                  rules: Sequence[ErrorRule] = ()) -> APIError: ...


PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDOUT, STDERR, ERROR, CLOSE = 1, 2, 3, 255
MAX_OUTPUT = 16 * 1024 * 1024  # bytes kept per stream: a runaway command cannot eat memory
MAX_OPEN_TIMEOUT = 30.0  # seconds for the connection and the upgrade
CLOSE_TIMEOUT = 1.0  # after a timeout the server may be busy: do not wait long for its close

# websockets logs handshake headers (the Authorization one too) at DEBUG: its
# logger here never goes below INFO, whatever --debug sets on the root.
_ws_log = logging.getLogger("gpucloud.adapters.kubernetes.websocket")
_ws_log.setLevel(logging.INFO)


def exec_path(namespace: str, pod: str, command: str, container: str = CONTAINER) -> str:
    query = urlencode([("command", "sh"), ("command", "-c"), ("command", command),
                       ("container", container), ("stdout", "true"), ("stderr", "true")])
    return (f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}"
            f"/exec?{query}")


def exit_code(raw: bytes, provider: str, pod: str) -> int:
    """The command's exit code from the error channel's Status (empty: success,
    as client-go reads it)."""
    if not raw.strip():
        return 0
    try:
        status = json.loads(raw)
    except ValueError:
        status = None
    if not isinstance(status, dict):
        raise APIResponseValidationError(f"{provider}: the exec error channel of {pod} held "
                                         "no Status", provider=provider)
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        causes = (status.get("details") or {}).get("causes") or []
        for cause in causes if isinstance(causes, list) else []:
            if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
                try:
                    return int(str(cause.get("message")))
                except ValueError:
                    break
    # A Failure without an exit code: the command never ran (no sh in the
    # image, the container gone, the runtime's error).
    message = str(status.get("message") or status.get("reason") or "exec failed")
    raise APIError(f"{provider}: exec in {pod} failed: {message[:500]}", provider=provider,
                   hint="the image needs /bin/sh for gpucloud's exec; `kubectl describe pod "
                        f"{pod}` shows the container's state")


class _Signer:
    """The Authorization header from the adapter's httpx.Auth, stepped by hand:
    the same token (and exec-plugin refresh, and one renewal after a 401) as
    the REST calls, without a second implementation."""

    def __init__(self, auth: httpx.Auth | None, url: str) -> None:
        self._flow = auth.sync_auth_flow(httpx.Request("GET", url)) if auth else None
        self._request: httpx.Request | None = None

    def headers(self) -> dict[str, str]:
        if self._flow is None:
            return {}  # a client certificate authenticates on the TLS layer
        self._request = next(self._flow)
        return self._pick(self._request)

    def after_401(self) -> dict[str, str] | None:
        """Headers signed with a renewed token, or None when there is none to try."""
        if self._flow is None or self._request is None:
            return None
        try:
            request = self._flow.send(httpx.Response(401, request=self._request))
        except StopIteration:
            return None
        return self._pick(request)

    @staticmethod
    def _pick(request: httpx.Request) -> dict[str, str]:
        value = request.headers.get("Authorization")
        return {"Authorization": value} if value else {}


def _ssl(verify: Any) -> ssl.SSLContext:
    if isinstance(verify, ssl.SSLContext):
        return verify
    context = ssl.create_default_context()
    if verify is False:  # insecure-skip-tls-verify, as the REST calls do
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


@functools.cache  # one class, made on the first exec (websockets loads only then)
def _shutting_down() -> type:
    """websockets' sync connection, whose close also shuts the socket down.

    When the upgrade is refused (a 404 for a pod that is gone) and the server
    keeps the connection open, websockets closes the socket and joins its
    reading thread. Over TLS that thread can be blocked in a read that a
    close does not wake (the socket was readable for a record that held no
    data), so the join, and the exec, waited for ever
    (python-websockets/websockets#1596). A shutdown wakes a blocked read."""
    import socket

    from websockets.sync.client import ClientConnection

    class Connection(ClientConnection):
        def close_socket(self) -> None:
            try:
                self.socket.shutdown(socket.SHUT_RDWR)
            except OSError:  # closed already, or never connected
                pass
            super().close_socket()

    return Connection


def run(provider: Cluster, pod: str, command: str, timeout: float) -> ExecResult:
    from websockets.exceptions import InvalidHandshake, InvalidStatus
    from websockets.sync.client import connect

    deadline = time.monotonic() + timeout
    http_url = provider.base_url + exec_path(provider.namespace, pod, command)
    ws_url = "ws" + http_url[len("http"):]  # http -> ws, https -> wss
    context = _ssl(provider._verify()) if ws_url.startswith("wss:") else None
    signer = _Signer(provider.auth(), http_url)
    # Impersonation and the proxy as on the REST calls (websockets would
    # otherwise read the proxy environment by its own rules).
    identity = provider.identity_headers()
    proxy = provider.proxy()
    headers = [*signer.headers().items(), *identity]
    where = f"{provider.name}: exec on {http_url.split('?')[0]}"
    for attempt in range(2):
        try:
            with connect(ws_url, ssl=context, subprotocols=list(PROTOCOLS),  # type: ignore
                         additional_headers=headers, compression=None, proxy=proxy,
                         open_timeout=max(0.1, min(MAX_OPEN_TIMEOUT, deadline - time.monotonic())),
                         ping_interval=None, close_timeout=CLOSE_TIMEOUT, max_size=MAX_OUTPUT,
                         logger=_ws_log, user_agent_header="gpucloud",
                         create_connection=_shutting_down()) as connection:
                if connection.subprotocol not in PROTOCOLS:
                    raise APIResponseValidationError(
                        f"{provider.name}: the API server spoke {connection.subprotocol or 'no'} "
                        "exec protocol; v4.channel.k8s.io or later is needed for exit codes",
                        provider=provider.name, hint="Kubernetes 1.4 or later speaks it")
                return _collect(provider, connection, pod, command, timeout, deadline)
        except InvalidStatus as exc:
            status = exc.response.status_code
            renewed = signer.after_401() if status == 401 and attempt == 0 else None
            if renewed is not None:
                headers = [*renewed.items(), *identity]
                continue
            raise _refused(provider, exc.response, http_url) from None
        except InvalidHandshake as exc:
            raise APIConnectionError(f"{where}: the API server did not upgrade to a WebSocket "
                                     f"({type(exc).__name__})", provider=provider.name,
                                     sent=True, hint="a proxy between you and the cluster may "
                                                     "not pass WebSocket upgrades") from None
        except ssl.SSLError as exc:
            target = getattr(provider, "target", None)
            if target is not None:
                from gpucloud.providers.kubernetes._transport import tls_failure

                raise tls_failure(target, exc) from None
            raise APIConnectionError(f"{where}: TLS failed: {exc.reason or type(exc).__name__}",
                                     provider=provider.name,
                                     hint="check the kubeconfig's certificate-authority(-data)"
                                     ) from None
        except TimeoutError:
            raise APITimeoutError(f"{where}: timed out opening the connection",
                                  provider=provider.name, hint="check your network") from None
        except OSError as exc:
            raise APIConnectionError(f"{where}: {exc.strerror or type(exc).__name__}",
                                     provider=provider.name, hint="check your network and the "
                                     "kubeconfig's server") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _refused(provider: Cluster, reply: Any, http_url: str) -> APIError:
    """The handshake's error answer, mapped like any REST error (its Status body),
    exec's own rows first (what exec needs of RBAC, a pod that is not running)."""
    request = httpx.Request("GET", http_url)
    response = httpx.Response(reply.status_code, headers=list(reply.headers.raw_items()),
                              content=bytes(reply.body or b""), request=request)
    return provider.map_error(response, rules=EXEC_ERRORS)


def _collect(provider: Cluster, connection: Any, pod: str, command: str,
             timeout: float, deadline: float) -> ExecResult:
    from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK

    streams: dict[int, bytearray] = {STDOUT: bytearray(), STDERR: bytearray(),
                                     ERROR: bytearray()}
    while True:
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            message = connection.recv(timeout=left)
        except TimeoutError:
            raise WaitTimeoutError(
                f"{provider.name}: `{command}` in {pod} did not finish within {timeout:g} s",
                hint="it may still run in the pod; give it a longer timeout") from None
        except ConnectionClosedOK:
            break
        except ConnectionClosedError as exc:
            raise APIConnectionError(f"{provider.name}: the exec connection to {pod} broke "
                                     f"({exc.rcvd.code if exc.rcvd else 'no close frame'})",
                                     provider=provider.name, sent=True,
                                     hint="the command may have run; try again") from None
        data = message.encode() if isinstance(message, str) else bytes(message)
        if len(data) < 2 or data[0] not in streams:
            continue  # an empty frame (a channel opening) or v5's CLOSE signal
        kept = streams[data[0]]
        kept += data[1:MAX_OUTPUT - len(kept) + 1]
    code = exit_code(bytes(streams[ERROR]), provider.name, pod)
    return ExecResult(command=command, exit_code=code,
                      stdout=streams[STDOUT].decode("utf-8", "replace"),
                      stderr=streams[STDERR].decode("utf-8", "replace"))
