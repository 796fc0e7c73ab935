"""`gpucloud reap --install kubernetes`: elected reapers as a Deployment, with the
ServiceAccount, Role and RoleBinding their Lease needs and nothing more. Every
manifest is checked against the Kubernetes 1.30 schema (kubernetes_validate,
strict: no field the API does not know)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from gpucloud.cli import app
from gpucloud.config.settings import load_config
from gpucloud.machine import remote_install
from gpucloud.providers.kubernetes import _kubeconfig
from gpucloud.safety import reaper_install

IMAGE = "ghcr.io/example/gpucloud:0.1.0"
WHEEL = "https://example.com/releases/gpucloud-0.1.0-py3-none-any.whl#sha256=ab12"
KEYS = ["GPUCLOUD_LAMBDA_API_KEY", "GPUCLOUD_RUNPOD_API_KEY"]


def write_config(text: str) -> None:
    home = Path(os.environ["GPUCLOUD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def manifests(text: str) -> dict[str, dict[str, Any]]:
    """The YAML stream by kind, each validated against the 1.30 schema."""
    found = {}
    for body in yaml.safe_load_all(text):
        kubernetes_validate.validate(body, "1.30.0", strict=True)
        assert body["kind"] not in found
        found[body["kind"]] = body
    return found


def render(namespace: str = "default") -> dict[str, dict[str, Any]]:
    source = remote_install.source(load_config())
    return manifests(reaper_install.render_deployment(KEYS, source, namespace))


def test_every_manifest_is_valid_and_the_deployment_runs_two_elected_reapers() -> None:
    objects = render("ops")
    assert set(objects) == {"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment"}
    assert {o["metadata"]["namespace"] for o in objects.values()} == {"ops"}
    deployment = objects["Deployment"]["spec"]
    assert deployment["replicas"] == 2
    pod = deployment["template"]["spec"]
    assert deployment["selector"]["matchLabels"].items() <= \
        deployment["template"]["metadata"]["labels"].items()
    assert pod["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"]
    [container] = pod["containers"]
    assert container["command"] == ["sh", "-c"]
    assert container["args"][0].endswith(" && exec gpucloud reap --watch 60s --lease kubernetes")
    env = {e["name"]: e for e in container["env"]}
    for key in KEYS:  # from the CronJob's Secret, never a value
        assert env[key]["valueFrom"] == {"secretKeyRef": {"name": reaper_install.SECRET,
                                                          "key": key}}
    assert env["GPUCLOUD_REAPER_KUBECONFIG"]["value"] == reaper_install.LEASE_KUBECONFIG


def test_the_image_and_install_source_are_the_cronjobs() -> None:
    write_config(f'[remote]\ninstall = "{WHEEL}"\n')
    source = remote_install.source(load_config())
    cron = yaml.safe_load(reaper_install.render(KEYS, source).cronjob)
    cron_container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    container = render()["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == cron_container["image"] == reaper_install.IMAGE
    assert container["args"][0] == cron_container["args"][0] + \
        " --watch 60s --lease kubernetes"
    write_config(f'[remote]\nimage = "{IMAGE}"\n')
    container = render()["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert (container["image"], container["command"], container["args"]) == (
        IMAGE, ["gpucloud"], ["reap", "--watch", "60s", "--lease", "kubernetes"])


def test_the_role_allows_only_the_lease_and_binds_only_the_service_account() -> None:
    objects = render("ops")
    rules = objects["Role"]["rules"]
    for rule in rules:
        assert rule["apiGroups"] == ["coordination.k8s.io"] and rule["resources"] == ["leases"]
    named = [r for r in rules if "resourceNames" in r]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": ["gpucloud-reaper"], "verbs": ["get", "update"]}]
    # create cannot be restricted by name in RBAC: the one rule without names
    assert [r["verbs"] for r in rules if "resourceNames" not in r] == [["create"]]
    binding = objects["RoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": objects["Role"]["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpucloud-reaper",
                                    "namespace": "ops"}]


def test_the_lease_kubeconfig_is_the_pods_service_account_as_gpucloud_reads_it(tmp_path):
    objects = render("ops")
    mount = objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]
    assert reaper_install.LEASE_KUBECONFIG == mount["mountPath"] + "/kubeconfig"
    config = tmp_path / "kubeconfig"
    config.write_text(objects["ConfigMap"]["data"]["kubeconfig"])
    target = _kubeconfig.load(str(config))
    assert target.server == "https://kubernetes.default.svc"
    assert target.namespace == "ops"  # the Lease lands beside its Role
    assert target.token_file == "/var/run/secrets/kubernetes.io/serviceaccount/token"


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_reap_install_kubernetes_prints_json_and_writes_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "secret-lambda-key-789")
    write_config('[reaper]\nlease_namespace = "ops"\n')
    result = cli("reap", "--install", "kubernetes", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"kubernetes_deployment", "namespace", "written", "install_source"}
    assert data["namespace"] == "ops" and data["written"] == []
    objects = manifests(data["kubernetes_deployment"])
    assert objects["Deployment"]["metadata"]["namespace"] == "ops"
    assert "secret-lambda-key-789" not in result.output
    monkeypatch.chdir(tmp_path)
    written = json.loads(cli("reap", "--install", "kubernetes", "--write", "--json").stdout)
    assert written["written"] == [str(tmp_path / reaper_install.DEPLOYMENT)]
    assert manifests((tmp_path / reaper_install.DEPLOYMENT).read_text()) == objects


def test_reap_install_alone_still_prints_the_timer_and_cronjob_only() -> None:
    result = cli("reap", "--install")
    assert result.exit_code == 0
    assert "kind: CronJob" in result.stdout and "OnUnitActiveSec=1min" in result.stdout
    assert "kind: Deployment" not in result.stdout


@pytest.mark.parametrize("args", [["reap", "--install", "nomad"], ["reap", "kubernetes"],
                                  ["reap", "--lease", "kubernetes"],
                                  ["reap", "--watch", "60s", "--lease", "etcd"],
                                  ["reap", "--watch", "0.5s", "--lease", "kubernetes"]])
def test_misused_install_target_and_lease_are_usage_errors(args) -> None:
    result = cli(*args, "--json")
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "usage" and error["hint"]


def test_in_team_mode_the_reapers_get_the_team_database_from_the_secret(monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "team-db-password-123")
    write_config('[state]\nurl = "postgresql://reaper@db.example.com:5432/gpucloud"\n')
    result = cli("reap", "--install", "kubernetes", "--json")
    assert result.exit_code == 0, result.output
    objects = manifests(json.loads(result.stdout)["kubernetes_deployment"])
    [container] = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    from_secret = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"]
                   for e in container["env"] if "valueFrom" in e}
    assert from_secret["GPUCLOUD_STATE_URL"] == reaper_install.SECRET
    assert from_secret["PGPASSWORD"] == reaper_install.SECRET
    assert "team-db-password-123" not in result.output
