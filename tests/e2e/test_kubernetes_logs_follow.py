"""`gpucloud jobs logs -f` against the Kubernetes API emulator over loopback
HTTP, in real time: the lines come while the job runs and the command ends
with the job (the jobs core polls the pod's log; no follow=true stream)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gpucloud.providers.kubernetes")

from typer.testing import CliRunner

from gpucloud.cli import app
from tests.k8s_emulator import Knobs, KubeEmulator, write_kubeconfig

NS = "gpu-team"


@pytest.fixture
def kubeconfig(tmp_path, monkeypatch):
    knobs = Knobs(pod_start_seconds=0.2, job_run_seconds=1.5,
                  pod_log=lambda pod: ["epoch 1", "epoch 2"])
    with KubeEmulator(namespaces=("default", NS), knobs=knobs, tls=True) as emulator:
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(
            tmp_path / "kubeconfig", emulator, namespace=NS)))
        home = tmp_path / "gpucloud-home"  # conftest's GPUCLOUD_HOME
        home.mkdir(exist_ok=True)
        (home / "config.toml").write_text('[kubernetes.prices]\nH100 = "2.21"\n')
        monkeypatch.setattr("gpucloud.jobs.ops.FOLLOW_INTERVAL", 0.1)
        yield emulator


def test_jobs_logs_follow_prints_the_lines_until_the_job_ends(kubeconfig, tmp_path):
    job_file = tmp_path / "job.yaml"
    job_file.write_text("name: follow\nimage: busybox\ncommand: [python, train.py]\n"
                        "resources: {gpu: h100, gpu_count: 1}\nmax_runtime: 1h\n")
    runner = CliRunner()
    submitted = runner.invoke(app, ["submit", str(job_file), "--provider", "kubernetes",
                                    "--yes", "--json"])
    assert submitted.exit_code == 0, submitted.output
    ref = json.loads(submitted.stdout)["job"]["ref"]
    followed = runner.invoke(app, ["jobs", "logs", "-f", ref])
    assert followed.exit_code == 0, followed.output
    lines = followed.stdout.splitlines()
    assert "$ python train.py" in lines and "epoch 1" in lines and "epoch 2" in lines
    assert lines[-1] == "training done"  # followed to the end, each line once
    assert len(lines) == len(set(lines))
