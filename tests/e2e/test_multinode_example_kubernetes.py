"""examples/multinode-train.yaml as written, through the CLI, against the
Kubernetes API server emulator: the plan prices both nodes and the new volume
(from the operator's prices in config.toml), the job core makes the dataset's
claim, and the Indexed Job's two pods see one MASTER_ADDR and ranks 0 and 1."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud.cli import app
from tests.k8s_emulator import FakeClock, Knobs, KubeEmulator, write_kubeconfig
from tests.k8s_emulator.pods import container_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multinode-train.yaml"
NS = "gpu-team"
RENDEZVOUS = ("MASTER_ADDR", "NODE_RANK", "NNODES", "WORLD_SIZE", "GPUS_PER_NODE")


def print_rendezvous(pod: dict) -> list[str]:
    env = container_env(pod, pod["spec"]["containers"][0])
    return [f"{k}={env[k]}" for k in RENDEZVOUS if k in env]


@pytest.fixture
def clock():
    return FakeClock(start=time.time())


@pytest.fixture
def emulator(clock):
    knobs = Knobs(pod_start_seconds=3, terminate_seconds=5, job_run_seconds=10_000,
                  pod_log=print_rendezvous)
    with KubeEmulator(namespaces=("default", NS), clock=clock, knobs=knobs, tls=True) as emu:
        yield emu


@pytest.fixture
def home(emulator, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", emulator,
                                                          namespace=NS)))
    home = tmp_path / "gpucloud-home"
    home.mkdir()
    monkeypatch.setenv("GPUCLOUD_HOME", str(home))
    # Operator's figures (a cluster's prices are contractual; none ship), and
    # claims every node can mount at once.
    (home / "config.toml").write_text('[kubernetes]\nvolume_price = "0.10"\n'
                                      'volume_access_mode = "ReadWriteMany"\n'
                                      '[kubernetes.prices]\nH100 = "2.50"\n')
    return home


def cli(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_example_plans_and_runs_on_two_pods_with_its_volume(home, emulator, clock):
    plan = cli("submit", str(EXAMPLE), "--provider", "kubernetes", "--dry-run")["plan"]
    assert plan["instances"] == 2
    # 2 nodes x 8 GPUs x $2.50 x 12 h, plus the new 1000 GB claim at
    # $0.10/GB-month for 12 of 730 hours ($1.64)
    assert Decimal(plan["total"]) == Decimal("481.64")
    assert emulator.cluster.jobs == {}  # a dry run sends nothing

    job = cli("submit", str(EXAMPLE), "--provider", "kubernetes", "--yes")["job"]
    assert job["nodes"] == 2
    claims = [c for (ns, c) in emulator.cluster.claims]
    assert claims == ["datasets"]
    clock.advance(10)
    emulator.cluster.tick()
    pods = sorted((p for p in emulator.cluster.pods.values()
                   if (p["metadata"].get("labels") or {}).get("job-name") == job["id"]),
                  key=lambda p: p["metadata"]["name"])
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)
    seen = [dict(line.split("=", 1) for line in emulator.cluster.sims[(NS, p["metadata"]["name"])]
                 .logs if "=" in line and not line.startswith("[")) for p in pods]
    assert len({s["MASTER_ADDR"] for s in seen}) == 1
    assert sorted(s["NODE_RANK"] for s in seen) == ["0", "1"]
    assert {(s["NNODES"], s["WORLD_SIZE"], s["GPUS_PER_NODE"]) for s in seen} == {
        ("2", "16", "8")}
    assert all({"name": "volume-0", "persistentVolumeClaim": {"claimName": "datasets"}}
               in p["spec"]["volumes"] for p in pods)
    cli("jobs", "cancel", job["ref"], "--yes")
