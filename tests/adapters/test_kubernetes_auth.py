"""Kubernetes adapter: kubeconfig (contexts, tokens, certificates, exec plugins
whose tokens expire), Status error bodies, and TokenRequest minting (SDK, CLI)."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpucloud import Client, ServiceAccountToken
from gpucloud.providers.kubernetes import KubernetesProvider, _kubeconfig
from gpucloud.cli import app
from gpucloud.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    ConflictError,
    CredentialsError,
    InsufficientCapacityError,
    NotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    SpecError,
    exit_code_for,
)
from gpucloud.models import InstanceStatus
from tests.adapters._kubernetes_support import (  # noqa: F401 (fixtures)
    CONTEXT,
    NS,
    TOKEN,
    body,
    cluster_fixture,
    kube_path_fixture,
    kubeconfig,
    make_provider,
    run,
    status_body,
)

PLUGIN = """\
import json, os, sys
counter = os.environ["COUNTER"]
n = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
open(counter, "w").write(str(n))
if os.environ.get("FAIL"):
    sys.stderr.write("login required: run kubelogin\\n")
    sys.exit(1)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": f"exec-token-{n}",
                             "expirationTimestamp": os.environ["EXPIRES"]}}))
"""


def exec_kubeconfig(tmp_path: Path, expires: str = "2999-01-01T00:00:00Z", fail: bool = False):
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    env = [{"name": "COUNTER", "value": str(tmp_path / "count")},
           {"name": "EXPIRES", "value": expires}]
    if fail:
        env.append({"name": "FAIL", "value": "1"})
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                     "args": [str(script)], "env": env, "interactiveMode": "Never"}}
    return kubeconfig(tmp_path, user=user)


def runs(tmp_path: Path) -> int:
    return int((tmp_path / "count").read_text())


# -- kubeconfig -------------------------------------------------------------------------------


def test_context_namespace_and_token_come_from_kubeconfig(cluster, kube_path):
    provider = make_provider(kube_path)
    assert run(provider, provider.list_instances()) == []
    request = cluster.requests[-1]
    assert str(request.url).startswith(f"https://k8s.test:6443/api/v1/namespaces/{NS}/pods")
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in repr(provider.target) and TOKEN not in repr(provider.auth())


def test_a_context_is_chosen_by_environment(tmp_path, monkeypatch):
    path = kubeconfig(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["contexts"].append({"name": "other", "context": {"cluster": "cks-cluster",
                                                         "user": "gpucloud-sa"}})
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.setenv("GPUCLOUD_COREWEAVE_CONTEXT", "other")
    provider = make_provider(path)
    assert (provider.target.context, provider.namespace) == ("other", "default")
    monkeypatch.setenv("GPUCLOUD_COREWEAVE_CONTEXT", "missing")
    with pytest.raises(ConfigurationError, match="no context 'missing'") as info:
        make_provider(path).target
    assert "gpucloud@cks-cluster" in info.value.hint


def test_kubeconfig_is_found_through_KUBECONFIG(tmp_path, monkeypatch):  # noqa: N802 - the variable's name
    path = kubeconfig(tmp_path)
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "absent"), str(path)]))
    client = Client(providers=["kubernetes"])
    credential = client._ctx.credential("kubernetes")
    assert (credential.client_id, credential.source) == (str(path), "env:KUBECONFIG")
    # A preset needs its own variable: one cluster is never two providers.
    assert Client()._ctx.credential("coreweave") is None
    monkeypatch.setenv("GPUCLOUD_COREWEAVE_KUBECONFIG", str(path))
    assert Client()._ctx.credential("coreweave").source == "env:GPUCLOUD_COREWEAVE_KUBECONFIG"
    monkeypatch.delenv("KUBECONFIG")
    assert Client()._ctx.credential("kubernetes") is None
    assert "kubernetes" not in Client()._ctx.scope(None)  # not configured: not in scope


def _self_signed(tmp_path: Path) -> tuple[bytes, bytes]:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=k8s.test", "-keyout", str(tmp_path / "key.pem"),
                    "-out", str(tmp_path / "cert.pem")], check=True, capture_output=True)
    return (tmp_path / "cert.pem").read_bytes(), (tmp_path / "key.pem").read_bytes()


def test_ca_and_client_certificate_data_make_the_tls_context(tmp_path):
    cert, key = _self_signed(tmp_path)
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    path = kubeconfig(tmp_path, user={"client-certificate-data": b64(cert),
                                      "client-key-data": b64(key)},
                      **{"certificate-authority-data": b64(cert)})
    target = _kubeconfig.load(str(path))
    context = target.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "k8s.test"),),)]
    broken = kubeconfig(tmp_path, user={"client-certificate-data": b64(cert),
                                        "client-key-data": b64(b"not a key")})
    with pytest.raises(ConfigurationError, match="client certificate or key is unusable"):
        _kubeconfig.load(str(broken)).ssl_context()
    with pytest.raises(ConfigurationError, match="needs its key"):
        _kubeconfig.load(str(kubeconfig(tmp_path, user={"client-certificate-data": b64(cert)})))


def test_an_unusable_certificate_authority_is_a_configuration_error(tmp_path):
    for cluster in ({"certificate-authority": str(tmp_path / "absent.pem")},
                    {"certificate-authority-data": base64.b64encode(b"garbage").decode()}):
        target = _kubeconfig.load(str(kubeconfig(tmp_path, **cluster)))
        with pytest.raises(ConfigurationError, match="certificate authority is unusable"):
            target.ssl_context()


def test_unsupported_users_are_refused_clearly(tmp_path):
    path = kubeconfig(tmp_path, user={"auth-provider": {"name": "oidc"}})
    with pytest.raises(ConfigurationError, match="auth-provider"):
        _kubeconfig.load(str(path))


# -- exec plugins -------------------------------------------------------------------------------


def test_exec_plugin_token_is_reused_until_it_expires_then_renewed(cluster, tmp_path):
    provider = make_provider(exec_kubeconfig(tmp_path), KubernetesProvider)
    cluster.bearer = "Bearer exec-token-1"
    run(provider, provider.list_instances())
    run(provider, provider.list_instances())
    assert runs(tmp_path) == 1
    auth = provider.auth()
    assert auth.token_expires_at == 32472144000.0  # 2999-01-01: expirationTimestamp read
    # Mid-run the token expires: the next request runs the plugin again, once.
    auth.clock = lambda: time.time() + 10 ** 11
    cluster.bearer = "Bearer exec-token-2"
    run(provider, provider.list_instances())
    assert runs(tmp_path) == 2
    assert "exec-token" not in repr(auth)


def test_a_401_runs_the_plugin_once_more_and_retries(cluster, tmp_path):
    provider = make_provider(exec_kubeconfig(tmp_path), KubernetesProvider)
    cluster.bearer = "Bearer exec-token-2"  # the cluster no longer takes the first token
    assert run(provider, provider.list_instances()) == []
    assert runs(tmp_path) == 2
    cluster.bearer = "Bearer never"
    with pytest.raises(AuthenticationError) as info:
        run(provider, provider.list_instances())
    assert "exec-token" not in str(info.value) and "kubectl auth whoami" in info.value.hint


def test_a_failing_plugin_is_a_credentials_error_with_its_message(cluster, tmp_path):
    provider = make_provider(exec_kubeconfig(tmp_path, fail=True), KubernetesProvider)
    with pytest.raises(CredentialsError, match="login required: run kubelogin") as info:
        run(provider, provider.list_instances())
    assert exit_code_for(info.value) == 3 and not cluster.requests


def test_a_missing_plugin_shows_its_install_hint(cluster, tmp_path):
    path = kubeconfig(tmp_path, user={"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                "command": "no-such-plugin-xyz",
                                                "interactiveMode": "Never",
                                                "installHint": "brew install no-such-plugin"}})
    provider = make_provider(path, KubernetesProvider)
    with pytest.raises(CredentialsError, match="not installed") as info:
        run(provider, provider.list_instances())
    assert info.value.hint == "brew install no-such-plugin"


# -- Status bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize("code, cls, exit_code", [
    (401, AuthenticationError, 4), (403, PermissionDeniedError, 4), (404, NotFoundError, 5),
    (409, ConflictError, 10), (422, BadRequestError, None)])
def test_status_bodies_map_to_the_hierarchy(cluster, kube_path, code, cls, exit_code):
    cluster.fail[("GET", r".*/pods/gpucloud-gc-1")] = (code, status_body(code))
    provider = make_provider(kube_path)
    with pytest.raises(cls) as info:
        run(provider, provider.get("gpucloud-gc-1"))
    error = info.value
    assert type(error) is cls and error.status_code == code
    assert error.provider_code == status_body(code)["reason"]
    assert status_body(code)["message"] in str(error)
    if exit_code is not None:
        assert exit_code_for(error) == exit_code


def test_quota_refusal_is_quota_exceeded(cluster, kube_path):
    quota = dict(status_body(403), message='pods "x" is forbidden: exceeded quota: gpu, '
                 'requested: requests.nvidia.com/gpu=8, used: 0, limited: 4')
    cluster.fail[("POST", r".*/pods")] = (403, quota)
    provider = make_provider(kube_path)
    from tests.adapters.test_kubernetes_instances import spec

    with pytest.raises(QuotaExceededError, match="exceeded quota"):
        run(provider, provider.create(spec()))


# -- create --wait on an Unschedulable pod -------------------------------------------------------


def test_wait_ends_with_no_capacity_and_the_schedulers_message(cluster, kube_path, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_COREWEAVE_KUBECONFIG", str(kube_path))
    monkeypatch.setenv("GPUCLOUD_COREWEAVE_UNSCHEDULABLE_TIMEOUT", "30")
    pod = body("create_pod_request_gpu.json")
    pod["metadata"]["name"] = "gpucloud-gc-0000000001"
    pod["status"] = body("pod_status_pending_unschedulable.json")
    cluster.pods[pod["metadata"]["name"]] = pod
    slept = []
    client = Client(providers=["coreweave"], sleep=slept.append)
    with pytest.raises(InsufficientCapacityError, match="12 Insufficient nvidia.com/gpu") as info:
        client.wait("coreweave/gpucloud-gc-0000000001", timeout=600)
    assert exit_code_for(info.value) == 6
    assert 30 <= sum(slept) < 60  # the configured time, not the wait's 600 s
    pod["status"] = {"phase": "Running"}
    assert client.wait("coreweave/gpucloud-gc-0000000001").status == InstanceStatus.RUNNING


# -- TokenRequest ------------------------------------------------------------------------------


def _token_route(cluster, status: int = 201, payload=None, ns: str = NS) -> None:
    cluster.fail[("POST", rf"/api/v1/namespaces/{ns}/serviceaccounts/gpucloud-sa/token")] = (
        status, payload or body("token_request_response_201.json"))


def test_sdk_mints_a_token_with_the_requested_lifetime(cluster, kube_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(kube_path))
    _token_route(cluster)
    minted = Client().provider("kubernetes").service_account_token("gpucloud-sa", ttl="1h")
    assert isinstance(minted, ServiceAccountToken)
    sent = cluster.requests[-1]
    assert json.loads(sent.content) == body("token_request_request.json")
    assert minted.token.get_secret_value().startswith("eyJhbGciOiJSUzI1NiIs")
    assert minted.expires_at.isoformat() == "2026-01-01T01:00:00+00:00"
    assert (minted.namespace, minted.service_account) == (NS, "gpucloud-sa")
    assert "eyJ" not in repr(minted)


def test_a_lifetime_under_ten_minutes_is_refused_before_any_request(cluster, kube_path,
                                                                     monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(kube_path))
    calls = Client().provider("kubernetes")
    with pytest.raises(SpecError, match="10 minutes"):
        calls.service_account_token("gpucloud-sa", ttl="5m")
    assert not cluster.requests
    _token_route(cluster, 422, body("status_422_invalid.json"))
    with pytest.raises(BadRequestError, match="less than 10 minutes"):
        calls.service_account_token("gpucloud-sa", ttl="10m")


def test_kubernetes_token_still_works_for_a_release_with_a_deprecation_warning(
        cluster, kube_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(kube_path))
    _token_route(cluster)
    with pytest.warns(DeprecationWarning, match=r"provider\('kubernetes'\)"):
        minted = Client().kubernetes_token("gpucloud-sa", ttl="1h")
    assert json.loads(cluster.requests[-1].content) == body("token_request_request.json")
    assert isinstance(minted, ServiceAccountToken) and minted.service_account == "gpucloud-sa"


def test_a_provider_without_extra_calls_has_none_and_says_so():
    calls = Client().provider("lambda")
    assert calls.calls == () and calls.name == "lambda" and calls.auth_kind == "api_key"
    assert Client().provider("kubernetes").calls == ("service_account_token", "read_lease",
                                                    "write_lease")
    assert not hasattr(calls, "mint")  # an AttributeError too: hasattr answers
    with pytest.raises(SpecError) as info:
        calls.mint("x")
    assert str(info.value) == "lambda has no provider call 'mint'"
    assert "no provider-specific calls" in info.value.hint
    with pytest.raises(SpecError, match="unknown provider 'lamda'") as info:
        Client().provider("lamda")
    assert "did you mean lambda" in info.value.hint


def test_cli_names_an_unknown_provider_in_one_line():
    result = CliRunner().invoke(app, ["auth", "token", "kubernetess", "-s", "x"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "unknown provider 'kubernetess'" in result.stderr and "did you mean" in result.stderr


def test_cli_prints_the_token_alone_or_one_json_document(cluster, kube_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(kube_path))
    _token_route(cluster)
    runner = CliRunner()
    result = runner.invoke(app, ["auth", "token", "kubernetes", "--service-account",
                                 "gpucloud-sa", "--ttl", "2h"])
    assert result.exit_code == 0, result.output
    token = body("token_request_response_201.json")["status"]["token"]
    assert result.stdout == token + "\n" and result.stderr == ""
    assert json.loads(cluster.requests[-1].content)["spec"]["expirationSeconds"] == 7200
    _token_route(cluster, ns="ci")
    result = runner.invoke(app, ["auth", "token", "kubernetes", "-s", "gpucloud-sa",
                                 "--namespace", "ci", "--json"])
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout) == {"provider": "kubernetes", "namespace": "ci",
                                         "service_account": "gpucloud-sa", "token": token,
                                         "expires_at": "2026-01-01T01:00:00Z"}
    result = runner.invoke(app, ["auth", "token", "kubernetes", "-s", "x", "--ttl", "1m",
                                 "--json"])
    assert result.exit_code == 2 and json.loads(result.stdout)["error"]["code"]


def test_auth_login_points_to_the_kubeconfig_instead_of_the_keyring():
    result = CliRunner().invoke(app, ["auth", "login", "coreweave", "--json"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert "kubeconfig" in error["message"] and "GPUCLOUD_COREWEAVE_KUBECONFIG" in error["hint"]


async def test_async_client_mints_and_exec_tokens_work_on_asyncio(cluster, tmp_path, monkeypatch):
    from gpucloud import AsyncClient

    monkeypatch.setenv("KUBECONFIG", str(exec_kubeconfig(tmp_path)))
    cluster.bearer = "Bearer exec-token-1"
    _token_route(cluster, ns="default")
    async with AsyncClient(providers=["kubernetes"]) as client:
        assert await client.list() == []
        minted = await client.provider("kubernetes").service_account_token(
            "gpucloud-sa", namespace="default", ttl="10m")
        with pytest.warns(DeprecationWarning):
            again = await client.kubernetes_token("gpucloud-sa", namespace="default",
                                                  ttl="10m")
    assert isinstance(minted, ServiceAccountToken) and again.namespace == "default"
    assert minted.expires_at.year == 2026 and runs(tmp_path) == 1
    assert json.loads(cluster.requests[-1].content)["spec"]["expirationSeconds"] == 600
