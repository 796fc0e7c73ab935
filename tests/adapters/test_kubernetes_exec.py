"""The Kubernetes adapter's exec pieces without a server: the connection a pod
gets, the exec URL, the error channel's Status read as an exit code, the
signing that reuses the REST calls' auth. The WebSocket itself is tested end
to end in tests/e2e/test_kubernetes_exec.py."""

from __future__ import annotations

import ssl
import subprocess
import sys
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from pydantic import SecretStr

from gpucloud.providers.kubernetes import _podexec
from gpucloud.config.credentials import BearerAuth
from gpucloud.errors import APIError, APIResponseValidationError
from gpucloud.models import InstanceStatus
from gpucloud.transport.tokens import RefreshingTokenAuth, Token, TokenSource
from tests.adapters._kubernetes_support import (  # noqa: F401 (fixtures)
    NS,
    kube_path_fixture,
    make_provider,
)


def pod(phase: str) -> dict:
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "gpucloud-gc-1", "namespace": NS,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": phase, **({"podIP": "10.0.0.7"} if phase == "Running" else {})}}


@pytest.mark.parametrize("phase,method", [("Pending", None), ("Running", "api"),
                                          ("Succeeded", None), ("Failed", None)])
def test_only_a_running_pod_has_a_connection_and_it_is_the_exec_api(kube_path, phase, method):
    instance = make_provider(kube_path)._instance(pod(phase))
    assert (instance.connection.method if instance.connection else None) == method
    if method:
        assert instance.status == InstanceStatus.RUNNING and instance.connection.host is None


def test_the_exec_url_runs_the_line_through_sh_in_the_main_container():
    line = "nvidia-smi -L && echo 'a b' > /tmp/x; exit 3"
    url = urlsplit(_podexec.exec_path("team a", "pod-1", line))
    assert url.path == "/api/v1/namespaces/team%20a/pods/pod-1/exec"
    assert parse_qsl(url.query) == [("command", "sh"), ("command", "-c"), ("command", line),
                                    ("container", "main"), ("stdout", "true"),
                                    ("stderr", "true")]


@pytest.mark.parametrize("raw,code", [
    (b'{"metadata":{},"status":"Success"}', 0),
    (b"", 0),  # client-go: an error channel closed empty is a success
    (b'{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit '
     b'code: error executing command [sh -c exit 42], exit code 42","reason":"NonZeroExitCode",'
     b'"details":{"causes":[{"reason":"ExitCode","message":"42"}]}}', 42),
])
def test_the_error_channel_status_is_the_exit_code(raw, code):
    assert _podexec.exit_code(raw, "kubernetes", "p") == code


def test_a_failure_without_an_exit_code_is_an_error_saying_why():
    raw = (b'{"status":"Failure","reason":"InternalError","message":"OCI runtime exec failed: '
           b'exec: \\"sh\\": executable file not found in $PATH"}')
    with pytest.raises(APIError) as caught:
        _podexec.exit_code(raw, "kubernetes", "p")
    assert "executable file not found" in str(caught.value) and "/bin/sh" in caught.value.hint
    with pytest.raises(APIResponseValidationError):
        _podexec.exit_code(b"not json", "kubernetes", "p")


def test_a_static_token_signs_the_upgrade_and_has_no_renewal():
    signer = _podexec._Signer(BearerAuth(SecretStr("static-tok")), "https://k/exec")
    assert signer.headers() == {"Authorization": "Bearer static-tok"}
    assert signer.after_401() is None
    assert _podexec._Signer(None, "https://k/exec").headers() == {}  # client certificate


class Counting(TokenSource):
    def __init__(self) -> None:
        self.runs = 0

    def initial_request(self) -> httpx.Request:  # pragma: no cover - obtain answers
        raise NotImplementedError

    def parse(self, response: httpx.Response, now: float) -> Token:  # pragma: no cover
        raise NotImplementedError

    def obtain(self, now: float) -> Token:
        self.runs += 1
        return Token(access_token=SecretStr(f"plugin-tok-{self.runs}"), expires_at=now + 3600)


def test_a_plugin_token_signs_the_upgrade_and_is_renewed_once_after_a_401():
    source = Counting()
    auth = RefreshingTokenAuth(source)
    signer = _podexec._Signer(auth, "https://k/exec")
    assert signer.headers() == {"Authorization": "Bearer plugin-tok-1"}
    assert signer.after_401() == {"Authorization": "Bearer plugin-tok-2"}
    assert source.runs == 2
    # The REST calls go on with the renewed token: one token, one place.
    assert auth.redact("plugin-tok-2") == "[secure]"


def test_tls_follows_the_kubeconfig():
    custom = ssl.create_default_context()
    assert _podexec._ssl(custom) is custom
    insecure = _podexec._ssl(False)
    assert insecure.verify_mode == ssl.CERT_NONE and not insecure.check_hostname
    assert _podexec._ssl(True).verify_mode == ssl.CERT_REQUIRED


def test_websockets_is_imported_only_when_an_exec_runs():
    code = ("import sys, gpucloud.client.sync_client, gpucloud.providers.kubernetes.adapter; "
            "print('websockets' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
