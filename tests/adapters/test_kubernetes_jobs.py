"""Kubernetes adapter: jobs are batch/v1 Jobs (golden manifest, status from
conditions and pods, cancel with propagationPolicy Background, logs, secrets
kept out of errors)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import kubernetes_validate
import pytest
from pydantic import SecretStr

from gpucloud.providers.kubernetes._manifests import job_name
from gpucloud.errors import BadRequestError, NotFoundError
from gpucloud.models import InstanceSpec, JobRun, JobStatus, Offer
from tests.adapters._kubernetes_support import (  # noqa: F401 (fixtures)
    CONTEXT,
    NS,
    body,
    cluster_fixture,
    kube_path_fixture,
    make_provider,
    run,
    running,
)

SECRET = "hf_secret_value_123"
DEADLINE = datetime(2026, 1, 2, 0, 0, tzinfo=timezone.utc)
JOB = "gpucloud-train-3a1a2245a7"


def job_spec(**run_changes) -> InstanceSpec:
    fields = dict(name="train", image="nvcr.io/nvidia/pytorch:24.05-py3",
                  command=("python", "train.py"), args=("--epochs", "3"),
                  env={"WANDB_MODE": "offline"}, secret_env={"HF_TOKEN": SecretStr(SECRET)},
                  max_runtime_seconds=86400, retries=2, checkpoint_dir="/ckpt", gpu_count=1)
    fields.update(run_changes)
    offer = Offer(provider="coreweave", instance_type="H100_NVLINK_80GB", region=CONTEXT,
                  gpu="H100", gpu_count=1, price_per_hour=Decimal(0), source="live")
    return InstanceSpec(offer=offer, launch_id="gj-3a1a2245a7", name="train",
                        shutdown_at=DEADLINE, job=JobRun(**fields))


def test_job_manifest_is_exactly_this(cluster, kube_path):
    provider = make_provider(kube_path)
    job = run(provider, provider.submit_job(job_spec()))
    [post] = [r for r in cluster.requests if r.method == "POST"]
    assert post.url.path == f"/apis/batch/v1/namespaces/{NS}/jobs"
    sent = json.loads(post.content)
    example = body("create_job_request_gpu.json")["spec"]["template"]["spec"]
    labels = {"app.kubernetes.io/managed-by": "gpucloud",
              "gpucloud.dev/launch-id": "gj-3a1a2245a7"}
    assert sent == {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": JOB, "namespace": NS, "labels": labels,
                     "annotations": {"gpucloud.dev/name": "train",
                                     "gpucloud.dev/shutdown-at": "2026-01-02T00:00:00Z"}},
        "spec": {
            "backoffLimit": 2, "ttlSecondsAfterFinished": 86400, "activeDeadlineSeconds": 86400,
            "template": {"metadata": {"labels": labels}, "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "command": ["python", "train.py"], "args": ["--epochs", "3"],
                    "env": [{"name": "WANDB_MODE", "value": "offline"},
                            {"name": "CHECKPOINT_DIR", "value": "/ckpt"},
                            {"name": "HF_TOKEN", "value": SECRET}],
                    "resources": {"limits": {"nvidia.com/gpu": "1"},
                                  "requests": {"nvidia.com/gpu": "1"}}}],
                "affinity": example["affinity"], "tolerations": example["tolerations"]}}},
    }
    kubernetes_validate.validate(sent, "1.30.0", strict=True)
    assert job.id == JOB and job.status == JobStatus.QUEUED and job.shutdown_at == DEADLINE
    assert job.launch_id == "gj-3a1a2245a7" and job.name == "train"


def test_job_names_are_rfc1123_and_at_most_63_characters():
    assert job_name("My Training_Run!", "gj-3a1a2245a7") == "gpucloud-my-training-run-3a1a2245a7"
    long = job_name("x" * 200, "gj-3a1a2245a7")
    assert len(long) <= 63 and long.endswith("-3a1a2245a7") and long.startswith("gpucloud-x")


def test_a_refused_job_keeps_no_secret_in_the_error_or_the_log(cluster, kube_path, caplog):
    cluster.fail[("POST", r".*/jobs")] = (422, body("status_422_invalid.json"))
    provider = make_provider(kube_path)
    caplog.set_level("DEBUG")
    with pytest.raises(BadRequestError) as info:
        run(provider, provider.submit_job(job_spec()))
    assert SECRET not in caplog.text and "/jobs" in caplog.text
    error = info.value
    assert error.provider_code == "Invalid" and "less than 10 minutes" in str(error)
    assert SECRET.encode() not in error.request.content
    assert SECRET not in repr(error) and SECRET not in str(error)


def _pod_of(job: dict, phase_status: dict, name: str = "pod-1") -> dict:
    pod = running({"kind": "Pod", "metadata": {"name": name, "labels": {
        **job["spec"]["template"]["metadata"]["labels"], "job-name": job["metadata"]["name"]}},
        "spec": job["spec"]["template"]["spec"]})
    pod["status"] = phase_status
    pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:01Z"
    return pod


@pytest.mark.parametrize("status, pod_status, expected, message", [
    ({"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1},
     {"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]},
     JobStatus.SUCCEEDED, None),
    ({"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                      "message": "Job was active longer than specified deadline"}]},
     None, JobStatus.FAILED, "Job was active longer than specified deadline"),
    ({"active": 1}, {"phase": "Running"}, JobStatus.RUNNING, None),
    ({"active": 1}, body("pod_status_pending_unschedulable.json"), JobStatus.QUEUED,
     "0/12 nodes are available: 12 Insufficient nvidia.com/gpu. preemption: 0/12 nodes are "
     "available: 12 No preemption victims found for incoming pod."),
    ({}, None, JobStatus.QUEUED, None),
])
def test_job_status(cluster, kube_path, status, pod_status, expected, message):
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec()))
    cluster.jobs[JOB]["status"] = status
    if pod_status is not None:
        cluster.pods["pod-1"] = _pod_of(cluster.jobs[JOB], pod_status)
    job = run(provider, provider.get_job(JOB))
    assert (job.status, job.message) == (expected, message)
    if expected == JobStatus.SUCCEEDED:
        assert job.exit_code == 0
    pods_read = [r for r in cluster.requests if r.url.path.endswith("/pods")][-1]
    assert pods_read.url.params["labelSelector"] == f"job-name={JOB}"
    [listed] = run(provider, provider.list_jobs())
    assert (listed.id, listed.status, listed.message) == (JOB, expected, message)


def test_cancel_deletes_in_the_background_so_no_pod_is_left(cluster, kube_path):
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec()))
    assert run(provider, provider.cancel_job(JOB)) is None
    delete = cluster.requests[-1]
    assert delete.method == "DELETE" and delete.url.path == \
        f"/apis/batch/v1/namespaces/{NS}/jobs/{JOB}"
    assert json.loads(delete.content) == {"kind": "DeleteOptions", "apiVersion": "v1",
                                          "propagationPolicy": "Background"}
    with pytest.raises(NotFoundError):
        run(provider, provider.cancel_job(JOB))


def test_logs_come_from_the_newest_pod(cluster, kube_path):
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec()))
    with pytest.raises(NotFoundError, match="no pod"):
        run(provider, provider.job_logs(JOB))
    old = _pod_of(cluster.jobs[JOB], {"phase": "Failed"}, "pod-old")
    old["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    cluster.pods.update({"pod-old": old,
                         "pod-new": _pod_of(cluster.jobs[JOB], {"phase": "Running"}, "pod-new")})
    cluster.logs.update({"pod-old": "attempt 1\n", "pod-new": "epoch 1\nepoch 2\n"})
    assert run(provider, provider.job_logs(JOB, tail=50)) == "epoch 1\nepoch 2\n"
    read = cluster.requests[-1]
    assert read.url.path == f"/api/v1/namespaces/{NS}/pods/pod-new/log"
    assert read.url.params["tailLines"] == "50"
    assert read.url.params["container"] == "main"  # not a checkpoint sidecar


def _sent_pod(cluster, kube_path, **changes) -> tuple[dict, dict]:
    provider = make_provider(kube_path)
    run(provider, provider.submit_job(job_spec(**changes)))
    [post] = [r for r in cluster.requests if r.method == "POST"]
    sent = json.loads(post.content)
    kubernetes_validate.validate(sent, "1.30.0", strict=True)
    return sent, sent["spec"]["template"]["spec"]


@pytest.mark.parametrize("cpu, memory_gb, cpu_text, memory_text", [
    (8, 64, "8", "64G"), (0.5, 1.5, "500m", "1500M"), (None, 32, None, "32G"),
])
def test_job_cpu_and_memory_are_the_containers_requests_and_limits(
        cluster, kube_path, cpu, memory_gb, cpu_text, memory_text):
    _, pod = _sent_pod(cluster, kube_path, cpu=cpu, memory_gb=memory_gb)
    amounts = {"nvidia.com/gpu": "1", "memory": memory_text}
    if cpu_text:
        amounts["cpu"] = cpu_text
    assert pod["containers"][0]["resources"] == {"limits": amounts, "requests": amounts}


def test_a_checkpoint_url_adds_a_restore_container_and_a_sync_sidecar(cluster, kube_path):
    _, pod = _sent_pod(cluster, kube_path, checkpoint_url="s3://bkt/train",
                       checkpoint_sync_seconds=300)
    mount = [{"name": "checkpoints", "mountPath": "/ckpt"}]
    assert pod["volumes"] == [{"name": "checkpoints", "emptyDir": {}}]
    assert pod["containers"][0]["volumeMounts"] == mount
    restore, sync = pod["initContainers"]
    assert [restore["name"], sync["name"]] == ["checkpoint-restore", "checkpoint-sync"]
    assert "restartPolicy" not in restore and sync["restartPolicy"] == "Always"  # native sidecar
    for side in (restore, sync):
        assert side["image"] == "amazon/aws-cli" and side["volumeMounts"] == mount
        assert side["command"][:2] == ["/bin/sh", "-c"]
        # The same env as the job: the tool's credentials are the job's secrets.
        assert side["env"] == pod["containers"][0]["env"]
    assert 'aws s3 sync --only-show-errors "$CHECKPOINT_URL" "$CHECKPOINT_DIR"' in restore[
        "command"][2] and restore["command"][2].endswith("gc_ckpt restore || true\n")
    assert "GC_SYNC=300" in sync["command"][2] and "trap" in sync["command"][2]
    assert pod["terminationGracePeriodSeconds"] == 300


def test_the_sync_sidecar_restores_saves_periodically_and_once_more_on_term(tmp_path):
    """The sidecar's script run for real with a fake aws: restore, periodic saves,
    and a last save when the kubelet sends TERM as the pod ends."""
    import os
    import signal
    import subprocess
    import time

    from gpucloud.providers.kubernetes._manifests import job_manifest

    spec = job_spec(checkpoint_url="s3://bkt/train", checkpoint_sync_seconds=1)
    pod = job_manifest(spec, namespace=NS, gpu_label="x")["spec"]["template"]["spec"]
    restore, sync = (c["command"][2] for c in pod["initContainers"])
    (tmp_path / "bin").mkdir()
    log = tmp_path / "calls.log"
    aws = tmp_path / "bin" / "aws"
    aws.write_text(f'#!/bin/sh\necho "aws $*" >> {log}\n')
    aws.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "CHECKPOINT_DIR": "/ckpt",
           "CHECKPOINT_URL": "s3://bkt/train"}
    subprocess.run(["sh", "-c", restore], env=env, check=True, timeout=10)
    assert log.read_text() == "aws s3 sync --only-show-errors s3://bkt/train /ckpt\n"
    sidecar = subprocess.Popen(["sh", "-c", sync], env=env, stderr=subprocess.PIPE)
    time.sleep(2.5)
    saves_before = log.read_text().count("/ckpt s3://bkt/train")
    sidecar.send_signal(signal.SIGTERM)
    assert sidecar.wait(timeout=10) == 0
    assert saves_before >= 1
    assert log.read_text().count("/ckpt s3://bkt/train") == saves_before + 1
