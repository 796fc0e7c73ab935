"""The Kubernetes API emulator proven with plain httpx over loopback, so the
end-to-end tests that run gpucloud against it rest on something checked:
nodes, pods and the scheduler, selectors, merge-patch, delete, logs, bearer
tokens, TokenRequest, Status errors, TLS and the exec credential plugin.
(Jobs: test_k8s_emulator_jobs.py.) Time is a FakeClock the tests advance."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess

import httpx
import pytest
import yaml

from tests.k8s_emulator import (
    EXEC_PLUGIN, FakeClock, Knobs, KubeEmulator, gpu_node, write_kubeconfig,
)

NS = "/api/v1/namespaces/default"
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
MANAGED = {"app.kubernetes.io/managed-by": "gpucloud"}
# meta/v1 Status bodies as the apiserver sends them (the shapes of the examples
# in the shared Kubernetes spec folder: status_401_unauthorized.json and friends).
UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
TOKEN_422_MESSAGE = ('TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: '
                     'Invalid value: 60: may not specify a duration less than 10 minutes')


def pod(name: str = "p1", gpus: int | None = 1, image: str | None = IMAGE,
        labels: dict[str, str] | None = None, gpu_class: str | None = None) -> dict:
    container: dict = {"name": "main", "command": ["sleep", "infinity"]}
    if image is not None:
        container["image"] = image
    if gpus is not None:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    spec: dict = {"restartPolicy": "Never", "containers": [container]}
    if gpu_class:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "gpu.nvidia.com/class", "operator": "In", "values": [gpu_class]}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or MANAGED},
            "spec": spec}


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def emu(clock):
    knobs = Knobs(pod_start_seconds=2, terminate_seconds=5, job_run_seconds=10)
    with KubeEmulator(namespaces=("default", "team"), service_accounts=("default", "ci"),
                      clock=clock, knobs=knobs) as emulator:
        yield emulator


@pytest.fixture
def api(emu):
    with emu.admin_client() as client:
        yield client


def status_of(api, name):
    return api.get(f"{NS}/pods/{name}").json()["status"]


def test_nodes_list_gpu_labels_and_allocatable(api):
    reply = api.get("/api/v1/nodes")
    assert reply.status_code == 200 and reply.json()["kind"] == "NodeList"
    items = reply.json()["items"]
    assert [n["metadata"]["name"] for n in items] == ["gpu-node-1", "gpu-node-2"]
    assert "kind" not in items[0]  # list items carry no kind, as on a real server
    assert items[0]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert items[0]["metadata"]["labels"]["gpu.nvidia.com/class"] == "H100_NVLINK_80GB"
    assert items[0]["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    picked = api.get("/api/v1/nodes",
                     params={"labelSelector": "kubernetes.io/hostname in (gpu-node-2)"})
    assert [n["metadata"]["name"] for n in picked.json()["items"]] == ["gpu-node-2"]


def test_every_request_needs_a_valid_unexpired_token(emu, api, clock):
    bare = httpx.get(f"{emu.url}/api/v1/nodes")
    assert bare.status_code == 401 and bare.json() == UNAUTHORIZED
    wrong = httpx.get(f"{emu.url}/api/v1/nodes", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json() == UNAUTHORIZED
    short = emu.issue_token(ttl=10)
    headers = {"Authorization": f"Bearer {short}"}
    assert httpx.get(f"{emu.url}/api/v1/nodes", headers=headers).status_code == 200
    clock.advance(11)
    expired = httpx.get(f"{emu.url}/api/v1/nodes", headers=headers)
    assert expired.status_code == 401 and expired.json() == UNAUTHORIZED
    assert api.get("/api/v1/nodes").status_code == 200  # the static token lives on
    emu.cluster.expire_tokens("admin")
    assert api.get("/api/v1/nodes").status_code == 401


def test_create_pod_then_scheduled_then_running(api, clock):
    created = api.post(f"{NS}/pods", json=pod())
    assert created.status_code == 201
    body = created.json()
    meta = body["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["namespace"] == "default"
    assert meta["creationTimestamp"].endswith("Z")
    assert body["status"]["phase"] == "Pending" and "conditions" not in body["status"]
    assert body["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    bound = api.get(f"{NS}/pods/p1").json()
    assert bound["spec"]["nodeName"] == "gpu-node-1" and bound["status"]["phase"] == "Pending"
    assert bound["status"]["conditions"][0]["type"] == "PodScheduled"
    assert int(bound["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    clock.advance(2)
    running = status_of(api, "p1")
    assert running["phase"] == "Running" and running["podIP"].startswith("10.244.")
    assert {c["type"]: c["status"] for c in running["conditions"]}["Ready"] == "True"


def test_create_errors_are_status_bodies(api):
    assert api.post(f"{NS}/pods", json=pod()).status_code == 201
    again = api.post(f"{NS}/pods", json=pod())
    assert again.status_code == 409
    assert again.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": 'pods "p1" already exists',
                            "reason": "AlreadyExists", "details": {"name": "p1", "kind": "pods"},
                            "code": 409}
    missing = api.get(f"{NS}/pods/nope")
    assert missing.status_code == 404
    assert missing.json()["message"] == 'pods "nope" not found'
    assert missing.json()["reason"] == "NotFound" and missing.json()["code"] == 404
    no_image = api.post(f"{NS}/pods", json=pod("p2", image=None))
    assert no_image.status_code == 422 and no_image.json()["reason"] == "Invalid"
    assert no_image.json()["message"] == (
        'Pod "p2" is invalid: spec.containers[0].image: Required value')
    assert no_image.json()["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value",
         "field": "spec.containers[0].image"}]
    bad_name = api.post(f"{NS}/pods", json=pod("Bad_Name"))
    assert bad_name.status_code == 422
    assert bad_name.json()["message"].startswith(
        'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123')
    other_ns = api.post(f"{NS}/pods",
                        json={**pod("p3"), "metadata": {"name": "p3", "namespace": "team"}})
    assert other_ns.status_code == 400 and other_ns.json()["reason"] == "BadRequest"
    nowhere = api.post("/api/v1/namespaces/ghost/pods", json=pod("p4"))
    assert nowhere.status_code == 404
    assert nowhere.json()["message"] == 'namespaces "ghost" not found'
    uneven = pod("p5")
    uneven["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "1"},
                                                     "limits": {"nvidia.com/gpu": "2"}}
    assert api.post(f"{NS}/pods", json=uneven).json()["details"]["causes"][0]["message"] == (
        'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2')


def test_more_gpus_than_any_node_has_stays_pending_unschedulable(api, clock):
    assert api.post(f"{NS}/pods", json=pod("big", gpus=9)).status_code == 201
    clock.advance(30)
    status = status_of(api, "big")
    assert status["phase"] == "Pending" and "podIP" not in status
    [cond] = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodScheduled", "False", "Unschedulable")
    assert cond["message"].startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")


def test_free_gpus_are_counted_and_freed_by_deletion(api, clock):
    for name in ("a", "b"):
        assert api.post(f"{NS}/pods", json=pod(name, gpus=8)).status_code == 201
    api.post(f"{NS}/pods", json=pod("c", gpus=1))
    clock.advance(3)
    assert status_of(api, "a")["phase"] == status_of(api, "b")["phase"] == "Running"
    assert status_of(api, "c")["conditions"][0]["reason"] == "Unschedulable"
    active = api.get("/api/v1/pods", params={
        "fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}).json()["items"]
    assert sorted(p["metadata"]["name"] for p in active) == ["a", "b", "c"]
    gone = api.delete(f"{NS}/pods/a")
    assert gone.status_code == 200 and gone.json()["metadata"]["deletionTimestamp"]
    assert status_of(api, "c")["conditions"][0]["reason"] == "Unschedulable"  # still terminating
    clock.advance(5)
    assert api.get(f"{NS}/pods/a").status_code == 404
    assert api.delete(f"{NS}/pods/a").status_code == 404
    assert api.get(f"{NS}/pods/c").json()["spec"]["nodeName"] == "gpu-node-1"


def test_node_affinity_by_gpu_class(emu, clock):
    emu.cluster.nodes["gpu-node-2"]["metadata"]["labels"]["gpu.nvidia.com/class"] = "A100_PCIE_40GB"
    headers = {"Authorization": f"Bearer {emu.admin_token}"}
    with httpx.Client(base_url=emu.url, headers=headers) as api:
        api.post(f"{NS}/pods", json=pod("a100", gpus=4, gpu_class="A100_PCIE_40GB"))
        assert api.get(f"{NS}/pods/a100").json()["spec"]["nodeName"] == "gpu-node-2"
        api.post(f"{NS}/pods", json=pod("b200", gpus=1, gpu_class="B200"))
        message = status_of(api, "b200")["conditions"][0]["message"]
        assert message.startswith("0/2 nodes are available: 2 node(s) didn't match Pod's node "
                                  "affinity/selector.")
        api.post(f"{NS}/pods", json=pod("a100-big", gpus=5, gpu_class="A100_PCIE_40GB"))
        message = status_of(api, "a100-big")["conditions"][0]["message"]
        assert message.startswith("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
                                  "1 node(s) didn't match Pod's node affinity/selector.")


def test_label_and_field_selectors(api):
    api.post(f"{NS}/pods", json=pod("mine", labels={"app.kubernetes.io/managed-by": "gpucloud",
                                                   "gpucloud.dev/launch-id": "gc-1"}))
    api.post(f"{NS}/pods", json=pod("theirs", labels={"app": "web"}))
    api.post("/api/v1/namespaces/team/pods", json=pod("elsewhere"))

    def names(path, **params):
        reply = api.get(path, params=params)
        assert reply.status_code == 200, reply.text
        return sorted(p["metadata"]["name"] for p in reply.json()["items"])

    assert names(f"{NS}/pods", labelSelector="app.kubernetes.io/managed-by=gpucloud") == ["mine"]
    assert names(f"{NS}/pods", labelSelector="gpucloud.dev/launch-id") == ["mine"]
    assert names(f"{NS}/pods", labelSelector="!gpucloud.dev/launch-id") == ["theirs"]
    assert names(f"{NS}/pods", labelSelector="app notin (web)") == ["mine"]
    assert names("/api/v1/pods", labelSelector="app.kubernetes.io/managed-by==gpucloud") == [
        "elsewhere", "mine"]
    assert names(f"{NS}/pods", fieldSelector="metadata.name=theirs") == ["theirs"]
    unknown = api.get(f"{NS}/pods", params={"fieldSelector": "spec.image=x"})
    assert unknown.status_code == 400
    assert unknown.json()["message"] == "field label not supported: spec.image"


def test_merge_patch_annotations(api):
    api.post(f"{NS}/pods", json=pod())
    path = f"{NS}/pods/p1"
    merge = {"Content-Type": "application/merge-patch+json"}
    body = {"metadata": {"annotations": {"gpucloud.dev/shutdown-at": "2026-12-01T18:00:00Z"}}}
    first = api.patch(path, content=json.dumps(body), headers=merge)
    assert first.status_code == 200
    assert first.json()["metadata"]["annotations"] == {
        "gpucloud.dev/shutdown-at": "2026-12-01T18:00:00Z"}
    later = {"metadata": {"annotations": {
        "gpucloud.dev/shutdown-at": "2026-12-02T00:00:00Z", "x": "1"}}}
    api.patch(path, content=json.dumps(later), headers=merge)
    api.patch(path, content=json.dumps({"metadata": {"annotations": {"x": None}}}), headers=merge)
    assert api.get(path).json()["metadata"]["annotations"] == {
        "gpucloud.dev/shutdown-at": "2026-12-02T00:00:00Z"}
    wrong_type = api.patch(path, content=json.dumps(body),
                           headers={"Content-Type": "application/json"})
    assert wrong_type.status_code == 415 and wrong_type.json()["reason"] == "UnsupportedMediaType"
    spec = api.patch(path, content=json.dumps({"spec": {"nodeName": "elsewhere"}}), headers=merge)
    assert spec.status_code == 422 and spec.json()["reason"] == "Invalid"
    assert api.patch(f"{NS}/pods/nope", content="{}", headers=merge).status_code == 404


def test_logs(api, clock):
    api.post(f"{NS}/pods", json=pod())
    waiting = api.get(f"{NS}/pods/p1/log")
    assert waiting.status_code == 400
    assert waiting.json()["message"] == (
        'container "main" in pod "p1" is waiting to start: ContainerCreating')
    clock.advance(2)
    text = api.get(f"{NS}/pods/p1/log")
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    assert text.text.splitlines() == [
        "[emulator] container main started: nvcr.io/nvidia/pytorch:24.05-py3 on gpu-node-1",
        "$ sleep infinity"]
    assert api.get(f"{NS}/pods/p1/log", params={"tailLines": 1}).text == "$ sleep infinity\n"
    assert api.get(f"{NS}/pods/nope/log").status_code == 404


def test_logs_follow_streams_until_the_container_ends():
    knobs = Knobs(pod_start_seconds=0.05, job_run_seconds=0.3)
    with KubeEmulator(knobs=knobs) as emu:
        headers = {"Authorization": f"Bearer {emu.admin_token}"}
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
               "spec": {"template": {"spec": {**pod()["spec"]}}}}
        httpx.post(f"{emu.url}/apis/batch/v1/namespaces/default/jobs", json=job, headers=headers)
        assert emu.wait_for(lambda: any(p["status"]["phase"] == "Running"
                                        for p in emu.cluster.pods.values()))
        [name] = [k[1] for k in emu.cluster.pods]
        with httpx.stream("GET", f"{emu.url}{NS}/pods/{name}/log", params={"follow": "true"},
                          headers=headers, timeout=10) as reply:
            lines = list(reply.iter_lines())
        assert lines[-1] == "training done"


def test_token_request(emu, api, clock):
    path = f"{NS}/serviceaccounts/ci/token"
    reply = api.post(path, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                 "spec": {"expirationSeconds": 3600}})
    assert reply.status_code == 201
    body = reply.json()
    assert body["kind"] == "TokenRequest" and body["metadata"]["name"] == "ci"
    assert body["spec"]["expirationSeconds"] == 3600
    from tests.k8s_emulator.objects import rfc3339
    assert body["status"]["expirationTimestamp"] == rfc3339(clock() + 3600)
    minted = {"Authorization": f"Bearer {body['status']['token']}"}
    assert httpx.get(f"{emu.url}/api/v1/nodes", headers=minted).status_code == 200
    assert emu.requests[-1]["user"] == "system:serviceaccount:default:ci"
    clock.advance(3600)
    assert httpx.get(f"{emu.url}/api/v1/nodes", headers=minted).status_code == 401
    default = api.post(path, json={"spec": {}}).json()
    assert default["spec"]["expirationSeconds"] == 3600  # SetDefaults_TokenRequestSpec
    short = api.post(path, json={"spec": {"expirationSeconds": 60}})
    assert short.status_code == 422 and short.json()["message"] == TOKEN_422_MESSAGE
    assert short.json()["details"]["causes"][0]["field"] == "spec.expirationSeconds"
    huge = api.post(path, json={"spec": {"expirationSeconds": 2**32 + 1}})
    assert huge.status_code == 422
    ghost = api.post(f"{NS}/serviceaccounts/ghost/token", json={"spec": {}})
    assert ghost.status_code == 404
    assert ghost.json()["message"] == 'serviceaccounts "ghost" not found'


def test_forbidden_unknown_path_and_wrong_method(emu, api):
    emu.cluster.denied.add(("create", "pods"))
    denied = api.post(f"{NS}/pods", json=pod())
    assert denied.status_code == 403 and denied.json()["reason"] == "Forbidden"
    assert denied.json()["message"] == ('pods is forbidden: User "admin" cannot create resource '
                                        '"pods" in API group "" in the namespace "default"')
    assert api.get("/api/v1/nothing").status_code == 404
    assert api.put(f"{NS}/pods/p1", json={}).status_code == 405


def test_tls_with_ca_data(tmp_path):
    with KubeEmulator(tls=True) as emu:
        assert emu.url.startswith("https://127.0.0.1:")
        config = yaml.safe_load(write_kubeconfig(tmp_path / "config", emu).read_text())
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
        ca_file = tmp_path / "ca.pem"
        ca_file.write_bytes(ca)
        headers = {"Authorization": f"Bearer {config['users'][0]['user']['token']}"}
        assert httpx.get(f"{emu.url}/api/v1/nodes", headers=headers,
                         verify=ssl.create_default_context(cafile=str(ca_file))).status_code == 200
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{emu.url}/api/v1/nodes", headers=headers)


def test_exec_plugin_mints_short_lived_tokens(tmp_path):
    clock = FakeClock()
    with KubeEmulator(clock=clock) as emu:
        calls = tmp_path / "calls"
        config = yaml.safe_load(write_kubeconfig(tmp_path / "config", emu, exec_ttl=30,
                                                 exec_calls=calls, namespace="default").read_text())
        assert config["contexts"][0]["context"]["namespace"] == "default"
        entry = config["users"][0]["user"]["exec"]
        assert entry["apiVersion"] == "client.authentication.k8s.io/v1"
        assert entry["args"] == [str(EXEC_PLUGIN)] and os.access(EXEC_PLUGIN, os.X_OK)

        def run_plugin():
            env = {**os.environ, **{e["name"]: e["value"] for e in entry["env"]},
                   "KUBERNETES_EXEC_INFO": json.dumps({
                       "apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                       "spec": {"interactive": False}})}
            done = subprocess.run([entry["command"], *entry["args"]], env=env, check=True,
                                  capture_output=True, text=True, timeout=30)
            return json.loads(done.stdout)

        credential = run_plugin()
        assert credential["kind"] == "ExecCredential"
        from tests.k8s_emulator.objects import rfc3339
        assert credential["status"]["expirationTimestamp"] == rfc3339(clock() + 30)
        headers = {"Authorization": f"Bearer {credential['status']['token']}"}
        assert httpx.get(f"{emu.url}/api/v1/nodes", headers=headers).status_code == 200
        clock.advance(31)
        assert httpx.get(f"{emu.url}/api/v1/nodes", headers=headers).status_code == 401
        fresh = run_plugin()["status"]["token"]
        assert httpx.get(f"{emu.url}/api/v1/nodes",
                         headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
        assert emu.exec_tokens_issued == 2 and len(calls.read_text().splitlines()) == 2
        assert httpx.post(f"{emu.url}/_emulator/tokens", json={}).status_code == 401


def test_custom_nodes():
    nodes = [gpu_node(f"n{i}", gpus=4, gpu_class="A100_PCIE_40GB", product="NVIDIA-A100-PCIE-40GB")
             for i in range(3)]
    with KubeEmulator(nodes) as emu:
        reply = httpx.get(f"{emu.url}/api/v1/nodes",
                          headers={"Authorization": f"Bearer {emu.admin_token}"})
        labels = [n["metadata"]["labels"]["nvidia.com/gpu.product"] for n in reply.json()["items"]]
        assert labels == ["NVIDIA-A100-PCIE-40GB"] * 3
