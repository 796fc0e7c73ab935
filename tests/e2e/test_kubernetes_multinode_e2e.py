"""A two-node job through the CLI against the Kubernetes API server emulator
(tests/k8s_emulator) over real loopback HTTP: the Indexed Job's pods share
MASTER_ADDR and get distinct NODE_RANKs (what each pod's env resolves to,
the kubelet's downward API as the emulator applies it, printed in the job's
logs), get and list say 2 nodes, and cancel removes both pods and the
headless Service. Volumes: a PVC created, mounted by a job and deleted."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.cli import app
from gpucloud.jobs.spec import JobSpec
from gpucloud.models import VolumeSpec
from tests.k8s_emulator import FakeClock, Knobs, KubeEmulator, write_kubeconfig
from tests.k8s_emulator.pods import container_env

NS = "gpu-team"
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "NNODES", "WORLD_SIZE",
              "GPUCLOUD_NODE_ADDRS")


def print_rendezvous(pod: dict) -> list[str]:
    """What `env | grep` in the container would print: the kubelet's env."""
    env = container_env(pod, pod["spec"]["containers"][0])
    return [f"{k}={env[k]}" for k in RENDEZVOUS if k in env]


@pytest.fixture
def clock():
    return FakeClock(start=time.time())


@pytest.fixture
def emulator(clock):
    knobs = Knobs(pod_start_seconds=3, terminate_seconds=5, job_run_seconds=10_000,
                  pod_log=print_rendezvous)
    with KubeEmulator(namespaces=("default", NS), clock=clock, knobs=knobs,
                      tls=True) as emu:
        yield emu


@pytest.fixture
def kubeconfig(emulator, tmp_path, monkeypatch):
    path = write_kubeconfig(tmp_path / "kubeconfig", emulator, namespace=NS)
    monkeypatch.setenv("KUBECONFIG", str(path))
    home = tmp_path / "gpucloud-home"
    home.mkdir()
    monkeypatch.setenv("GPUCLOUD_HOME", str(home))
    return path


def cli(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def job_file(tmp_path, **extra: str) -> str:
    path = tmp_path / "multinode.yaml"
    fields = {"name": "ddp", "image": IMAGE, "command": "[torchrun, train.py]",
              "resources": "{gpu: h100, gpu_count: 4}", "nodes": "2", "max_runtime": "2h",
              **extra}
    path.write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    return str(path)


def pods_of(emulator, job_id: str) -> list[dict]:
    emulator.cluster.tick()  # the cluster moves on at each request; this is one
    return sorted((p for p in emulator.cluster.pods.values()
                   if (p["metadata"].get("labels") or {}).get("job-name") == job_id),
                  key=lambda p: p["metadata"]["name"])


def test_a_two_node_job_shares_the_master_and_ranks_each_pod(kubeconfig, emulator, clock,
                                                             tmp_path):
    job = cli("submit", job_file(tmp_path), "--provider", "kubernetes", "--yes")["job"]
    name = job["id"]
    assert [s for (ns, s) in emulator.cluster.services] == [name]
    service = emulator.cluster.services[(NS, name)]
    assert service["spec"]["clusterIP"] == "None"
    clock.advance(10)
    pods = pods_of(emulator, name)
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)
    assert {p["spec"]["hostname"] for p in pods} == {f"{name}-0", f"{name}-1"}
    assert {p["spec"]["subdomain"] for p in pods} == {name}
    seen = [dict(line.split("=", 1) for line in emulator.cluster.sims[(NS, p["metadata"]["name"])]
                 .logs if "=" in line and not line.startswith("[")) for p in pods]
    assert {s["MASTER_ADDR"] for s in seen} == {f"{name}-0.{name}"}
    assert sorted(s["NODE_RANK"] for s in seen) == ["0", "1"]
    assert {s["NNODES"] for s in seen} == {"2"} and {s["WORLD_SIZE"] for s in seen} == {"8"}
    assert {s["GPUCLOUD_NODE_ADDRS"] for s in seen} == {f"{name}-0.{name},{name}-1.{name}"}
    # Each rank's NODE_RANK is the Job controller's JOB_COMPLETION_INDEX for that pod.
    for pod in pods:
        env = container_env(pod, pod["spec"]["containers"][0])
        assert env["NODE_RANK"] == env["JOB_COMPLETION_INDEX"]

    got = cli("jobs", "get", job["ref"])
    got = got.get("job", got)
    assert got["nodes"] == 2 and got["status"] == "running"
    logs = CliRunner().invoke(app, ["jobs", "logs", job["ref"]])
    assert logs.exit_code == 0 and "NODE_RANK=0" in logs.stdout  # rank 0's log

    cli("jobs", "cancel", job["ref"], "--yes")
    clock.advance(30)
    emulator.cluster.tick()
    assert emulator.cluster.jobs == {} and pods_of(emulator, name) == []
    assert emulator.cluster.services == {}
    deleted = {d["kind"]: d for d in emulator.cluster.deletions if d["kind"] != "Pod"}
    assert deleted["Job"]["effective"] == "Background"
    assert deleted["Service"]["name"] == name


def test_infiniband_on_a_cluster_without_rdma_is_exit_2_naming_the_setting(
        kubeconfig, emulator, tmp_path):
    path = job_file(tmp_path, placement="{interconnect: infiniband}")
    result = CliRunner().invoke(app, ["submit", path, "--provider", "kubernetes", "--yes",
                                      "--json"])
    assert result.exit_code == 2, result.output
    assert "rdma/ib" in result.output and "rdma_resource" in result.output
    assert emulator.cluster.jobs == {} and emulator.cluster.services == {}


def test_infiniband_where_the_nodes_advertise_rdma_requests_it_per_pod(
        kubeconfig, emulator, clock, tmp_path):
    for node in emulator.cluster.nodes.values():
        node["status"]["allocatable"]["rdma/ib"] = "1k"
    path = job_file(tmp_path, placement="{interconnect: infiniband}")
    job = cli("submit", path, "--provider", "kubernetes", "--yes")["job"]
    clock.advance(10)
    pods = pods_of(emulator, job["id"])
    assert [p["spec"]["containers"][0]["resources"]["limits"]["rdma/ib"] for p in pods] == \
        ["1", "1"]
    assert all(p["status"]["phase"] == "Running" for p in pods)


def adapter_run(kubeconfig):
    """The adapter's own calls through the real driver (the SDK's volume calls
    are the job core's), against the emulator."""
    from pydantic import SecretStr

    from gpucloud.catalog.bundled import load_catalogs
    from gpucloud.config.credentials import Credential
    from gpucloud.providers.kubernetes import KubernetesProvider
    from gpucloud.transport.http import Session

    provider = KubernetesProvider(load_catalogs()["kubernetes"], Credential(
        "kubernetes", SecretStr(""), "test", client_id=str(kubeconfig)))

    def run(flow):
        session = Session(provider, sleep=lambda s: None)
        try:
            return session.run(flow)
        finally:
            session.close()
    return provider, run


def test_a_volume_is_created_mounted_by_a_two_node_job_and_deleted(kubeconfig, emulator, clock,
                                                                  monkeypatch):
    monkeypatch.setenv("GPUCLOUD_KUBERNETES_VOLUME_ACCESS_MODE", "ReadWriteMany")
    provider, run = adapter_run(kubeconfig)
    volume = run(provider.create_volume(VolumeSpec(name="data", size_gb=100,
                                                   region=provider.target.context)))
    assert (volume.id, volume.size_gb, volume.status) == ("data", 100, "Bound")
    [listed] = run(provider.list_volumes())
    assert listed.id == "data" and listed.attached_to == ()
    with Client(providers=["kubernetes"], sleep=clock.advance) as client:
        job = client.submit(JobSpec(
            name="reader", image=IMAGE, command=["python", "read.py"],
            resources={"gpu": "h100", "gpu_count": 1}, max_runtime="1h", nodes=2,
            volumes=[{"name": "data", "mount": "/data"}]), provider="kubernetes")
        clock.advance(10)
        pods = pods_of(emulator, job.id)
        assert [p["spec"]["volumes"] for p in pods] == \
            [[{"name": "volume-0", "persistentVolumeClaim": {"claimName": "data"}}]] * 2
        assert [p["spec"]["containers"][0]["volumeMounts"] for p in pods] == \
            [[{"name": "volume-0", "mountPath": "/data"}]] * 2
        [listed] = run(provider.list_volumes())
        assert sorted(listed.attached_to) == sorted(p["metadata"]["name"] for p in pods)
        run(provider.delete_volume("data"))  # in use: kept until its pods are gone
        assert run(provider.list_volumes())[0].status == "Terminating"
        client.cancel(job.ref)
    clock.advance(30)
    assert run(provider.list_volumes()) == []


def test_the_deadline_ends_every_pod_and_the_ttl_takes_the_service(kubeconfig, emulator,
                                                                    clock, tmp_path):
    """max_runtime is the Job's activeDeadlineSeconds: the cluster ends every
    node's pod itself (no reaper pass needed; a job's pods are never listed as
    machines), and the Service goes with the Job when its TTL removes it."""
    job = cli("submit", job_file(tmp_path), "--provider", "kubernetes", "--yes")["job"]
    clock.advance(10)
    assert len(pods_of(emulator, job["id"])) == 2
    listed = cli("list")["instances"]
    assert not [m for m in listed if m["id"].startswith(job["id"])]
    clock.advance(2 * 3600)
    got = cli("jobs", "get", job["ref"])
    got = got.get("job", got)
    assert got["status"] == "failed" and got["nodes"] == 2
    assert "deadline" in (got["message"] or "")
    clock.advance(30)
    assert pods_of(emulator, job["id"]) == []
    assert list(emulator.cluster.services) == [(NS, job["id"])]  # until the Job's TTL
    clock.advance(86400)
    emulator.cluster.tick()
    assert emulator.cluster.jobs == {} and emulator.cluster.services == {}


@pytest.fixture
def fails_once(clock, tmp_path, monkeypatch):
    """An emulated cluster whose first job pod to run exits 1 at 100 s."""
    knobs = Knobs(pod_start_seconds=3, terminate_seconds=5, job_run_seconds=100,
                  job_failures=1)
    with KubeEmulator(namespaces=("default", NS), clock=clock, knobs=knobs,
                      tls=True) as emu:
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kc", emu,
                                                              namespace=NS)))
        home = tmp_path / "gpucloud-home"
        home.mkdir()
        monkeypatch.setenv("GPUCLOUD_HOME", str(home))
        yield emu


def test_a_lost_node_fails_the_whole_job_and_no_pod_reruns_alone(tmp_path, clock, fails_once):
    """retries on a multi-node Job: the Job controller would recreate the failed
    index's pod alone (its peer still waiting at the rendezvous); the Job is
    sent with backoffLimit 0, so the first failed pod fails it and the
    controller ends the other. The plan says retries do not apply."""
    path = job_file(tmp_path, retries="2")
    planned = CliRunner().invoke(app, ["submit", path, "--provider", "kubernetes",
                                       "--dry-run"])
    assert planned.exit_code == 0, planned.output
    assert "retries: 2 does not apply to a multi-node job on kubernetes" in planned.stdout
    job = cli("submit", path, "--provider", "kubernetes", "--yes")["job"]
    seen: set[str] = set()
    for _ in range(30):
        clock.advance(10)
        seen |= {p["metadata"]["name"] for p in pods_of(fails_once, job["id"])}
    got = cli("jobs", "get", job["ref"])
    got = got.get("job", got)
    assert got["status"] == "failed" and got["exit_code"] == 1
    assert len(seen) == 2  # one pod per index, none recreated
    clock.advance(10)  # the peer's termination grace
    left = {p["metadata"]["name"]: p["status"]["phase"] for p in pods_of(fails_once, job["id"])}
    assert "Running" not in left.values(), left  # the peer was ended with the Job


def test_a_one_node_job_that_succeeds_on_its_retry_reads_exit_0(tmp_path, clock, fails_once):
    """One node: retries are the Job's backoffLimit; a run that failed before
    the one that succeeded does not give the job its exit code."""
    job = cli("submit", job_file(tmp_path, nodes="1", retries="1"), "--provider",
              "kubernetes", "--yes")["job"]
    for _ in range(30):
        clock.advance(10)
        pods_of(fails_once, job["id"])
    got = cli("jobs", "get", job["ref"])
    got = got.get("job", got)
    assert got["status"] == "succeeded" and got["exit_code"] == 0
