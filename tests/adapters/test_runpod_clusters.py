"""RunPod runs a multi-node job as one Instant Cluster (REST v2 createCluster):
the exact create request (golden file, validated against the v2 OpenAPI
fixture), the rendezvous names every node gets, the job read back from the
cluster and its member pods, cancel and the reaper deleting the whole cluster,
the error table on the cluster calls, and the job's network volume mount."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest

from gpucloud import Client
from gpucloud.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InsufficientCapacityError,
    NotFoundError,
    RateLimitError,
    SpecError,
    exit_code_for,
)
from gpucloud.jobs.multinode import node_env
from gpucloud.models import InstanceStatus, JobStatus, VolumeMount
from gpucloud.providers.runpod.adapter import JOB_ARGS, RunPodProvider
from gpucloud.providers.runpod.cluster import rendezvous_shell
from tests.adapters._job_support import DEADLINE, SECRET, assert_marked_and_keyless, make_job
from tests.adapters._runpod_support import (  # noqa: F401 (fixtures)
    API,
    FIXTURES,
    KEY,
    SPEC,
    api,
    body,
    make_spec,
    pod_body,
    problem,
    provider,
    reply,
    run,
    sent_json,
    sleeps,
)
from tests.openapi_check import response_errors

H100 = "NVIDIA H100 80GB HBM3"
CLUSTER_ID = "cluster_abc123"  # the spec's example id
CLUSTER = f"/v2/clusters/{CLUSTER_ID}"
LAUNCH = "gj-7f3a9c01"
GOLDEN = FIXTURES / "job_create_request_golden_cluster.json"
# RunPod's own rendezvous variables on node 2 of 4 (instant-clusters/configuration.mdx).
RUNPOD_ENV = {"PRIMARY_ADDR": "10.65.0.2", "MASTER_ADDR": "10.65.0.2", "PRIMARY_PORT": "29400",
              "MASTER_PORT": "29400", "NODE_ADDR": "10.65.0.4", "NODE_RANK": "2",
              "NUM_NODES": "4", "NUM_TRAINERS": "8", "HOST_NODE_ADDR": "10.65.0.2:29400",
              "WORLD_SIZE": "32"}


def cluster_spec(nodes: int = 4, **changes: Any):
    job = changes.pop("job", None) or make_job(nodes=nodes)
    return make_spec(instance_type=f"8x {H100}", region="US-TX-3", count=8, job=job,
                     launch_id=LAUNCH, name="train-resnet", shutdown_at=DEADLINE, **changes)


def cluster_body(**changes: Any) -> dict[str, Any]:
    raw = body("v2_cluster_from_property_examples")
    raw.update(changes)
    return raw


def echo_cluster(request: httpx.Request) -> httpx.Response:
    """A 201 Cluster shaped like the spec's examples, of the shape asked for."""
    sent = json.loads(request.content)
    return httpx.Response(201, json=cluster_body(
        name=sent["name"], compute=sent["compute"],
        pods={"total": 0, "byStatus": {}}))


def member(pod_id: str, rank: int | None, status: str = "RUNNING", ip: str | None = None,
           env: dict[str, str] | None = None) -> dict[str, Any]:
    """A cluster's member pod: the spec's Pod example with PodCluster's fields."""
    membership: dict[str, Any] = {"id": CLUSTER_ID, "rank": rank}
    if ip:
        membership["ip"] = ip
    return pod_body(id=pod_id, status=status, cluster=membership,
                    gpu={"id": H100, "count": 8}, dataCenterId="US-TX-3",
                    env=env if env is not None else {
                        "GPUCLOUD_LAUNCH_ID": LAUNCH,
                        "GPUCLOUD_SHUTDOWN_AT": "2026-12-01T18:00:00Z"})


def assert_cluster_golden(sent: dict[str, Any]) -> None:
    """``sent`` is the golden body; its job script is kept beside it as a .sh file."""
    shaped = copy.deepcopy(sent)
    script = shaped["env"]["GPUCLOUD_JOB"]
    shaped["env"]["GPUCLOUD_JOB"] = "@" + GOLDEN.with_suffix(".sh").name
    if os.environ.get("UPDATE_JOB_GOLDEN"):
        GOLDEN.write_text(json.dumps(shaped, indent=2, sort_keys=True) + "\n")
        GOLDEN.with_suffix(".sh").write_text(script)
    assert shaped == json.loads(GOLDEN.read_text()), f"the request differs from {GOLDEN.name}"
    assert script == GOLDEN.with_suffix(".sh").read_text()


# -- create ----------------------------------------------------------------------------


def test_runpod_declares_native_multi_node_and_volumes():
    assert RunPodProvider.capabilities.multi_node == "native"
    assert RunPodProvider.capabilities.volumes is True


def test_a_multi_node_job_sends_exactly_the_golden_cluster_request(api, run, provider):
    route = api.on("POST", "/v2/clusters", echo_cluster)
    job = run(provider.submit_job(cluster_spec()))
    request = route.calls.last.request
    sent = sent_json(request)
    assert_cluster_golden(sent)
    # The shape the spec names: 4 pods of 8 H100s, in the offer's data center.
    assert sent["compute"] == {"gpuTypeId": H100, "gpuCountPerPod": 8, "podCount": 4}
    assert sent["type"] == "TRAINING" and sent["dataCenterIds"] == ["US-TX-3"]
    assert sent["args"] == JOB_ARGS and sent["env"]["GPUCLOUD_LAUNCH_ID"] == LAUNCH
    assert sent["env"]["GPUCLOUD_SHUTDOWN_AT"] == "2026-12-01T18:00:00Z"
    assert sent["env"]["HF_TOKEN"] == SECRET and SECRET not in sent["env"]["GPUCLOUD_JOB"]
    assert_marked_and_keyless(request, KEY)
    assert [r.url.path for r in api.requests] == ["/v2/clusters"]  # never a pod
    assert (job.id, job.nodes, job.launch_id, job.status) == (
        CLUSTER_ID, 4, LAUNCH, JobStatus.QUEUED)
    assert job.shutdown_at == DEADLINE


def test_a_one_node_job_is_still_a_pod(api, run, provider):
    from tests.adapters._runpod_support import echo_pod

    route = api.on("POST", "/v2/pods", echo_pod)
    job = run(provider.submit_job(cluster_spec(nodes=1)))
    assert route.call_count == 1 and job.nodes == 1
    assert "NODE_RANK" not in sent_json(route.calls.last.request)["env"]["GPUCLOUD_JOB"]


def test_every_node_gets_gpucloud_rendezvous_names_from_runpods(api, run, provider):
    route = api.on("POST", "/v2/clusters", echo_cluster)
    run(provider.submit_job(cluster_spec()))
    script = sent_json(route.calls.last.request)["env"]["GPUCLOUD_JOB"]
    prelude = rendezvous_shell(4, 8)
    assert script.startswith("#!/bin/sh\n" + prelude)  # before the wrapper runs anything
    # What node 2 of 4 sees, RunPod's variables given as RunPod sets them.
    result = subprocess.run(["sh", "-c", prelude + "env"], capture_output=True, text=True,
                            env={**RUNPOD_ENV, "PATH": "/usr/bin:/bin"}, check=True)
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    promised = node_env(2, ["10.65.0.2", "10.65.0.3", "10.65.0.4", "10.65.0.5"], 8,
                        master_port=29400)
    # Every promised name but the address list, which no RunPod variable gives.
    assert {k: seen.get(k) for k in promised if k != "GPUCLOUD_NODE_ADDRS"} == {
        k: v for k, v in promised.items() if k != "GPUCLOUD_NODE_ADDRS"}
    assert "GPUCLOUD_NODE_ADDRS" not in seen
    assert result.stderr == ""


def test_without_runpods_port_the_rendezvous_port_is_node_envs(api):
    env = {k: v for k, v in RUNPOD_ENV.items() if "PORT" not in k}
    result = subprocess.run(["sh", "-c", rendezvous_shell(4, 8) + 'echo "$MASTER_PORT"'],
                            capture_output=True, text=True, check=True,
                            env={**env, "PATH": "/usr/bin:/bin"})
    assert result.stdout == node_env(0, ["a"], 8)["MASTER_PORT"] + "\n"


def test_a_node_without_runpods_rendezvous_says_so(api):
    result = subprocess.run(["sh", "-c", rendezvous_shell(2, 1)], capture_output=True,
                            text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    assert "RunPod set no PRIMARY_ADDR or NODE_RANK" in result.stderr


def test_a_community_type_is_refused_for_a_cluster_before_any_request(api, run, provider):
    route = api.on("POST", "/v2/clusters", echo_cluster)
    spec = cluster_spec()
    spec = spec.model_copy(update={"offer": spec.offer.model_copy(
        update={"instance_type": f"8x {H100} (community)"})})
    with pytest.raises(SpecError, match="community") as info:
        run(provider.submit_job(spec))
    assert route.call_count == 0 and exit_code_for(info.value) == 2


# -- volumes on a pod and a cluster ----------------------------------------------------------


def data(volume_id: str | None = "2q9m7x4c", name: str = "training-dataset",
         mount: str = "/data") -> VolumeMount:
    return VolumeMount(name=name, mount=mount, volume_id=volume_id)


def test_a_cluster_mounts_the_jobs_network_volume(api, run, provider):
    route = api.on("POST", "/v2/clusters", echo_cluster)
    run(provider.submit_job(cluster_spec(job=make_job(nodes=2, volumes=(data(),)))))
    assert sent_json(route.calls.last.request)["mounts"] == {
        "network": [{"volumeId": "2q9m7x4c", "path": "/data"}]}


def test_a_pod_mounts_the_jobs_network_volume(api, run, provider):
    from tests.adapters._runpod_support import echo_pod

    route = api.on("POST", "/v2/pods", echo_pod)
    run(provider.submit_job(make_spec(job=make_job(volumes=(data(),)))))
    assert sent_json(route.calls.last.request)["mounts"] == {
        "network": [{"volumeId": "2q9m7x4c", "path": "/data"}]}


@pytest.mark.parametrize("nodes", [1, 3])
def test_a_job_with_two_volumes_is_refused_before_any_request(api, run, provider, nodes):
    pods = api.on("POST", "/v2/pods", reply(500))
    made = api.on("POST", "/v2/clusters", reply(500))
    two = (data(), data("vol2abcd", "checkpoints", "/ckpt"))
    with pytest.raises(SpecError, match="mounts one network volume") as info:
        run(provider.submit_job(cluster_spec(job=make_job(nodes=nodes, volumes=two))))
    assert exit_code_for(info.value) == 2
    assert "training-dataset, checkpoints" in str(info.value)
    assert pods.call_count == 0 and made.call_count == 0


# -- read back -------------------------------------------------------------------------------


def test_get_job_reads_the_cluster_and_its_pods_in_rank_order(api, run, provider):
    api.on("GET", f"/v2/pods/{CLUSTER_ID}", problem(404, "Not Found", "pod not found"))
    api.on("GET", CLUSTER, reply(200, cluster_body()))
    api.on("GET", f"{CLUSTER}/pods", reply(200, {"pods": [
        member("node1pod1", 1, ip="10.65.0.3"),
        member("node0pod0", 0, ip="10.65.0.2"),
        member("node3pod3", None, status="PROVISIONING"),
        member("node2pod2", 2, ip="10.65.0.4"),
    ]}))
    job = run(provider.get_job(CLUSTER_ID))
    assert job.id == CLUSTER_ID and job.name == "my-training-cluster" and job.nodes == 4
    assert [i.id for i in job.instances] == ["node0pod0", "node1pod1", "node2pod2", "node3pod3"]
    assert [i.private_ip for i in job.instances] == ["10.65.0.2", "10.65.0.3", "10.65.0.4", None]
    assert job.instance == job.instances[0] and job.instance.status is InstanceStatus.RUNNING
    assert job.status is JobStatus.RUNNING and job.provider_status == "PROVISIONING=1,RUNNING=3"
    assert job.launch_id == LAUNCH
    assert job.shutdown_at == datetime(2026, 12, 1, 18, tzinfo=timezone.utc)
    assert job.created_at == datetime(2026, 6, 29, 20, tzinfo=timezone.utc)


def test_get_job_by_a_member_pods_id_reads_its_cluster(api, run, provider):
    api.on("GET", "/v2/pods/node0pod0", reply(200, member("node0pod0", 0)))
    api.on("GET", CLUSTER, reply(200, cluster_body()))
    api.on("GET", f"{CLUSTER}/pods", reply(200, {"pods": [member("node0pod0", 0)]}))
    job = run(provider.get_job("node0pod0"))
    assert job.id == CLUSTER_ID and job.nodes == 4


def test_a_cluster_still_provisioning_is_queued(api, run, provider):
    api.on("GET", f"/v2/pods/{CLUSTER_ID}", problem(404, "Not Found", "pod not found"))
    api.on("GET", CLUSTER, reply(200, cluster_body(pods={"total": 0, "byStatus": {}})))
    api.on("GET", f"{CLUSTER}/pods", reply(200, {"pods": []}))
    job = run(provider.get_job(CLUSTER_ID))
    assert job.status is JobStatus.QUEUED and job.instances == () and job.nodes == 4


def test_get_job_of_no_pod_and_no_cluster_is_not_found(api, run, provider):
    api.on("GET", f"/v2/pods/{CLUSTER_ID}", problem(404, "Not Found", "pod not found"))
    api.on("GET", CLUSTER, reply(404, body("v2_error_404_notFound")))
    with pytest.raises(NotFoundError) as info:
        run(provider.get_job(CLUSTER_ID))
    assert exit_code_for(info.value) == 5
    # Not found as a pod, then as a cluster: a multi-node job's id is its cluster's.
    assert [r.url.path for r in api.requests] == [f"/v2/pods/{CLUSTER_ID}", CLUSTER]


def test_list_jobs_shows_a_cluster_as_one_job(api, run, provider):
    single = pod_body(id="singlepod1", env={"GPUCLOUD_LAUNCH_ID": "gj-11111111"})
    foreign = pod_body(id="foreignpod", env={})
    listing = api.on("GET", "/v2/pods", reply(200, {"pods": [
        single, member("node1pod1", 1), foreign, member("node0pod0", 0)]}))
    api.on("GET", "/v2/clusters", reply(200, {"clusters": [cluster_body()]}))
    jobs = {j.id: j for j in run(provider.list_jobs())}
    assert set(jobs) == {"singlepod1", CLUSTER_ID}
    assert listing.calls.last.request.url.params["includeClusterPods"] == "true"
    cluster = jobs[CLUSTER_ID]
    assert [i.id for i in cluster.instances] == ["node0pod0", "node1pod1"]
    assert (cluster.nodes, cluster.launch_id, cluster.name) == (4, LAUNCH, "my-training-cluster")


def test_list_jobs_asks_for_clusters_only_when_a_job_runs_on_one(api, run, provider):
    api.on("GET", "/v2/pods", reply(200, {"pods": [
        pod_body(id="singlepod1", env={"GPUCLOUD_LAUNCH_ID": "gj-11111111"}),
        member("othernode0", 0, env={})]}))  # someone else's cluster
    assert [j.id for j in run(provider.list_jobs())] == ["singlepod1"]
    [listing] = api.requests  # no GET /v2/clusters
    assert listing.url.path == "/v2/pods" and listing.url.params["includeClusterPods"] == "true"


def test_the_cluster_fixture_is_a_cluster_by_the_spec():
    request = httpx.Request("GET", f"{API}{CLUSTER}")
    assert response_errors(SPEC, request, httpx.Response(200, json=cluster_body())) == []
    # The spec does describe a cluster: one without its required fields is refused.
    assert response_errors(SPEC, request, httpx.Response(200, json={}))
    member_pods = {"pods": [member("node0pod0", 0, ip="10.65.0.2")]}
    pods = httpx.Request("GET", f"{API}{CLUSTER}/pods")
    assert response_errors(SPEC, pods, httpx.Response(200, json=member_pods)) == []


# -- cancel and the deadline delete the whole cluster -----------------------------------------


def test_cancel_job_deletes_the_cluster(api, run, provider):
    api.on("DELETE", f"/v2/pods/{CLUSTER_ID}", problem(404, "Not Found", "pod not found"))
    deleted = api.on("DELETE", CLUSTER, reply(204))
    run(provider.cancel_job(CLUSTER_ID))
    assert deleted.call_count == 1
    assert [(r.method, r.url.path) for r in api.requests] == [
        ("DELETE", f"/v2/pods/{CLUSTER_ID}"), ("DELETE", CLUSTER)]


def test_cancel_by_a_member_pods_id_deletes_its_cluster(api, run, provider):
    api.on("DELETE", "/v2/pods/node1pod1",
           problem(409, "Conflict", "Pod belongs to a cluster and cannot be terminated via "
                                    "the pod endpoints."))
    api.on("GET", "/v2/pods/node1pod1", reply(200, member("node1pod1", 1)))
    deleted = api.on("DELETE", CLUSTER, reply(204))
    run(provider.cancel_job("node1pod1"))
    assert deleted.call_count == 1


def test_deleting_one_node_says_to_cancel_the_job(api, run, provider):
    api.on("DELETE", "/v2/pods/node1pod1",
           problem(409, "Conflict", "Pod belongs to a cluster and cannot be terminated via "
                                    "the pod endpoints."))
    with pytest.raises(ConflictError) as info:
        run(provider.delete("node1pod1"))
    assert "gpucloud jobs cancel" in (info.value.hint or "")


def test_the_reaper_deletes_an_expired_cluster_whole(api):
    expired = {"GPUCLOUD_LAUNCH_ID": "gj-3a1a2245a7",
               "GPUCLOUD_SHUTDOWN_AT": "2020-01-01T00:00:00Z"}
    nodes = [member("node0pod0", 0, env=expired), member("node1pod1", 1, env=expired)]
    api.on("GET", "/v2/pods", reply(200, {"pods": nodes}))
    api.on("GET", "/v2/network-volumes", reply(200, []))  # reap's volume check
    for node in nodes:
        api.on("GET", f"/v2/pods/{node['id']}", reply(200, node))
        api.on("DELETE", f"/v2/pods/{node['id']}",
               problem(409, "Conflict", "Pod belongs to a cluster and cannot be terminated "
                                        "via the pod endpoints."))
    deleted = api.on("DELETE", CLUSTER, reply(204), reply(404, body("v2_error_404_notFound")))
    report = Client(["runpod"], credentials={"runpod": KEY}, use_keyring=False,
                    sleep=lambda s: None).reap()
    # Each overdue node ends the whole cluster; the second finds it gone already.
    assert deleted.call_count == 2
    actions = {a.instance.id: a.action for a in report.actions}
    assert set(actions) == {"node0pod0", "node1pod1"}
    assert sorted(actions.values()) == ["gone", "terminated"]


# -- errors on the cluster calls, through the error table -----------------------------------


@pytest.mark.parametrize(("status", "payload", "cls", "code"), [
    (400, body("v2_error_400_no_capacity"), InsufficientCapacityError, 6),
    (400, body("v2_error_400_badRequest"), BadRequestError, 2),
    (401, body("v2_error_401_missingBearerToken"), AuthenticationError, 4),
    (422, body("v2_error_422_validationFailed"), BadRequestError, 2),
])
def test_cluster_create_errors_map_through_the_table(api, run, provider, status, payload, cls,
                                                     code):
    api.on("POST", "/v2/clusters", reply(status, payload))
    with pytest.raises(cls) as info:
        run(provider.submit_job(cluster_spec()))
    assert exit_code_for(info.value) == code


def test_a_rate_limited_cluster_read_is_a_rate_limit(api, run, provider, sleeps):
    api.on("GET", f"/v2/pods/{CLUSTER_ID}", problem(404, "Not Found", "pod not found"))
    api.on("GET", CLUSTER, reply(429, body("v2_error_429_rateLimited")))
    with pytest.raises(RateLimitError):
        run(provider.get_job(CLUSTER_ID))
