"""gpucloud end to end against a Kubernetes API server emulator over real
loopback HTTP (tests/k8s_emulator): the public SDK and CLI exactly as a user
runs them, with KUBECONFIG pointing at the emulator. Nothing of gpucloud is
mocked; the cluster's time is a FakeClock that the client's own waits advance
(except where a token must really expire).

The emulator behaves like the API server for the paths the adapter uses (see
tests/unit/test_k8s_emulator*.py): a scheduler that counts nvidia.com/gpu,
Jobs with backoff and deadlines, DeleteOptions propagation, TokenRequest and
bearer tokens that expire."""

from __future__ import annotations

import json
import ssl
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest

pytest.importorskip("gpucloud.providers.kubernetes")
JobSpec = pytest.importorskip("gpucloud.jobs.spec").JobSpec

from typer.testing import CliRunner  # noqa: E402

from gpucloud import Client, InstanceStatus  # noqa: E402
from gpucloud.cli import app  # noqa: E402
from gpucloud.errors import InsufficientCapacityError  # noqa: E402
from gpucloud.models import JobStatus  # noqa: E402
from tests.k8s_emulator import FakeClock, Knobs, KubeEmulator, write_kubeconfig  # noqa: E402

NS = "gpu-team"  # the kubeconfig context's namespace: everything must land there
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
MANAGED = "app.kubernetes.io/managed-by"
LAUNCH_ID = "gpucloud.dev/launch-id"


def knobs() -> Knobs:
    return Knobs(pod_start_seconds=3, terminate_seconds=5, job_run_seconds=60)


@pytest.fixture
def clock():
    return FakeClock(start=time.time())


@pytest.fixture
def emulator(clock):
    with KubeEmulator(namespaces=("default", NS), service_accounts=("default", "ci"),
                      clock=clock, knobs=knobs(), tls=True) as emu:
        yield emu


@pytest.fixture
def kubeconfig(emulator, tmp_path, monkeypatch):
    path = write_kubeconfig(tmp_path / "kubeconfig", emulator, namespace=NS)
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


@pytest.fixture
def client(kubeconfig, clock):
    with Client(providers=["kubernetes"], sleep=clock.advance) as c:
        yield c


def rival_pod(name: str, gpus: int) -> dict:
    """Another tenant's pod: not gpucloud's, but it holds GPUs all the same."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "someone-else"}},
            "spec": {"restartPolicy": "Always", "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def take_all_gpus_first(emulator):
    """Stage the race a busy cluster has: between gpucloud's plan (free GPUs
    seen) and its create, other pods take every GPU."""
    def admission(cluster, pod):
        if (pod["metadata"].get("labels") or {}).get(MANAGED) == "gpucloud" and \
                not cluster.pods.get(("default", "rival-0")):
            for index in range(len(cluster.nodes)):
                cluster.create_pod("default", rival_pod(f"rival-{index}", 8))
    emulator.knobs.admission = admission


def managed(emulator, kind="pods"):
    store = emulator.cluster.pods if kind == "pods" else emulator.cluster.jobs
    return [o for (ns, _), o in store.items()
            if (o["metadata"].get("labels") or {}).get(MANAGED) == "gpucloud"]


def available(offers, count):
    return [o for o in offers if o.gpu_count == count and o.available is not False]


def offers_or_none(client, **query):
    try:
        return client.offers(provider="kubernetes", **query)
    except InsufficientCapacityError:
        return []


# -- offers and pods ---------------------------------------------------------------------


def test_offers_are_the_nodes_free_gpus_by_model(client, emulator):
    offers = available(client.offers(gpu="h100", count=8, provider="kubernetes"), 8)
    assert offers and all((o.provider, o.gpu, o.source) == ("kubernetes", "H100", "live")
                          for o in offers)
    emulator.cluster.create_pod("default", rival_pod("colleague-a", 8))
    emulator.cluster.create_pod("default", rival_pod("colleague-b", 4))
    assert available(offers_or_none(client, gpu="h100", count=8), 8) == []
    assert available(offers_or_none(client, gpu="h100", count=4), 4)
    # The listing of held GPUs is cluster-wide and skips finished pods.
    sent = [r for r in emulator.requests if r["path"] == "/api/v1/pods"]
    assert sent and all("status.phase!=Succeeded" in r["query"].get("fieldSelector", "")
                        for r in sent)


def test_create_pod_list_get_delete(client, emulator, clock):
    machine = client.create(gpu="h100", count=2, image=IMAGE, provider="kubernetes")
    assert machine.ref == f"kubernetes/{machine.id}" and machine.launch_id.startswith("gc-")
    pod = emulator.cluster.pods[(NS, machine.id)]
    assert pod["metadata"]["labels"][MANAGED] == "gpucloud"
    assert pod["metadata"]["labels"][LAUNCH_ID] == machine.launch_id
    container = pod["spec"]["containers"][0]
    assert container["image"] == IMAGE
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"

    running = client.wait(machine.ref, until="running", timeout=120)
    assert running.status == InstanceStatus.RUNNING
    assert running.ip == emulator.cluster.pods[(NS, machine.id)]["status"]["podIP"]
    assert machine.id in {m.id for m in client.list()}
    assert client.get(machine.ref).gpu_count == 2

    client.delete(machine.ref)
    assert {"kind": "Pod", "namespace": NS, "name": machine.id} in emulator.cluster.deletions
    clock.advance(10)
    emulator.cluster.tick()
    assert managed(emulator) == []
    assert machine.id not in {m.id for m in client.list()}


def test_unschedulable_create_wait_fails_with_exit_6_and_the_schedulers_message(
        kubeconfig, emulator, monkeypatch, tmp_path):
    home = tmp_path / "gpucloud-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("[kubernetes]\nunschedulable_timeout = 1\n")
    take_all_gpus_first(emulator)
    result = CliRunner().invoke(app, ["create", "--provider", "kubernetes", "--gpu", "h100",
                                      "--count", "8", "--wait", "--yes", "--json"])
    assert result.exit_code == 6, result.output
    assert result.stderr == ""
    error = json.loads(result.stdout)["error"]
    assert "0/2 nodes are available: 2 Insufficient nvidia.com/gpu" in error["message"]
    assert error["exit_code"] == 6
    [pod] = managed(emulator)
    assert pod["status"]["conditions"][0]["reason"] == "Unschedulable"


# -- jobs --------------------------------------------------------------------------------


def spec(name="train", gpu_count=1, **extra) -> JobSpec:
    return JobSpec(name=name, image=IMAGE, command=["python", "train.py"],
                   resources={"gpu": "h100", "gpu_count": gpu_count}, max_runtime="2h",
                   retries=2, checkpoint={"dir": "/ckpt"}, **extra)


def until(client, clock, ref, done, step=5.0, limit=600):
    """Poll the job through the SDK while the cluster's time moves on."""
    waited = 0.0
    while True:
        job = client.job(ref)
        if done(job) or waited >= limit:
            return job
        clock.advance(step)
        waited += step


def test_submit_job_runs_to_succeeded_with_logs(client, emulator, clock):
    job = client.submit(spec())
    assert job.ref == f"kubernetes/{job.id}" and job.launch_id.startswith("gj-")
    [manifest] = managed(emulator, "jobs")
    assert manifest["metadata"]["name"] == job.id and manifest["metadata"]["namespace"] == NS
    assert job.id.startswith("gpucloud-train-") and len(job.id) <= 63
    assert manifest["metadata"]["labels"][LAUNCH_ID] == job.launch_id
    assert manifest["spec"]["backoffLimit"] == 2            # retries
    assert manifest["spec"]["activeDeadlineSeconds"] == 7200  # max_runtime
    assert "ttlSecondsAfterFinished" in manifest["spec"]
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert {"name": "CHECKPOINT_DIR", "value": "/ckpt"} in container["env"]

    assert job.id in {j.id for j in client.jobs()}
    running = until(client, clock, job.ref, lambda j: j.status != JobStatus.QUEUED)
    assert running.status == JobStatus.RUNNING
    done = until(client, clock, job.ref, lambda j: j.status == JobStatus.SUCCEEDED)
    assert done.status == JobStatus.SUCCEEDED
    logs = client.logs(job.ref)
    assert "$ python train.py" in logs and "CHECKPOINT_DIR=/ckpt" in logs
    assert logs.rstrip().endswith("training done")


def test_a_failed_attempt_is_retried_within_retries(client, emulator, clock):
    emulator.cluster.failures_left = 1
    job = client.submit(spec(name="flaky"))
    done = until(client, clock, job.ref, lambda j: j.status in (JobStatus.SUCCEEDED,
                                                               JobStatus.FAILED))
    assert done.status == JobStatus.SUCCEEDED
    assert emulator.cluster.jobs[(NS, job.id)]["status"]["failed"] == 1


def test_cancel_deletes_the_job_and_leaves_no_pod(client, emulator, clock):
    emulator.knobs.job_run_seconds = 10_000
    job = client.submit(spec(name="long"))
    assert until(client, clock, job.ref, lambda j: j.status == JobStatus.RUNNING).status == \
        JobStatus.RUNNING
    cancelled = client.cancel(job.ref)
    assert cancelled.status == JobStatus.CANCELLED
    [deletion] = [d for d in emulator.cluster.deletions if d["kind"] == "Job"]
    assert deletion["effective"] in ("Background", "Foreground")  # never the Orphan default
    clock.advance(30)
    emulator.cluster.tick()
    assert emulator.cluster.jobs == {}
    assert [p for p in emulator.cluster.pods.values()
            if "job-name" in (p["metadata"].get("labels") or {})] == []


def test_an_unschedulable_job_carries_the_schedulers_message(client, emulator, clock):
    take_all_gpus_first(emulator)
    job = client.submit(spec(name="starved"))
    clock.advance(60)
    seen = client.job(job.ref)
    assert seen.status == JobStatus.QUEUED
    assert "0/2 nodes are available: 2 Insufficient nvidia.com/gpu" in (seen.message or "")
    client.cancel(job.ref)


# -- tokens ------------------------------------------------------------------------------


def test_auth_token_mints_a_service_account_token(kubeconfig, emulator, clock):
    result = CliRunner().invoke(app, ["auth", "token", "kubernetes", "--service-account", "ci",
                                      "--ttl", "1h", "--json"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    minted = json.loads(result.stdout)
    [sent] = [r for r in emulator.requests if r["path"].endswith("/token")]
    assert sent["path"] == f"/api/v1/namespaces/{NS}/serviceaccounts/ci/token"
    assert sent["body"]["spec"]["expirationSeconds"] == 3600 and sent["status"] == 201
    expires = datetime.fromisoformat(minted["expires_at"].replace("Z", "+00:00"))
    assert abs(expires.timestamp() - (clock() + 3600)) < 2
    ca = emulator.write_ca(kubeconfig.with_name("ca.pem"))
    nodes = httpx.get(f"{emulator.url}/api/v1/nodes",
                      verify=ssl.create_default_context(cafile=str(ca)),
                      headers={"Authorization": f"Bearer {minted['token']}"})
    assert nodes.status_code == 200
    assert emulator.requests[-1]["user"] == f"system:serviceaccount:{NS}:ci"
    too_short = CliRunner().invoke(app, ["auth", "token", "kubernetes", "--service-account",
                                         "ci", "--ttl", "1m", "--json"])
    assert too_short.exit_code == 2 and json.loads(too_short.stdout)["error"]


def test_an_exec_plugin_token_that_expires_mid_run_is_refreshed(tmp_path, monkeypatch):
    """Real time here: the token's expirationTimestamp is what the client reads."""
    fast = Knobs(pod_start_seconds=0.05, terminate_seconds=0.05)
    with KubeEmulator(namespaces=(NS,), knobs=fast) as emulator:
        calls = tmp_path / "plugin-calls"
        path = write_kubeconfig(tmp_path / "kubeconfig", emulator, namespace=NS,
                                exec_ttl=2, exec_calls=calls)
        monkeypatch.setenv("KUBECONFIG", str(path))
        with Client(providers=["kubernetes"]) as client:
            machine = client.create(gpu="h100", count=1, image=IMAGE, provider="kubernetes")
            first = emulator.requests[-1]["token"]
            time.sleep(3.2)  # the plugin's token has expired now
            assert client.get(machine.ref).id == machine.id
            client.delete(machine.ref)
        assert emulator.exec_tokens_issued >= 2 and len(calls.read_text().splitlines()) >= 2
        used = [r for r in emulator.requests if r["status"] < 400 and r.get("token")]
        assert used[-1]["token"] != first
        assert {"kind": "Pod", "namespace": NS, "name": machine.id} in emulator.cluster.deletions


def test_the_example_job_file_runs_unchanged_through_the_cli(kubeconfig, emulator, clock,
                                                              tmp_path, monkeypatch):
    """The portable promise: examples/train-job.yaml, as shipped, on a cluster.
    A cluster's price is contractual, so the user states it (the file has a
    max_cost, which an unknown price would refuse)."""
    example = Path(__file__).resolve().parents[2] / "examples" / "train-job.yaml"
    if not example.exists():
        pytest.skip("examples/train-job.yaml is not on this branch")
    home = tmp_path / "gpucloud-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[kubernetes.prices]\nH100 = "2.21"\n')
    secrets = {"HF_TOKEN": "hf_SECRETsecretSECRET123", "WANDB_API_KEY": "wandb-SECRET-0987654321"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    runner = CliRunner()

    def cli(*args):
        result = runner.invoke(app, [*args, "--json"])
        assert result.exit_code == 0, result.output
        assert result.stderr == ""
        assert not any(value in result.stdout for value in secrets.values())
        return json.loads(result.stdout)

    job = cli("submit", str(example), "--provider", "kubernetes", "--yes")["job"]
    [manifest] = managed(emulator, "jobs")
    assert manifest["metadata"]["name"] == job["id"]
    pod_spec = manifest["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert manifest["spec"]["activeDeadlineSeconds"] == 12 * 3600
    assert manifest["spec"]["backoffLimit"] == 2
    clock.advance(10)
    seen = cli("jobs", "get", job["ref"])
    assert seen.get("job", seen)["status"] == "running"  # the job, bare or wrapped
    logs = runner.invoke(app, ["jobs", "logs", job["ref"]])
    assert logs.exit_code == 0 and "CHECKPOINT_DIR=/checkpoints" in logs.stdout
    assert job["id"] in {j["id"] for j in cli("jobs", "list")["jobs"]}
    cli("jobs", "cancel", job["ref"], "--yes")
    clock.advance(30)
    emulator.cluster.tick()
    assert emulator.cluster.jobs == {} and emulator.cluster.pods == {}


def test_an_extend_between_the_reapers_read_and_its_delete_keeps_the_pod(
        client, emulator, monkeypatch):
    """The reaper reads an overdue pod, then an extend (a merge PATCH of the
    deadline annotation, as `gpucloud extend` sends) lands before its DELETE:
    the DELETE's preconditions no longer hold, the apiserver answers 409
    Conflict, and the pod is kept and reported as extended."""
    from datetime import timedelta, timezone

    machine = client.create(gpu="h100", count=1, image=IMAGE, provider="kubernetes",
                            auto_shutdown="1h")
    path = f"/api/v1/namespaces/{NS}/pods/{machine.id}"
    headers = {"authorization": f"Bearer {emulator.admin_token}",
               "content-type": "application/merge-patch+json"}

    def move_deadline(moment: datetime) -> None:
        patch = {"metadata": {"annotations": {
            "gpucloud.dev/shutdown-at": moment.strftime("%Y-%m-%dT%H:%M:%SZ")}}}
        assert emulator.api.handle("PATCH", path, headers, json.dumps(patch).encode()).code == 200

    now = datetime.now(timezone.utc)
    move_deadline(now - timedelta(minutes=5))  # overdue
    original = emulator.api.delete_pod

    def extend_first(ns, name, body, query, **rest):
        move_deadline(now + timedelta(hours=2))  # someone's extend wins the race
        return original(ns, name, body, query, **rest)

    monkeypatch.setattr(emulator.api, "delete_pod", extend_first)
    report = client.reap()
    assert [(a.instance.id, a.action) for a in report.actions] == [(machine.id, "extended")]
    [delete] = [r for r in emulator.requests if r["method"] == "DELETE"]
    preconditions = delete["body"]["preconditions"]
    assert delete["status"] == 409 and preconditions["resourceVersion"]
    assert {"kind": "Pod", "namespace": NS, "name": machine.id} not in emulator.cluster.deletions
    kept = client.get(machine.ref)
    assert kept.status != InstanceStatus.TERMINATING
    assert kept.shutdown_at is not None and kept.shutdown_at > now


def test_a_failed_delete_precondition_is_the_apiservers_conflict(emulator):
    """The 409 body the emulator sends for a failed precondition, as a real
    apiserver words it (see _preconditions in tests/k8s_emulator/api.py)."""
    pod = emulator.cluster.create_pod("default", rival_pod("p1", 0))
    auth = {"authorization": f"Bearer {emulator.admin_token}"}
    reply = emulator.api.handle("DELETE", "/api/v1/namespaces/default/pods/p1", auth, json.dumps(
        {"preconditions": {"uid": "d0c9a7e2-0000-4000-8000-000000000000"}}).encode())
    assert reply.code == 409
    assert reply.body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Operation cannot be fulfilled on pods "p1": StorageError: invalid object, '
                   "Code: 4, Key: /registry/pods/default/p1, ResourceVersion: 0, "
                   "AdditionalErrorMsg: Precondition failed: UID in precondition: "
                   "d0c9a7e2-0000-4000-8000-000000000000, UID in object meta: "
                   f"{pod['metadata']['uid']}",
        "reason": "Conflict", "details": {"name": "p1", "kind": "pods"}, "code": 409}
