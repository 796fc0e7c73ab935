"""Ready-to-run reaper deployments: a systemd user timer and a Kubernetes CronJob.

Both run ``gpucloud reap`` every minute from a small always-on box or a
cluster, so deadlines hold while the laptop that created the machines sleeps.
No secret is ever written into them: systemd reads the keys from an
environment file the user fills in (mode 600), the CronJob from a Secret the
user creates; the files only name the variables.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

SERVICE = "gpucloud-reap.service"
TIMER = "gpucloud-reap.timer"
CRONJOB = "gpucloud-reaper-cronjob.yaml"
ENV_FILE = "reaper.env"
SECRET = "gpucloud-reaper-credentials"
# The image the CronJob runs: a stock Python image installs gpucloud at start,
# so nothing has to be built or pushed first (replace with your own image to
# skip the install on every run).
IMAGE = "python:3.11-slim"


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


def render(variables: list[str], version: str) -> InstallFiles:
    """The files, for the providers whose credential variables are given."""
    from . import config

    env_file = config.config_dir() / ENV_FILE
    command = [sys.executable, "-m", "gpucloud", "reap"]
    home = os.environ.get("GPUCLOUD_HOME")
    environment = f"Environment=GPUCLOUD_HOME={shlex.quote(home)}\n" if home else ""
    service = (
        "[Unit]\n"
        "Description=gpucloud reaper: terminate machines past their deadline\n"
        "Wants=network-online.target\nAfter=network-online.target\n\n"
        "[Service]\nType=oneshot\n"
        f"{environment}"
        f"EnvironmentFile={env_file}\n"
        f"ExecStart={shlex.join(command)}\n"
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
        f"            image: {IMAGE}\n"
        '            command: ["sh", "-c"]\n'
        f'            args: ["pip install --quiet gpucloud=={version} && gpucloud reap"]\n'
        "            env:\n"
        "            - name: GPUCLOUD_HOME\n              value: /tmp/gpucloud\n"
        + env_refs
    )
    return InstallFiles(service=service, timer=timer, env_template=env_template,
                        cronjob=cronjob, env_file=env_file, unit_dir=unit_dir())


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


__all__ = ["InstallFiles", "render", "write"]
