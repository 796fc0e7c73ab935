"""The emulator's Indexed Jobs, Services and PersistentVolumeClaims over
loopback HTTP, as kubernetes/kubernetes pkg/controller/job makes Indexed Job
pods (job_controller.go manageJob; indexed_job_utils.go: the completion-index
annotation and label, hostname <job>-<index>, generateName <job>-<index>-,
JOB_COMPLETION_INDEX from the downward API)."""

from __future__ import annotations

import pytest

from tests.k8s_emulator import FakeClock, Knobs, KubeEmulator
from tests.k8s_emulator.pods import container_env
from tests.unit.test_k8s_emulator_jobs import JOBS, PODS, job, kinds, pods_of, status

SERVICES = "/api/v1/namespaces/default/services"
CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"
INDEX = "batch.kubernetes.io/job-completion-index"
NAME = "gpucloud-train-1a2b"


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


def indexed(nodes: int = 2, **spec) -> dict:
    body = job(completionMode="Indexed", completions=nodes, parallelism=nodes, **spec)
    body["spec"]["template"]["spec"]["subdomain"] = NAME
    return body


def test_an_indexed_job_starts_one_pod_per_index(api, emu, clock):
    assert api.post(JOBS, json=indexed(2, backoffLimit=0)).status_code == 201
    pods = sorted(pods_of(api, NAME), key=lambda p: p["metadata"]["annotations"][INDEX])
    assert [p["metadata"]["annotations"][INDEX] for p in pods] == ["0", "1"]
    for index, pod in enumerate(pods):
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["labels"][INDEX] == str(index)
        assert meta["name"].startswith(f"{NAME}-{index}-") and len(meta["name"]) == \
            len(f"{NAME}-{index}-") + 5
        assert spec["hostname"] == f"{NAME}-{index}" and spec["subdomain"] == NAME
        [container] = spec["containers"]
        assert container["env"][-1] == {"name": "JOB_COMPLETION_INDEX", "valueFrom": {
            "fieldRef": {"fieldPath": f"metadata.labels['{INDEX}']"}}}
        assert container_env(pod, container)["JOB_COMPLETION_INDEX"] == str(index)
    assert status(api)["active"] == 2
    clock.advance(12)
    done = status(api)
    assert done["succeeded"] == 2 and done["completedIndexes"] == "0-1"
    assert kinds(done) == ["SuccessCriteriaMet", "Complete"]


def test_a_failed_index_gets_a_new_pod_within_the_backoff_limit(api, emu, clock):
    emu.cluster.failures_left = 1  # the first pod to run exits 1
    api.post(JOBS, json=indexed(2, backoffLimit=1))
    clock.advance(12)
    mid = status(api)
    assert mid["failed"] == 1 and mid["succeeded"] == 1 and mid["active"] == 1
    retried = [p for p in pods_of(api, NAME) if p["status"]["phase"] not in
               ("Succeeded", "Failed")]
    [again] = retried
    failed = [p for p in pods_of(api, NAME) if p["status"]["phase"] == "Failed"]
    assert again["metadata"]["annotations"][INDEX] == failed[0]["metadata"]["annotations"][INDEX]
    clock.advance(12)
    assert kinds(status(api)) == ["SuccessCriteriaMet", "Complete"]
    assert status(api)["completedIndexes"] == "0-1"


def test_failures_beyond_the_backoff_limit_fail_the_job(api, emu, clock):
    emu.cluster.failures_left = 1
    emu.knobs.job_run_seconds = 10
    api.post(JOBS, json=indexed(2, backoffLimit=0))
    clock.advance(2 + 10)  # both run; the first ends failed, the other succeeded
    failed = status(api)
    # Index 0's pod ran first and failed, index 1's succeeded: both counted.
    assert (failed["failed"], failed["succeeded"], failed["completedIndexes"]) == (1, 1, "1")
    assert kinds(failed) == ["FailureTarget", "Failed"]
    assert failed["conditions"][1]["reason"] == "BackoffLimitExceeded"


def test_the_deadline_ends_every_pod_of_an_indexed_job(api, emu, clock):
    emu.knobs.job_run_seconds = 10_000
    api.post(JOBS, json=indexed(3, activeDeadlineSeconds=60))
    clock.advance(5)
    assert status(api)["ready"] == 3
    clock.advance(60)
    assert status(api)["conditions"][1]["reason"] == "DeadlineExceeded"
    clock.advance(10)
    assert pods_of(api, NAME) == []


def test_indexed_needs_completions_and_a_hostname_within_63_characters(api, emu, clock):
    body = job(completionMode="Indexed")
    refused = api.post(JOBS, json=body)
    assert refused.status_code == 422
    assert "spec.completions: Required value: when completion mode is Indexed" in \
        refused.json()["message"]
    long = "j" * 62  # a valid Job name, but <job>-<index> is 64 characters
    api.post(JOBS, json={**indexed(2), "metadata": {"name": long}})
    assert pods_of(api, long) == []
    assert "must be no more than 63 characters" in emu.cluster.failed_creates[0]["message"]


def _headless(name: str = NAME, owner: dict | None = None) -> dict:
    meta = {"name": name, **({"ownerReferences": [owner]} if owner else {})}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"clusterIP": "None", "selector": {"job-name": NAME}}}


def test_a_headless_service_is_created_listed_and_deleted(api, emu):
    created = api.post(SERVICES, json=_headless())
    assert created.status_code == 201
    spec = created.json()["spec"]
    assert spec["clusterIP"] == "None" and spec["clusterIPs"] == ["None"]
    assert spec["type"] == "ClusterIP"
    assert api.post(SERVICES, json=_headless()).status_code == 409
    [listed] = api.get(SERVICES).json()["items"]
    assert listed["metadata"]["name"] == NAME and "kind" not in listed
    assert api.get(f"{SERVICES}/{NAME}").json()["kind"] == "Service"
    gone = api.delete(f"{SERVICES}/{NAME}")
    assert gone.status_code == 200 and gone.json()["metadata"]["name"] == NAME
    assert api.get(f"{SERVICES}/{NAME}").status_code == 404
    bad = api.post(SERVICES, json=_headless("1-starts-with-a-digit"))
    assert bad.status_code == 422 and "DNS-1035" in bad.json()["message"]


@pytest.mark.parametrize("policy, left", [("Background", 0), ("Foreground", 0),
                                          ("Orphan", 1)])
def test_a_jobs_service_goes_with_the_job_by_its_propagation_policy(api, emu, clock, policy,
                                                                    left):
    uid = api.post(JOBS, json=indexed(2)).json()["metadata"]["uid"]
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": NAME, "uid": uid}
    api.post(SERVICES, json=_headless(owner=owner))
    api.request("DELETE", f"{JOBS}/{NAME}", json={"propagationPolicy": policy})
    clock.advance(30)
    services = api.get(SERVICES).json()["items"]
    assert len(services) == left
    if left:
        assert services[0]["metadata"].get("ownerReferences") == []


def test_a_finished_jobs_ttl_takes_its_service_too(api, emu, clock):
    uid = api.post(JOBS, json=indexed(2, ttlSecondsAfterFinished=100)).json()["metadata"]["uid"]
    api.post(SERVICES, json=_headless(owner={"apiVersion": "batch/v1", "kind": "Job",
                                             "name": NAME, "uid": uid}))
    clock.advance(12 + 100)
    assert api.get(f"{JOBS}/{NAME}").status_code == 404
    assert api.get(SERVICES).json()["items"] == []


def _claim(name: str = "data", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteMany"],
                     "resources": {"requests": {"storage": "100Gi"}}, **spec}}


def test_a_claim_is_created_bound_listed_and_deleted(api, emu):
    created = api.post(CLAIMS, json=_claim(storageClassName="shared-vast"))
    assert created.status_code == 201
    body = created.json()
    assert body["status"] == {"phase": "Bound", "accessModes": ["ReadWriteMany"],
                              "capacity": {"storage": "100Gi"}}
    assert body["spec"]["storageClassName"] == "shared-vast"
    assert body["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert api.post(CLAIMS, json=_claim()).status_code == 409
    [listed] = api.get(CLAIMS).json()["items"]
    assert listed["metadata"]["name"] == "data"
    assert api.delete(f"{CLAIMS}/data").status_code == 200
    assert api.get(f"{CLAIMS}/data").status_code == 404


def test_a_claim_needs_access_modes_and_a_size(api, emu):
    refused = api.post(CLAIMS, json={"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                     "metadata": {"name": "data"}, "spec": {}})
    assert refused.status_code == 422
    message = refused.json()["message"]
    assert "spec.accessModes: Required value: at least 1 access mode is required" in message
    assert "spec.resources[storage]: Required value" in message


def test_a_claim_in_use_is_kept_until_its_last_pod_ends(api, emu, clock):
    api.post(CLAIMS, json=_claim())
    body = job(backoffLimit=0)
    pod_spec = body["spec"]["template"]["spec"]
    pod_spec["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]
    api.post(JOBS, json=body)
    clock.advance(3)
    api.delete(f"{CLAIMS}/data")
    kept = api.get(f"{CLAIMS}/data").json()
    assert kept["metadata"]["deletionTimestamp"]
    clock.advance(10)  # the job's pod ends
    assert api.get(f"{CLAIMS}/data").status_code == 404


def test_the_scheduler_fits_any_requested_resource(api, emu, clock):
    """An RDMA resource no node has leaves the pod Unschedulable, as a real
    scheduler's NodeResourcesFit does."""
    body = job()
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "1", "rdma/ib": "1"}}
    api.post(JOBS, json=body)
    [pod] = pods_of(api, "gpucloud-train-1a2b")
    [condition] = pod["status"]["conditions"]
    assert condition["reason"] == "Unschedulable" and "Insufficient rdma/ib" in \
        condition["message"]
    assert api.get(PODS).status_code == 200
