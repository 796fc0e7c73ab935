"""The emulator's batch/v1 Jobs over loopback HTTP: the pod a Job makes, its
lifecycle to Complete, backoffLimit retries, activeDeadlineSeconds,
ttlSecondsAfterFinished, validation, and what each DeleteOptions
propagationPolicy leaves behind (the REST default for Jobs is Orphan)."""

from __future__ import annotations

import pytest

from tests.k8s_emulator import FakeClock, Knobs, KubeEmulator

JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"


def job(name: str = "gpucloud-train-1a2b", gpus: int = 1, **spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpucloud",
                                                  "gpucloud.dev/launch-id": "gj-1a2b"}},
            "spec": {**spec, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                "command": ["python", "train.py"],
                                "env": [{"name": "CHECKPOINT_DIR", "value": "/ckpt"}],
                                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def emu(clock):
    with KubeEmulator(clock=clock, knobs=Knobs(pod_start_seconds=2, terminate_seconds=5,
                                               job_run_seconds=10)) as emulator:
        yield emulator


@pytest.fixture
def api(emu):
    with emu.admin_client() as client:
        yield client


def pods_of(api, name):
    reply = api.get(PODS, params={"labelSelector": f"job-name={name}"})
    assert reply.status_code == 200
    return reply.json()["items"]


def status(api, name="gpucloud-train-1a2b"):
    return api.get(f"{JOBS}/{name}").json()["status"]


def kinds(job_status):
    return [c["type"] for c in job_status.get("conditions") or []]


def test_job_runs_one_pod_to_complete(api, clock):
    created = api.post(JOBS, json=job(backoffLimit=0, activeDeadlineSeconds=3600))
    assert created.status_code == 201
    body = created.json()
    assert body["metadata"]["uid"] and body["spec"]["completions"] == 1
    assert body["spec"]["template"]["metadata"]["labels"]["job-name"] == "gpucloud-train-1a2b"
    [pod] = pods_of(api, "gpucloud-train-1a2b")
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert pod["metadata"]["name"].startswith("gpucloud-train-1a2b-")
    assert status(api)["active"] == 1 and status(api)["startTime"]
    clock.advance(2)
    assert status(api)["ready"] == 1
    assert pods_of(api, "gpucloud-train-1a2b")[0]["status"]["phase"] == "Running"
    clock.advance(10)
    done = status(api)
    assert done["succeeded"] == 1 and "active" not in done and "failed" not in done
    assert kinds(done) == ["SuccessCriteriaMet", "Complete"] and done["completionTime"]
    assert pods_of(api, "gpucloud-train-1a2b")[0]["status"]["phase"] == "Succeeded"
    logs = api.get(f"{PODS}/{pod['metadata']['name']}/log").text.splitlines()
    assert logs[1:] == ["$ python train.py", "CHECKPOINT_DIR=/ckpt", "training done"]
    listed = api.get(JOBS, params={"labelSelector": "app.kubernetes.io/managed-by=gpucloud"})
    assert listed.json()["kind"] == "JobList" and len(listed.json()["items"]) == 1


def test_backoff_limit_retries_a_failed_pod(emu, api, clock):
    emu.cluster.failures_left = 1
    api.post(JOBS, json=job(backoffLimit=1))
    clock.advance(12)
    mid = status(api)
    assert mid["failed"] == 1 and mid["active"] == 1 and kinds(mid) == []
    phases = sorted(p["status"]["phase"] for p in pods_of(api, "gpucloud-train-1a2b"))
    assert phases == ["Failed", "Pending"]
    clock.advance(12)
    done = status(api)
    assert (done["failed"], done["succeeded"]) == (1, 1) and kinds(done)[-1] == "Complete"


def test_backoff_limit_exceeded_fails_the_job(emu, api, clock):
    emu.cluster.failures_left = 5
    api.post(JOBS, json=job(backoffLimit=0))
    clock.advance(12)
    failed = status(api)
    assert kinds(failed) == ["FailureTarget", "Failed"]
    assert failed["conditions"][-1]["reason"] == "BackoffLimitExceeded"
    assert failed["conditions"][-1]["message"] == "Job has reached the specified backoff limit"
    assert len(pods_of(api, "gpucloud-train-1a2b")) == 1  # no retry past the limit


def test_active_deadline_kills_the_pod(emu, api, clock):
    emu.knobs.job_run_seconds = 1000
    api.post(JOBS, json=job(activeDeadlineSeconds=30))
    clock.advance(29)
    assert status(api)["active"] == 1
    clock.advance(1)
    failed = status(api)
    assert failed["conditions"][-1]["type"] == "Failed"
    assert failed["conditions"][-1]["reason"] == "DeadlineExceeded"
    assert failed["conditions"][-1]["message"] == "Job was active longer than specified deadline"
    assert pods_of(api, "gpucloud-train-1a2b")[0]["metadata"]["deletionTimestamp"]
    clock.advance(5)
    assert pods_of(api, "gpucloud-train-1a2b") == []


def test_unschedulable_job_pod_carries_the_scheduler_message(api, clock):
    api.post(JOBS, json=job(gpus=16))
    clock.advance(60)
    assert status(api)["active"] == 1 and status(api)["ready"] == 0
    [pod] = pods_of(api, "gpucloud-train-1a2b")
    [cond] = pod["status"]["conditions"]
    assert cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")


def test_delete_background_removes_job_and_its_pods(emu, api, clock):
    api.post(JOBS, json=job())
    clock.advance(3)
    reply = api.request("DELETE", f"{JOBS}/gpucloud-train-1a2b", json={
        "kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
    assert reply.status_code == 200
    assert reply.json()["kind"] == "Status" and reply.json()["status"] == "Success"
    assert reply.json()["details"]["group"] == "batch"
    assert api.get(f"{JOBS}/gpucloud-train-1a2b").status_code == 404
    assert all(p["metadata"].get("deletionTimestamp") for p in pods_of(api, "gpucloud-train-1a2b"))
    clock.advance(5)
    assert pods_of(api, "gpucloud-train-1a2b") == []
    assert emu.cluster.deletions[0]["propagationPolicy"] == "Background"


@pytest.mark.parametrize("options", [None, {"propagationPolicy": "Orphan"}])
def test_delete_without_policy_or_orphan_leaves_pods_running(emu, api, clock, options):
    api.post(JOBS, json=job())
    clock.advance(3)
    reply = api.request("DELETE", f"{JOBS}/gpucloud-train-1a2b", json=options)
    assert reply.status_code == 200 and reply.json()["metadata"]["finalizers"] == ["orphan"]
    clock.advance(6)
    assert api.get(f"{JOBS}/gpucloud-train-1a2b").status_code == 404
    [pod] = pods_of(api, "gpucloud-train-1a2b")
    assert pod["status"]["phase"] == "Running" and pod["metadata"]["ownerReferences"] == []
    assert emu.cluster.deletions[-1]["effective"] == "Orphan"


def test_delete_foreground_waits_for_pods(api, clock):
    api.post(JOBS, json=job())
    clock.advance(3)
    reply = api.request("DELETE", f"{JOBS}/gpucloud-train-1a2b",
                        params={"propagationPolicy": "Foreground"})
    assert reply.json()["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert api.get(f"{JOBS}/gpucloud-train-1a2b").json()["metadata"]["deletionTimestamp"]
    clock.advance(5)
    assert api.get(f"{JOBS}/gpucloud-train-1a2b").status_code == 404
    assert pods_of(api, "gpucloud-train-1a2b") == []


def test_ttl_after_finished_deletes_job_and_pods(api, clock):
    api.post(JOBS, json=job(ttlSecondsAfterFinished=60))
    clock.advance(12)
    assert kinds(status(api))[-1] == "Complete"
    clock.advance(60)
    assert api.get(f"{JOBS}/gpucloud-train-1a2b").status_code == 404
    assert pods_of(api, "gpucloud-train-1a2b") == []


def test_job_validation_and_conflicts(api):
    assert api.post(JOBS, json=job()).status_code == 201
    again = api.post(JOBS, json=job())
    assert again.status_code == 409
    assert again.json()["message"] == 'jobs.batch "gpucloud-train-1a2b" already exists'
    long_name = api.post(JOBS, json=job("x" * 64))
    assert long_name.status_code == 422 and "must be no more than 63 characters" in long_name.text
    always = job("always")
    always["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    reply = api.post(JOBS, json=always)
    assert reply.status_code == 422
    assert reply.json()["message"].startswith('Job.batch "always" is invalid: '
                                              "spec.template.spec.restartPolicy: Unsupported value")
    no_image = job("no-image")
    del no_image["spec"]["template"]["spec"]["containers"][0]["image"]
    assert api.post(JOBS, json=no_image).json()["details"]["causes"][0]["field"] == (
        "spec.template.spec.containers[0].image")
    missing = api.get(f"{JOBS}/nope")
    assert missing.status_code == 404 and missing.json()["message"] == 'jobs.batch "nope" not found'
    assert api.request("DELETE", f"{JOBS}/nope").status_code == 404
