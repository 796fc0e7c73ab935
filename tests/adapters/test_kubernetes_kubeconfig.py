"""kubeconfig read and used as kubectl does (k8s.io/client-go tools/clientcmd,
transport, plugin/pkg/client/auth/exec): KUBECONFIG lists merged, proxy-url and
the proxy environment, tls-server-name, impersonation, exec plugins."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucloud import Client
from gpucloud.providers.kubernetes import KubernetesProvider, _kubeconfig
from gpucloud.providers.kubernetes._exec import ExecTokenSource
from gpucloud.providers.kubernetes._transport import (
    header_key_escape,
    impersonation_headers,
    proxy_for,
)
from gpucloud.errors import ConfigurationError, CredentialsError, exit_code_for
from tests.adapters._kube_net_support import CA, ConnectProxy, TLSServer
from tests.adapters._kubernetes_support import (  # noqa: F401 (fixtures)
    FIXTURES,
    cluster_fixture,
    kubeconfig,
    make_provider,
    run,
)
from tests.k8s_emulator import KubeEmulator, write_kubeconfig

MERGED = FIXTURES / "merged"
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
                   "no_proxy", "REQUEST_METHOD")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def config(clusters=(), users=(), contexts=(), current: str = "") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": n, "cluster": c} for n, c in clusters],
            "users": [{"name": n, "user": u} for n, u in users],
            "contexts": [{"name": n, "context": c} for n, c in contexts]}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- KUBECONFIG lists are merged -------------------------------------------------------------


def test_kubeconfig_files_merge_first_file_wins_missing_skipped():
    """kubernetes_asyncio's TestKubeConfigMerger parts (../fixtures/kubernetes/merged)."""
    paths = [str(MERGED / "part1.yaml"), str(MERGED / "absent.yaml"),
             str(MERGED / "part2.yaml"), str(MERGED / "part3.yaml")]
    # current-context: part1's; part2's empty one and part3's do not override it.
    current = _kubeconfig.load(paths)
    assert (current.context, current.server, current.token) == ("no_user", "test-host", None)
    # "ssl" is named by part2 and part3: part2's entry, whole.
    ssl_ctx = _kubeconfig.load(paths, "ssl")
    assert ssl_ctx.server == "https://test-host" and ssl_ctx.ca_data == b"cert-auth"
    assert ssl_ctx.token.get_secret_value() == base64.b64encode(b"test-data").decode()
    # A context of part2 may use a user only part3 defines (the maps are merged).
    with pytest.raises(ConfigurationError, match="basic auth"):
        _kubeconfig.load(paths, "simple_token")
    with pytest.raises(ConfigurationError, match="auth-provider"):
        _kubeconfig.load(paths, "expired_oidc")
    # The same string as KUBECONFIG spells it.
    assert _kubeconfig.load(os.pathsep.join(paths), "ssl").server == "https://test-host"


def test_conflicting_entries_come_whole_from_the_first_file(tmp_path):
    """client-go loader_test.go: testConfigAlfa then testConfigConflictAlfa."""
    alfa = write(tmp_path / "alfa", config(
        clusters=[("cow-cluster", {"server": "http://cow.org:8080"})],
        users=[("red-user", {"token": "red-token"})],
        contexts=[("federal-context", {"cluster": "cow-cluster", "user": "red-user",
                                       "namespace": "hammer-ns"})]))
    conflict = write(tmp_path / "conflict", config(
        clusters=[("cow-cluster", {"server": "http://a-different-cow.org:8080",
                                   "insecure-skip-tls-verify": True}),
                  ("donkey-cluster", {"server": "http://donkey.org:8080",
                                      "insecure-skip-tls-verify": True})],
        users=[("red-user", {"token": "a-different-red-token"}),
               ("yellow-user", {"token": "yellow-token"})],
        current="federal-context"))
    target = _kubeconfig.load([str(alfa), str(conflict)])
    # current-context only the second file sets: it is used (the first set none).
    assert target.context == "federal-context" and target.namespace == "hammer-ns"
    assert target.server == "http://cow.org:8080" and target.insecure is False
    assert target.token.get_secret_value() == "red-token"
    # Reversed, the other file's entries win, whole.
    other = _kubeconfig.load([str(conflict), str(alfa)])
    assert other.server == "http://a-different-cow.org:8080" and other.insecure is True
    assert other.token.get_secret_value() == "a-different-red-token"


def test_relative_paths_resolve_against_the_file_that_holds_them(tmp_path):
    """client-go loader_test.go TestResolveRelativePaths: two files in two folders."""
    one, two = tmp_path / "one", tmp_path / "deep" / "two"
    write(one / "config", config(
        users=[("relative-cmd-1", {"exec": {"command": "../relative/client/cmd",
                                            "apiVersion": "client.authentication.k8s.io/v1",
                                            "interactiveMode": "Never"}}),
               ("PATH-cmd-1", {"exec": {"command": "cmd", "interactiveMode": "Never",
                                        "apiVersion": "client.authentication.k8s.io/v1"}})],
        clusters=[("relative-server-1", {"server": "https://one",
                                         "certificate-authority": "../relative/ca"})],
        contexts=[("c1", {"cluster": "relative-server-1", "user": "relative-cmd-1"}),
                  ("c2", {"cluster": "relative-server-2", "user": "PATH-cmd-1"}),
                  ("c3", {"cluster": "relative-server-2", "user": "relative-user-2"})]))
    write(two / "config", config(
        users=[("relative-user-2", {"client-certificate": "relative/client/cert2",
                                    "client-key": "../relative/client/key2",
                                    "tokenFile": "token"})],
        clusters=[("relative-server-2", {"server": "https://two",
                                         "certificate-authority": "../relative/ca2"})]))
    paths = [str(one / "config"), str(two / "config")]
    first = _kubeconfig.load(paths, "c1")
    assert first.ca_file == os.path.join(one, "../relative/ca")
    assert first.exec.command == os.path.join(one, "../relative/client/cmd")
    second = _kubeconfig.load(paths, "c2")
    assert second.ca_file == os.path.join(two, "../relative/ca2")
    assert second.exec.command == "cmd"  # looked up on PATH, never made a path
    third = _kubeconfig.load(paths, "c3")
    assert third.client_cert[0] == os.path.join(two, "relative/client/cert2")
    assert third.client_key[0] == os.path.join(two, "../relative/client/key2")
    assert third.token_file == os.path.join(two, "token")


def test_a_name_twice_in_one_file_is_an_error(tmp_path):
    path = write(tmp_path / "dup", config(
        clusters=[("kubeconfig-cluster", {"server": "https://a"}),
                  ("kubeconfig-cluster", {"server": "https://b"})],
        contexts=[("c", {"cluster": "kubeconfig-cluster"})], current="c"))
    with pytest.raises(ConfigurationError, match="duplicate name 'kubeconfig-cluster'"):
        _kubeconfig.load(str(path))


def test_the_usual_multi_cluster_setup_works_through_KUBECONFIG(tmp_path, monkeypatch):  # noqa: N802 - the variable's name
    """~/.kube/config for the home cluster, a second file for CoreWeave's, chosen
    by name; and with no current-context in the first, the second's applies."""
    with KubeEmulator() as emulator:
        home = write(tmp_path / "config", config(
            clusters=[("home", {"server": "https://home.invalid:6443"})],
            users=[("me", {"token": "home-token"})],
            contexts=[("home", {"cluster": "home", "user": "me"})], current="home"))
        second = write_kubeconfig(tmp_path / "coreweave.yaml", emulator, context="coreweave")
        monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(home), str(second)]))
        monkeypatch.setenv("GPUCLOUD_KUBERNETES_CONTEXT", "coreweave")
        assert Client(providers=["kubernetes"]).list() == []
        assert emulator.requests, "the chosen context's cluster was asked"
        monkeypatch.delenv("GPUCLOUD_KUBERNETES_CONTEXT")
        raw = yaml.safe_load(home.read_text())
        raw["current-context"] = ""
        home.write_text(yaml.safe_dump(raw))
        before = len(emulator.requests)
        assert Client(providers=["kubernetes"]).list() == []
        assert len(emulator.requests) > before


def test_a_set_kubeconfig_is_the_whole_chain_as_in_client_go(tmp_path, monkeypatch):
    """client-go's ClientConfigLoadingRules: with KUBECONFIG set, ~/.kube/config
    is not read, even when every file listed is missing (kubectl then has no
    configuration; it never falls back to another cluster)."""
    from gpucloud.config.credentials import CredentialStore

    home = Path(os.environ["HOME"])
    write(home / ".kube" / "config", config(
        clusters=[("home", {"server": "https://home.invalid:6443"})],
        users=[("me", {"token": "home-token"})],
        contexts=[("home", {"cluster": "home", "user": "me"})], current="home"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing.yaml"))
    assert CredentialStore().find("kubernetes", "kubeconfig") is None
    monkeypatch.setenv("KUBECONFIG", "")
    found = CredentialStore().find("kubernetes", "kubeconfig")
    assert found is not None and found.source == "~/.kube/config"


# -- proxies ------------------------------------------------------------------------------------


def test_proxy_url_tunnels_through_a_connect_proxy_to_the_emulator(tmp_path):
    with KubeEmulator(tls=True) as emulator, ConnectProxy() as proxy:
        path = write_kubeconfig(tmp_path / "kubeconfig", emulator)
        raw = yaml.safe_load(path.read_text())
        raw["clusters"][0]["cluster"]["proxy-url"] = proxy.url
        path.write_text(yaml.safe_dump(raw))
        provider = make_provider(path, KubernetesProvider)
        assert run(provider, provider.list_instances()) == []
        port = emulator.url.rsplit(":", 1)[1]
        assert proxy.tunnels and set(proxy.tunnels) == {f"127.0.0.1:{port}"}
        assert emulator.requests


def test_https_proxy_environment_is_used_like_go_proxy_from_environment(tmp_path, monkeypatch):
    with KubeEmulator(tls=True) as emulator:
        port = int(emulator.url.rsplit(":", 1)[1])
        with ConnectProxy(to=("127.0.0.1", port)) as proxy:
            path = write_kubeconfig(tmp_path / "kubeconfig", emulator)
            raw = yaml.safe_load(path.read_text())
            # A name only the proxy can reach; the certificate is for localhost.
            raw["clusters"][0]["cluster"].update(server=f"https://k8s.test:{port}",
                                                 **{"tls-server-name": "localhost"})
            path.write_text(yaml.safe_dump(raw))
            monkeypatch.setenv("HTTPS_PROXY", f"127.0.0.1:{proxy.port}")  # scheme assumed
            provider = make_provider(path, KubernetesProvider)
            assert run(provider, provider.list_instances()) == []
            assert proxy.tunnels == [f"k8s.test:{port}"] * len(proxy.tunnels)


@pytest.mark.parametrize("server, no_proxy, proxied", [
    # The rules of golang.org/x/net/http/httpproxy Config.NoProxy and useProxy.
    ("https://foo.com", "foo.com", False),
    ("https://bar.foo.com", "foo.com", False),
    ("https://x.y.com", ".y.com", False),
    ("https://y.com", ".y.com", True),
    ("https://anything.example", "*", False),
    ("https://10.1.2.3", "10.0.0.0/8", False),
    ("https://10.1.2.3:6443", "10.1.2.3:443", True),
    ("https://10.1.2.3", "10.1.2.3:443", False),
    ("https://api.example:6443", "api.example:6443", False),
    ("https://api.example", "other.example", True),
    ("https://localhost:6443", "", False),  # never for localhost or loopback
    ("https://127.0.0.1:6443", "", False),
])
def test_no_proxy_rules_are_gos(server, no_proxy, proxied):
    target = _kubeconfig.KubeTarget(path="k", context="c", server=server)
    env = {"HTTPS_PROXY": "http://proxy.example:3128", "NO_PROXY": no_proxy}
    assert proxy_for(target, env) == ("http://proxy.example:3128" if proxied else None)
    assert proxy_for(target, {"https_proxy": "http://p:1", "no_proxy": no_proxy}) == (
        "http://p:1" if proxied else None)


def test_http_servers_use_http_proxy_and_proxy_url_always_wins():
    plain = _kubeconfig.KubeTarget(path="k", context="c", server="http://api.example")
    assert proxy_for(plain, {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://q:2"}) == (
        "http://p:1")
    with pytest.raises(ConfigurationError, match="CGI"):
        proxy_for(plain, {"HTTP_PROXY": "http://p:1", "REQUEST_METHOD": "GET"})
    pinned = _kubeconfig.KubeTarget(path="k", context="c", server="https://127.0.0.1",
                                    proxy_url="http://pinned:3128")
    assert proxy_for(pinned, {"NO_PROXY": "*"}) == "http://pinned:3128"


def test_a_socks5_proxy_url_is_refused_clearly(tmp_path):
    path = kubeconfig(tmp_path, **{"proxy-url": "socks5://user:secret@127.0.0.1:1080"})
    with pytest.raises(ConfigurationError, match="SOCKS5") as info:
        _kubeconfig.load(str(path))
    assert "secret" not in str(info.value) and exit_code_for(info.value) == 3
    with pytest.raises(ConfigurationError, match="unsupported scheme 'ftp'"):
        _kubeconfig.load(str(kubeconfig(tmp_path, **{"proxy-url": "ftp://p"})))


# -- tls-server-name -------------------------------------------------------------------------------


def tls_kubeconfig(tmp_path: Path, ca: CA, port: int, **cluster: Any) -> Path:
    return write(tmp_path / "kubeconfig", config(
        clusters=[("c", {"server": f"https://127.0.0.1:{port}",
                         "certificate-authority-data": b64(ca.pem), **cluster})],
        users=[("u", {"token": "t0ken-value"})],
        contexts=[("c", {"cluster": "c", "user": "u"})], current="c"))


def test_tls_server_name_sets_sni_and_the_name_checked(tmp_path):
    ca = CA()
    with TLSServer(*ca.issue("apiserver", ("api.internal.example",))) as server:
        path = tls_kubeconfig(tmp_path, ca, server.port,
                              **{"tls-server-name": "api.internal.example"})
        provider = make_provider(path, KubernetesProvider)
        assert run(provider, provider.list_instances()) == []
        assert server.seen[-1]["sni"] == "api.internal.example"


def test_tls_server_name_holds_through_a_proxy_tunnel(tmp_path):
    ca = CA()
    with TLSServer(*ca.issue("apiserver", ("api.internal.example",))) as server, \
            ConnectProxy() as proxy:
        path = tls_kubeconfig(tmp_path, ca, server.port, **{
            "tls-server-name": "api.internal.example", "proxy-url": proxy.url})
        provider = make_provider(path, KubernetesProvider)
        assert run(provider, provider.list_instances()) == []
        assert server.seen[-1]["sni"] == "api.internal.example" and proxy.tunnels


@pytest.mark.parametrize("extra, names", [
    ({}, ["127.0.0.1"]),
    ({"tls-server-name": "wrong.example"}, ["wrong.example", "127.0.0.1"])])
def test_a_certificate_for_another_name_is_a_tls_error_with_the_names(tmp_path, extra, names):
    ca = CA()
    with TLSServer(*ca.issue("apiserver", ("api.internal.example",))) as server:
        provider = make_provider(tls_kubeconfig(tmp_path, ca, server.port, **extra),
                                 KubernetesProvider)
        with pytest.raises(ConfigurationError) as info:
            run(provider, provider.list_instances())
    message = str(info.value)
    assert "certificate" in message and all(n in message for n in names)
    assert "network" not in (info.value.hint or "") and exit_code_for(info.value) == 3
    assert "t0ken-value" not in message and "\n" not in message


# -- impersonation --------------------------------------------------------------------------------


def impersonating(tmp_path: Path, **fields: Any) -> KubernetesProvider:
    return make_provider(kubeconfig(tmp_path, user={"token": "kube-secret-token-value",
                                                    **fields}), KubernetesProvider)


def test_impersonation_headers_are_sent_as_client_go_sends_them(cluster, tmp_path):
    """client-go transport/round_trippers_test.go TestImpersonationRoundTripper, "all"."""
    provider = impersonating(tmp_path, **{
        "as": "user", "as-uid": "uid-a", "as-groups": ["one", "two"],
        "as-user-extra": {"first": ["A", "a"], "second": ["B", "b"]}})
    run(provider, provider.list_instances())
    sent = [(k.lower(), v) for k, v in cluster.requests[-1].headers.multi_items()
            if k.lower().startswith("impersonate-")]
    assert sent == [("impersonate-user", "user"), ("impersonate-uid", "uid-a"),
                    ("impersonate-group", "one"), ("impersonate-group", "two"),
                    ("impersonate-extra-first", "A"), ("impersonate-extra-first", "a"),
                    ("impersonate-extra-second", "B"), ("impersonate-extra-second", "b")]
    assert cluster.requests[-1].headers["Authorization"] == "Bearer kube-secret-token-value"


@pytest.mark.parametrize("key, header", [
    # round_trippers_test.go "escape handling" and "double escape handling".
    ("test.example.com/thing.thing", "Impersonate-Extra-Test.example.com%2fthing.thing"),
    ("test.example.com/thing.thing%20another.thing",
     "Impersonate-Extra-Test.example.com%2fthing.thing%2520another.thing")])
def test_extra_keys_are_escaped_like_client_go(key, header):
    who = _kubeconfig.Impersonation(user="user", extra=((key, ("A", "a")),))
    assert impersonation_headers(who) == [("Impersonate-User", "user"), (header, "A"),
                                          (header, "a")]


@pytest.mark.parametrize("key", ["alphabetical", "percent%20encoded", "almost%zzpercent%xx",
                                 "example.com/ᛒᚥᛏᛖᚥᚢとロビン", "abc123!#$+.-_*\\^`~|'", "@=:"])
def test_escaped_extra_keys_unescape_to_themselves(key):
    """round_trippers_test.go TestHeaderEscapeRoundTrip's keys."""
    from urllib.parse import unquote

    assert unquote(header_key_escape(key), errors="strict") == key


def test_impersonation_details_without_a_user_are_refused_not_dropped(tmp_path):
    with pytest.raises(ConfigurationError, match="without impersonating a user") as info:
        impersonating(tmp_path, **{"as-groups": ["system:masters"]}).target
    assert "as:" in info.value.hint


# -- exec plugins ---------------------------------------------------------------------------------

PLUGIN = """\
import json, os, sys
open(os.environ["INFO_FILE"], "w").write(os.environ.get("KUBERNETES_EXEC_INFO", ""))
sys.stdout.write(os.environ["ANSWER"])
"""


def plugin(tmp_path: Path, answer: dict[str, Any], version: str, mode: str = "Never",
           provide: bool = False) -> _kubeconfig.ExecConfig:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    return _kubeconfig.ExecConfig(
        command=sys.executable, args=(str(script),), api_version=version,
        interactive_mode=mode, provide_cluster_info=provide,
        env=(("INFO_FILE", str(tmp_path / "info.json")), ("ANSWER", json.dumps(answer))))


def test_provide_cluster_info_puts_the_cluster_in_exec_info(tmp_path):
    """client-go exec_test.go "beta-with-cluster-and-provide-cluster-info-is-serialized"."""
    beta = "client.authentication.k8s.io/v1beta1"
    answer = {"kind": "ExecCredential", "apiVersion": beta, "status": {"token": "foo-bar"}}
    extension = {"apiVersion": "group/v1", "kind": "PluginConfig",
                 "spec": {"audience": "snorlax"}}
    path = write(tmp_path / "kubeconfig", config(
        clusters=[("c", {"server": "foo", "tls-server-name": "bar",
                         "certificate-authority-data": b64(b"baz"),
                         "extensions": [{"name": "client.authentication.k8s.io/exec",
                                         "extension": extension}]})],
        users=[("u", {"exec": {"apiVersion": beta, "command": "plugin"}})],  # IfAvailable
        contexts=[("c", {"cluster": "c", "user": "u"})], current="c"))
    target = _kubeconfig.load(str(path))
    assert target.exec.interactive_mode == "IfAvailable"  # v1beta1's default
    source = ExecTokenSource(plugin(tmp_path, answer, beta, "IfAvailable", provide=True),
                             target=target, is_terminal=lambda: False)
    assert source.obtain(0).access_token.get_secret_value() == "foo-bar"
    assert json.loads((tmp_path / "info.json").read_text()) == {
        "kind": "ExecCredential", "apiVersion": beta,
        "spec": {"cluster": {"server": "foo", "tls-server-name": "bar",
                             "certificate-authority-data": "YmF6", "config": extension},
                 "interactive": False}}
    # Without provideClusterInfo, no cluster ("...-without-provide-cluster-info-...").
    ExecTokenSource(plugin(tmp_path, answer, beta, "IfAvailable"), target=target,
                    is_terminal=lambda: False).obtain(0)
    assert json.loads((tmp_path / "info.json").read_text())["spec"] == {"interactive": False}


def test_interactive_modes(tmp_path):
    v1 = "client.authentication.k8s.io/v1"
    answer = {"kind": "ExecCredential", "apiVersion": v1, "status": {"token": "t"}}
    with pytest.raises(CredentialsError, match="standard input is not a terminal") as info:
        ExecTokenSource(plugin(tmp_path, answer, v1, "Always"),
                        is_terminal=lambda: False).obtain(0)
    assert exit_code_for(info.value) == 3 and "interactiveMode" in info.value.hint
    assert not (tmp_path / "info.json").exists()  # refused before running it
    ExecTokenSource(plugin(tmp_path, answer, v1, "Never"), is_terminal=lambda: True).obtain(0)
    assert json.loads((tmp_path / "info.json").read_text())["spec"]["interactive"] is False


def test_exec_config_needs_api_version_and_interactive_mode(tmp_path):
    for exe, message in (({"command": "p", "interactiveMode": "Never"}, "no apiVersion"),
                         ({"command": "p", "apiVersion": "client.authentication.k8s.io/v1"},
                          "no interactiveMode"),
                         ({"command": "p", "apiVersion": "client.authentication.k8s.io/v1",
                           "interactiveMode": "Sometimes"}, "invalid interactiveMode")):
        with pytest.raises(ConfigurationError, match=message):
            _kubeconfig.load(str(kubeconfig(tmp_path, user={"exec": exe})))


def test_an_answer_of_another_api_version_is_refused(tmp_path):
    v1, beta = "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"
    answer = {"kind": "ExecCredential", "apiVersion": beta, "status": {"token": "secret-tok"}}
    with pytest.raises(CredentialsError, match=f"apiVersion {beta}.*{v1}") as info:
        ExecTokenSource(plugin(tmp_path, answer, v1)).obtain(0)
    assert "secret-tok" not in str(info.value)
    only_cert = {"kind": "ExecCredential", "apiVersion": v1,
                 "status": {"clientCertificateData": "x"}}
    with pytest.raises(CredentialsError, match="not both"):
        ExecTokenSource(plugin(tmp_path, only_cert, v1),
                        on_certificate=lambda c, k: None).obtain(0)


def test_a_plugins_client_certificate_is_used_for_mutual_tls(tmp_path):
    v1 = "client.authentication.k8s.io/v1"
    ca = CA()
    cert, key = ca.issue("exec-plugin-user", client=True)
    answer = {"kind": "ExecCredential", "apiVersion": v1,
              "status": {"clientCertificateData": cert.decode(), "clientKeyData": key.decode(),
                         "expirationTimestamp": "2999-01-01T00:00:00Z"}}
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    with TLSServer(*ca.issue("apiserver", ("127.0.0.1",)), client_ca=ca.pem) as server:
        path = write(tmp_path / "kubeconfig", config(
            clusters=[("c", {"server": f"https://127.0.0.1:{server.port}",
                             "certificate-authority-data": b64(ca.pem)})],
            users=[("u", {"exec": {
                "apiVersion": v1, "command": sys.executable, "args": [str(script)],
                "interactiveMode": "Never",
                "env": [{"name": "INFO_FILE", "value": str(tmp_path / "info.json")},
                        {"name": "ANSWER", "value": json.dumps(answer)}]}})],
            contexts=[("c", {"cluster": "c", "user": "u"})], current="c"))
        provider = make_provider(path, KubernetesProvider)
        assert run(provider, provider.list_instances()) == []
        assert server.seen[-1]["client"] == "exec-plugin-user"
        assert not any(k.lower() == "authorization" for k, _ in server.seen[-1]["headers"])


def test_a_targets_repr_shows_no_proxy_password_and_no_plugin_env(tmp_path):
    path = write(tmp_path / "kubeconfig", config(
        clusters=[("c", {"server": "https://k8s.invalid",
                         "proxy-url": "http://user:proxy-pass@proxy.invalid:3128"})],
        users=[("u", {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                               "command": "plugin", "interactiveMode": "Never",
                               "env": [{"name": "AWS_SECRET_ACCESS_KEY",
                                        "value": "plugin-secret"}]}})],
        contexts=[("x", {"cluster": "c", "user": "u"})], current="x"))
    target = _kubeconfig.load(str(path))
    assert target.proxy_url and target.exec is not None  # read, only not shown
    assert "proxy-pass" not in repr(target) and "plugin-secret" not in repr(target)
