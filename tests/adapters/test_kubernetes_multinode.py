"""Kubernetes adapter: a job of several nodes is an Indexed Job and a headless
Service (golden requests, validated against the Kubernetes 1.30 schemas), the
RDMA resource where the nodes advertise it, cancel removing the Service too,
and the status of an Indexed Job (Kubernetes docs: "Job with Pod-to-Pod
Communication", https://kubernetes.io/docs/tasks/job/job-with-pod-to-pod-communication/)."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from gpucloud.errors import SpecError, exit_code_for
from gpucloud.jobs.multinode import node_env
from gpucloud.models import JobStatus, VolumeMount
from gpucloud.providers.kubernetes._manifests import job_name
from tests.adapters._kubernetes_support import (  # noqa: F401 (fixtures)
    NS,
    body,
    cluster_fixture,
    kube_path_fixture,
    make_provider,
    node,
    run,
    running,
)
from tests.adapters.test_kubernetes_jobs import SECRET, job_spec

JOB = "gpucloud-train-3a1a2245a7"
LABELS = {"app.kubernetes.io/managed-by": "gpucloud", "gpucloud.dev/launch-id": "gj-3a1a2245a7"}
INDEX = "batch.kubernetes.io/job-completion-index"


def _posts(cluster) -> list[tuple[str, dict]]:
    return [(r.url.path, json.loads(r.content)) for r in cluster.requests if r.method == "POST"]


def test_a_two_node_job_is_an_indexed_job_and_a_headless_service(cluster, kube_path):
    provider = make_provider(kube_path)
    job = run(provider, provider.submit_job(job_spec(nodes=2, gpu_count=8)))
    (job_path, sent), (service_path, service) = _posts(cluster)
    assert job_path == f"/apis/batch/v1/namespaces/{NS}/jobs"
    assert service_path == f"/api/v1/namespaces/{NS}/services"
    example = body("create_job_request_gpu.json")["spec"]["template"]["spec"]
    addrs = [f"{JOB}-0.{JOB}", f"{JOB}-1.{JOB}"]
    assert sent == {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": JOB, "namespace": NS, "labels": LABELS,
                     "annotations": {"gpucloud.dev/name": "train",
                                     "gpucloud.dev/shutdown-at": "2026-01-02T00:00:00Z"}},
        "spec": {
            # retries: 2, yet 0: the Job controller would rerun a failed index alone.
            "backoffLimit": 0, "ttlSecondsAfterFinished": 86400,
            "completionMode": "Indexed", "completions": 2, "parallelism": 2,
            "activeDeadlineSeconds": 86400,
            "template": {"metadata": {"labels": LABELS}, "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "command": ["python", "train.py"], "args": ["--epochs", "3"],
                    "env": [{"name": "WANDB_MODE", "value": "offline"},
                            {"name": "CHECKPOINT_DIR", "value": "/ckpt"},
                            {"name": "MASTER_ADDR", "value": f"{JOB}-0.{JOB}"},
                            {"name": "MASTER_PORT", "value": "29500"},
                            {"name": "NODE_RANK", "valueFrom": {"fieldRef": {
                                "fieldPath": f"metadata.annotations['{INDEX}']"}}},
                            {"name": "NNODES", "value": "2"},
                            {"name": "WORLD_SIZE", "value": "16"},
                            {"name": "GPUS_PER_NODE", "value": "8"},
                            {"name": "GPUCLOUD_NODE_ADDRS", "value": ",".join(addrs)},
                            {"name": "HF_TOKEN", "value": SECRET}],
                    "resources": {"limits": {"nvidia.com/gpu": "8"},
                                  "requests": {"nvidia.com/gpu": "8"}}}],
                "affinity": example["affinity"], "tolerations": example["tolerations"],
                "subdomain": JOB}}},
    }
    assert service == {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": JOB, "namespace": NS, "labels": LABELS,
                     "annotations": {"gpucloud.dev/name": "train"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": JOB,
                                          "uid": f"uid-{JOB}"}]},
        "spec": {"clusterIP": "None", "selector": {"job-name": JOB},
                 "publishNotReadyAddresses": True},
    }
    for obj in (sent, service):
        kubernetes_validate.validate(obj, "1.30.0", strict=True)
    assert job.nodes == 2 and job.id == JOB


def test_the_static_env_is_node_env_with_the_rank_left_to_each_pod(cluster, kube_path):
    """One place names the rendezvous: every value but NODE_RANK is node_env's."""
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec(nodes=4, gpu_count=2)))
    (_, sent), _ = _posts(cluster)
    env = {e["name"]: e for e in sent["spec"]["template"]["spec"]["containers"][0]["env"]}
    addrs = [f"{JOB}-{i}.{JOB}" for i in range(4)]
    for key, value in node_env(0, addrs, 2).items():
        if key != "NODE_RANK":
            assert env[key] == {"name": key, "value": value}
    assert "value" not in env["NODE_RANK"]


def test_a_multi_node_job_name_leaves_room_for_the_pod_hostname():
    """The Job controller sets each pod's hostname to <job>-<index>, a DNS label."""
    name = job_name("x" * 200, "gj-3a1a2245a7", nodes=16)
    assert len(f"{name}-15") <= 63 and name.endswith("-3a1a2245a7")
    assert len(job_name("x" * 200, "gj-3a1a2245a7")) == 63


def test_a_refused_service_takes_the_job_back_down(cluster, kube_path):
    cluster.fail[("POST", r".*/services")] = (403, body("status_403_forbidden.json"))
    provider = make_provider(kube_path)
    with pytest.raises(Exception) as info:
        run(provider, provider.submit_job(job_spec(nodes=2)))
    assert exit_code_for(info.value) != 0 and "RBAC" in (info.value.hint or "")
    assert cluster.jobs == {}  # deleted again: no nodes left without their DNS names
    delete = cluster.requests[-1]
    assert delete.method == "DELETE" and json.loads(delete.content)["propagationPolicy"] == \
        "Background"


def test_cancel_deletes_the_service_and_the_job_in_the_background(cluster, kube_path):
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec(nodes=2)))
    assert set(cluster.services) == {JOB}
    run(provider, provider.cancel_job(JOB))
    deletes = [(r.url.path, r.content) for r in cluster.requests if r.method == "DELETE"]
    assert deletes[0][0] == f"/api/v1/namespaces/{NS}/services/{JOB}"
    assert deletes[1][0] == f"/apis/batch/v1/namespaces/{NS}/jobs/{JOB}"
    assert json.loads(deletes[1][1])["propagationPolicy"] == "Background"
    assert cluster.services == {} and cluster.jobs == {}


def test_cancel_of_a_single_node_job_passes_over_the_missing_service(cluster, kube_path):
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec()))
    cluster.fail[("DELETE", r".*/services/.*")] = (403, body("status_403_forbidden.json"))
    run(provider, provider.cancel_job(JOB))
    assert cluster.jobs == {}
    # The Service delete was tried (refused here) and the Job deleted all the same.
    assert [r.url.path.split("/")[-2] for r in cluster.requests if r.method == "DELETE"] == \
        ["services", "jobs"]


# -- status ------------------------------------------------------------------------------


def _pod(job: dict, index: int, status: dict) -> dict:
    pod = running({"kind": "Pod", "metadata": {
        "name": f"{JOB}-{index}-abcde", "labels": {**LABELS, "job-name": JOB},
        "annotations": {INDEX: str(index)}}, "spec": job["spec"]["template"]["spec"]})
    pod["status"] = status
    pod["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{index}Z"
    return pod


DONE = {"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]}
BAD = {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}


@pytest.mark.parametrize("status, pods, expected, exit_code", [
    # Indexed Job status as the API writes it: succeeded counts pods, the
    # conditions decide (Complete once every index succeeded).
    ({"active": 1, "succeeded": 1, "completedIndexes": "0"},
     [DONE, {"phase": "Running"}], JobStatus.RUNNING, None),
    ({"succeeded": 2, "completedIndexes": "0-1",
      "conditions": [{"type": "Complete", "status": "True"}]},
     [DONE, DONE], JobStatus.SUCCEEDED, 0),
    ({"failed": 1, "conditions": [{"type": "Failed", "status": "True",
                                   "reason": "BackoffLimitExceeded",
                                   "message": "Job has reached the specified backoff limit"}]},
     [BAD, DONE], JobStatus.FAILED, 3),
    # One node running, its peer still waiting for a node: the job waits.
    ({"active": 2}, [{"phase": "Running"}, body("pod_status_pending_unschedulable.json")],
     JobStatus.QUEUED, None),
])
def test_an_indexed_jobs_status(cluster, kube_path, status, pods, expected, exit_code):
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec(nodes=2)))
    cluster.jobs[JOB]["status"] = status
    for index, pod_status in enumerate(pods):
        pod = _pod(cluster.jobs[JOB], index, pod_status)
        cluster.pods[pod["metadata"]["name"]] = pod
    job = run(provider, provider.get_job(JOB))
    assert (job.status, job.nodes, job.exit_code) == (expected, 2, exit_code)
    [listed] = run(provider, provider.list_jobs())
    assert (listed.status, listed.nodes) == (expected, 2)


def test_logs_of_a_multi_node_job_are_rank_zeros(cluster, kube_path):
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec(nodes=2)))
    for index in (0, 1):
        pod = _pod(cluster.jobs[JOB], index, {"phase": "Running"})
        cluster.pods[pod["metadata"]["name"]] = pod
        cluster.logs[pod["metadata"]["name"]] = f"rank {index}\n"
    assert run(provider, provider.job_logs(JOB)) == "rank 0\n"


# -- RDMA ------------------------------------------------------------------------------------


def _ib_node(name: str, resource: str = "rdma/ib", amount: str = "1k") -> dict:
    """A GPU node with an RDMA shared-device plugin's shares: its default
    rdmaHcaMax 1000 reads "1k" (resource.Quantity's canonical form); a node
    with "rdma/rdma_shared_device_a: 63" is shown in
    github.com/Mellanox/k8s-rdma-shared-dev-plugin/issues/92."""
    gpu = node(name, 8, "H100_NVLINK_80GB")
    gpu["status"]["allocatable"][resource] = amount
    return gpu


@pytest.mark.parametrize("amount", ["1k", "63"])
def test_infiniband_requests_the_rdma_resource_the_nodes_advertise(cluster, kube_path, amount):
    cluster.nodes = [node("plain", 8, "H100_NVLINK_80GB"), _ib_node("ib-1", amount=amount)]
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec(nodes=2, gpu_count=8,
                                               interconnect="infiniband")))
    (_, sent), _ = _posts(cluster)
    kubernetes_validate.validate(sent, "1.30.0", strict=True)
    amounts = {"nvidia.com/gpu": "8", "rdma/ib": "1"}
    assert sent["spec"]["template"]["spec"]["containers"][0]["resources"] == \
        {"limits": amounts, "requests": amounts}


def test_infiniband_where_no_node_advertises_it_is_refused_with_exit_2(cluster, kube_path):
    # Another GPU model's nodes have it; the offer's do not.
    other = node("a100", 8, "A100_NVLINK_80GB")
    other["status"]["allocatable"]["rdma/ib"] = "1"
    cluster.nodes = [node("plain", 8, "H100_NVLINK_80GB"), other]
    provider = make_provider(kube_path)
    with pytest.raises(SpecError) as info:
        run(provider, provider.submit_job(job_spec(nodes=2, interconnect="infiniband")))
    assert exit_code_for(info.value) == 2
    assert "rdma/ib" in str(info.value) and "rdma_resource" in (info.value.hint or "")
    assert cluster.jobs == {} and not _posts(cluster)


def test_interconnect_any_asks_for_rdma_only_when_configured_and_advertised(
        cluster, kube_path, monkeypatch):
    cluster.nodes = [_ib_node("ib-1", "rdma/rdma_shared_device_a")]
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec(nodes=2)))  # not configured: not asked
    (_, sent), _ = _posts(cluster)
    assert set(sent["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]) == \
        {"nvidia.com/gpu"}
    assert not any(r.url.path == "/api/v1/nodes" for r in cluster.requests)
    cluster.jobs.clear(), cluster.services.clear(), cluster.requests.clear()
    monkeypatch.setenv("GPUCLOUD_COREWEAVE_RDMA_RESOURCE", "rdma/rdma_shared_device_a")
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec(nodes=2)))
    (_, sent), _ = _posts(cluster)
    assert sent["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "rdma/rdma_shared_device_a"] == "1"
    cluster.nodes = [node("plain", 8, "H100_NVLINK_80GB")]  # configured, not advertised
    cluster.jobs.clear(), cluster.services.clear(), cluster.requests.clear()
    run(provider, provider.submit_job(job_spec(nodes=2)))
    (_, sent), _ = _posts(cluster)
    assert "rdma/rdma_shared_device_a" not in \
        sent["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]


# -- volumes in a job ---------------------------------------------------------------------


def _claim(name: str, modes: list[str]) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"accessModes": modes, "resources": {"requests": {"storage": "100Gi"}}}}


def test_a_jobs_volumes_are_its_claims_at_their_mount_paths(cluster, kube_path):
    cluster.claims["data"] = _claim("data", ["ReadWriteMany"])
    cluster.claims["ckpt-store"] = _claim("ckpt-store", ["ReadWriteMany"])
    provider = make_provider(kube_path)
    mounts = (VolumeMount(name="data", mount="/data", volume_id="data"),
              VolumeMount(name="ckpt", mount="/store", volume_id="ckpt-store"))
    run(provider, provider.submit_job(job_spec(nodes=2, volumes=mounts)))
    (_, sent), _ = _posts(cluster)
    kubernetes_validate.validate(sent, "1.30.0", strict=True)
    pod = sent["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "volume-0", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "volume-1", "persistentVolumeClaim": {"claimName": "ckpt-store"}}]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "volume-0", "mountPath": "/data"}, {"name": "volume-1", "mountPath": "/store"}]


def test_a_checkpoint_sync_and_a_volume_mount_side_by_side(cluster, kube_path):
    cluster.claims["data"] = _claim("data", ["ReadWriteOnce"])
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec(
        checkpoint_url="s3://bkt/train", volumes=(VolumeMount(name="data", mount="/data"),))))
    [(_, sent)] = _posts(cluster)
    kubernetes_validate.validate(sent, "1.30.0", strict=True)
    pod = sent["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["checkpoints", "volume-0"]
    assert [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]] == ["/ckpt", "/data"]


@pytest.mark.parametrize("claims, words", [
    ({}, "no PersistentVolumeClaim data"),
    ({"data": _claim("data", ["ReadWriteOnce"])}, "ReadWriteOnce"),
])
def test_a_multi_node_job_refuses_a_claim_its_nodes_cannot_share(cluster, kube_path, claims,
                                                                 words):
    cluster.claims.update(claims)
    provider = make_provider(kube_path)
    with pytest.raises(SpecError, match=words) as info:
        run(provider, provider.submit_job(job_spec(
            nodes=2, volumes=(VolumeMount(name="data", mount="/data"),))))
    assert exit_code_for(info.value) == 2 and cluster.jobs == {}


def test_an_account_that_may_not_read_claims_still_submits(cluster, kube_path):
    cluster.fail[("GET", r".*/persistentvolumeclaims/.*")] = (403,
                                                              body("status_403_forbidden.json"))
    provider = make_provider(kube_path)
    job = run(provider, provider.submit_job(job_spec(
        nodes=2, volumes=(VolumeMount(name="data", mount="/data"),))))
    assert job.id in cluster.jobs
