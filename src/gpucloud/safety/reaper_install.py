"""Ready-to-run reaper deployments: a systemd user timer, a Kubernetes CronJob,
and a Kubernetes Deployment of elected reapers.

Both run ``gpucloud reap`` every minute from a small always-on box or a
cluster, so deadlines hold while the laptop that created the machines sleeps.
No secret is ever written into them: systemd reads the keys from an
environment file the user fills in (mode 600), the CronJob from a Secret the
user creates; the files only name the variables.

The CronJob gets gpucloud from the one install source (remote_install): it
runs ``[remote] image`` when set, else a stock Python image that pip-installs
the source at start. The service runs on this computer: with ``[remote]
install`` set it installs that into a virtual environment of its own before
its first run (again only when the source changes); without it, it runs the
gpucloud that wrote it (this interpreter), which surely exists.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpucloud.machine.remote_install import InstallSource, yaml_string

if TYPE_CHECKING:
    from typing import Any

SERVICE = "gpucloud-reap.service"
TIMER = "gpucloud-reap.timer"
CRONJOB = "gpucloud-reaper-cronjob.yaml"
DEPLOYMENT = "gpucloud-reaper-deployment.yaml"
# The Deployment's reapers, their ServiceAccount, Role and Lease share one name.
NAME = "gpucloud-reaper"
LEASE_KUBECONFIG = "/etc/gpucloud-reaper/kubeconfig"
# Where Kubernetes mounts a pod's ServiceAccount token and the cluster's CA
# ("Accessing the Kubernetes API from a Pod", kubernetes.io).
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
ENV_FILE = "reaper.env"
SECRET = "gpucloud-reaper-credentials"
# The image the CronJob runs without [remote] image: a stock Python image
# installs gpucloud at start, so nothing has to be built or pushed first
# ([remote] image skips the install on every run).
IMAGE = "python:3.11-slim"
VENV = "reaper-venv"  # in the data directory: the service's own gpucloud
# The service's ExecStartPre, run by sh with $1 = the venv, $2 = the source:
# (re)installs only when the source differs from the one last installed.
ENSURE_VENV = ('[ "$(cat "$1/gpucloud-source" 2>/dev/null)" = "$2" ] && exit 0; '
               'python3 -m venv "$1" && '
               '"$1/bin/pip" install --quiet --disable-pip-version-check --upgrade "$2" && '
               'echo "$2" >"$1/gpucloud-source"')


@dataclass(frozen=True)
class InstallFiles:
    service: str
    timer: str
    env_template: str
    cronjob: str
    env_file: Path
    unit_dir: Path


def unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"


_PLAIN = re.compile(r"[A-Za-z0-9_./=+:,@-]+")


def systemd_arg(text: str) -> str:
    """One word of a unit's command line, as systemd.service(5) parses it:
    quoted, with C-style escapes, "$$" for "$" and "%%" for "%" (single quotes
    when nothing needs a backslash, which keeps the shell script readable)."""
    if _PLAIN.fullmatch(text):
        return text
    text = text.replace("%", "%%").replace("$", "$$")
    if "'" not in text and "\\" not in text:
        return f"'{text}'"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(variables: list[str], source: InstallSource) -> InstallFiles:
    """The files, for the providers whose credential variables are given."""
    from gpucloud.config import settings as config

    env_file = config.config_dir() / ENV_FILE
    if source.configured:
        venv = config.data_dir() / VENV
        ensure = ["/bin/sh", "-c", ENSURE_VENV, "gpucloud-reap", str(venv), source.requirement]
        run = (f"# gpucloud from {source.requirement}, into a virtual environment of its own\n"
               f"ExecStartPre={' '.join(systemd_arg(a) for a in ensure)}\n"
               f"ExecStart={systemd_arg(str(venv / 'bin' / 'gpucloud'))} reap\n")
    else:
        # No [remote] install: the units run on this computer, where this
        # gpucloud is installed; the default source (this version from the
        # index) may not exist there, and a failed install would stop reaping.
        run = (f"# this computer's gpucloud ({sys.executable}); set [remote] install "
               "for one of its own\n"
               f"ExecStart={systemd_arg(sys.executable)} -m gpucloud reap\n")
    home = os.environ.get("GPUCLOUD_HOME")
    environment = f"Environment=GPUCLOUD_HOME={shlex.quote(home)}\n" if home else ""
    service = (
        "[Unit]\n"
        "Description=gpucloud reaper: terminate machines past their deadline\n"
        "Wants=network-online.target\nAfter=network-online.target\n\n"
        "[Service]\nType=oneshot\n"
        f"{environment}"
        f"EnvironmentFile={env_file}\n"
        f"{run}"
    )
    timer = (
        "[Unit]\nDescription=Run the gpucloud reaper every minute\n\n"
        "[Timer]\nOnBootSec=1min\nOnUnitActiveSec=1min\nAccuracySec=5s\nPersistent=true\n\n"
        "[Install]\nWantedBy=timers.target\n"
    )
    env_template = (
        "# Credentials of the gpucloud reaper (systemd EnvironmentFile). Fill in the\n"
        "# values, then: chmod 600 this file. Never commit it.\n"
        + "".join(f"{name}=\n" for name in variables)
    )
    env_refs = "".join(
        f"            - name: {name}\n"
        f"              valueFrom:\n"
        f"                secretKeyRef: {{name: {SECRET}, key: {name}}}\n"
        for name in variables)
    cronjob = (
        "# kubectl create secret generic " + SECRET + " "
        + " ".join(f"--from-literal={n}=..." for n in variables) + "\n"
        "# kubectl apply -f " + CRONJOB + "\n"
        "apiVersion: batch/v1\nkind: CronJob\n"
        "metadata:\n  name: gpucloud-reaper\n"
        "spec:\n"
        '  schedule: "* * * * *"\n'
        "  concurrencyPolicy: Forbid\n"
        "  startingDeadlineSeconds: 50\n"
        "  successfulJobsHistoryLimit: 1\n  failedJobsHistoryLimit: 3\n"
        "  jobTemplate:\n    spec:\n      backoffLimit: 0\n      activeDeadlineSeconds: 300\n"
        "      template:\n        spec:\n          restartPolicy: Never\n"
        "          containers:\n          - name: reaper\n"
        + _container(source) +
        "            env:\n"
        "            - name: GPUCLOUD_HOME\n              value: /tmp/gpucloud\n"
        + env_refs
    )
    return InstallFiles(service=service, timer=timer, env_template=env_template,
                        cronjob=cronjob, env_file=env_file, unit_dir=unit_dir())


def _container(source: InstallSource) -> str:
    """The CronJob container's image and command: [remote] image runs gpucloud
    as it is; else the stock image pip-installs the source first."""
    image, command, args = _run(source, ["reap"])
    return (f"            image: {yaml_string(image)}\n"
            f"            command: [{', '.join(yaml_string(c) for c in command)}]\n"
            f"            args: [{', '.join(yaml_string(a) for a in args)}]\n")


def _run(source: InstallSource, args: list[str]) -> tuple[str, list[str], list[str]]:
    """(image, command, args) running `gpucloud ARGS`: [remote] image runs it as
    it is; else the stock image pip-installs the source first."""
    if source.image:
        return source.image, ["gpucloud"], args
    return IMAGE, ["sh", "-c"], [f"{source.pip_shell()} && exec gpucloud {shlex.join(args)}"]


def render_deployment(variables: list[str], source: InstallSource, namespace: str) -> str:
    """Elected reapers on a cluster, one YAML stream for `kubectl apply -f`: two
    replicas of `gpucloud reap --watch 60s --lease kubernetes` (one reaps, the
    other stands by and takes over within two minutes of its death), the
    ServiceAccount they run as, a Role on their Lease only, its RoleBinding,
    and the kubeconfig that reaches the API server as that ServiceAccount."""
    import yaml  # type: ignore[import-untyped]  # lazily: only this form needs YAML

    _Dumper = _dumper()
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": "gpucloud"}

    def meta(name: str) -> dict[str, Any]:
        return {"name": name, "namespace": namespace, "labels": dict(labels)}

    image, command, args = _run(source, ["reap", "--watch", "60s", "--lease", "kubernetes"])
    env: list[dict[str, Any]] = [
        {"name": "GPUCLOUD_HOME", "value": "/tmp/gpucloud"},
        # The Lease's cluster only: the clouds' credentials stay those of the Secret.
        {"name": "GPUCLOUD_REAPER_KUBECONFIG", "value": LEASE_KUBECONFIG},
        *({"name": name, "valueFrom": {"secretKeyRef": {"name": SECRET, "key": name}}}
          for name in variables)]
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "in-cluster", "cluster": {
            "server": "https://kubernetes.default.svc",
            "certificate-authority": f"{SA_DIR}/ca.crt"}}],
        "users": [{"name": NAME, "user": {"tokenFile": f"{SA_DIR}/token"}}],
        "contexts": [{"name": "in-cluster", "context": {
            "cluster": "in-cluster", "user": NAME, "namespace": namespace}}],
        "current-context": "in-cluster"}
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME)},
        # RBAC cannot limit create by resourceNames: the authorizer does not know
        # the new object's name ("Using RBAC Authorization", kubernetes.io:
        # "You cannot restrict create or deletecollection requests by their
        # resource name"). So create is allowed on leases of this namespace;
        # get and update only on the reapers' Lease.
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
              "metadata": meta(NAME),
              "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                         "resourceNames": [NAME], "verbs": ["get", "update"]},
                        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                         "verbs": ["create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
              "metadata": meta(NAME),
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                          "name": NAME},
              "subjects": [{"kind": "ServiceAccount", "name": NAME,
                            "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(NAME + "-kubeconfig"),
              "data": {"kubeconfig": yaml.safe_dump(kubeconfig, sort_keys=False)}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(NAME),
              "spec": {
                  "replicas": 2,
                  "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
                  "template": {
                      "metadata": {"labels": dict(labels)},
                      "spec": {
                          "serviceAccountName": NAME,
                          "containers": [{
                              "name": "reaper", "image": image, "command": command,
                              "args": args, "env": env,
                              "volumeMounts": [{"name": "lease-kubeconfig",
                                                "mountPath": LEASE_KUBECONFIG.rsplit("/", 1)[0],
                                                "readOnly": True}]}],
                          "volumes": [{"name": "lease-kubeconfig",
                                       "configMap": {"name": NAME + "-kubeconfig"}}]}}}},
    ]
    head = ("# kubectl create secret generic " + SECRET + " --namespace " + namespace + " "
            + " ".join(f"--from-literal={n}=..." for n in variables) + "\n"
            "# kubectl apply -f " + DEPLOYMENT + "\n"
            "# Two reapers; each pass, the holder of the Lease " + namespace + "/" + NAME
            + " reaps and the other stands by.\n"
            "# RBAC: create cannot be limited to one name (resourceNames), so the Role\n"
            "# allows create on any Lease of the namespace, get and update on " + NAME
            + " only.\n")
    return head + "---\n".join(yaml.dump(obj, Dumper=_Dumper, sort_keys=False)
                                for obj in objects)


def _dumper() -> Any:
    import yaml

    class Dumper(yaml.SafeDumper):  # type: ignore[misc]
        """Multi-line strings (the kubeconfig) as literal blocks, readable as written."""

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def write_deployment(text: str, directory: Path) -> Path:
    path = directory / DEPLOYMENT
    path.write_text(text, encoding="utf-8")
    return path


def write(files: InstallFiles, cronjob_dir: Path) -> list[Path]:
    """Write the units, the env template (600, never overwritten: it may hold
    keys) and the CronJob manifest; returns the paths written."""
    written = []
    files.unit_dir.mkdir(parents=True, exist_ok=True)
    for name, text in ((SERVICE, files.service), (TIMER, files.timer)):
        path = files.unit_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    if not files.env_file.exists():
        files.env_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(files.env_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(files.env_template)
        written.append(files.env_file)
    manifest = cronjob_dir / CRONJOB
    manifest.write_text(files.cronjob, encoding="utf-8")
    written.append(manifest)
    return written


__all__ = ["InstallFiles", "render", "render_deployment", "write", "write_deployment"]
