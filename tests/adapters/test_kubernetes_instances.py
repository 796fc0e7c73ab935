"""Kubernetes adapter: machines are pods (offers, create, list, get, delete,
deadline, Unschedulable). respx answers with tests/fixtures/kubernetes bodies;
support in _kubernetes_support.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import kubernetes_validate
import pytest

from gpucloud.providers.base import OfferQuery
from gpucloud.providers.kubernetes import KubernetesProvider
from gpucloud.errors import InsufficientCapacityError, SpecError
from gpucloud.models import InstanceSpec, InstanceStatus, Offer
from tests.adapters._kubernetes_support import (  # noqa: F401 (fixtures)
    CONTEXT,
    NS,
    body,
    cluster_fixture,
    kube_path_fixture,
    make_provider,
    node,
    run,
    running,
)

DEADLINE = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def offer(gpu_class: str = "H100_NVLINK_80GB", count: int = 1) -> Offer:
    return Offer(provider="coreweave", instance_type=gpu_class, region=CONTEXT, gpu="H100",
                 gpu_count=count, price_per_hour=Decimal(0), source="live")


def spec(**changes) -> InstanceSpec:
    fields = dict(offer=offer(), launch_id="gc-3a1a2245a7", name="my box",
                  image="nvcr.io/nvidia/pytorch:24.05-py3", shutdown_at=DEADLINE)
    fields.update(changes)
    return InstanceSpec(**fields)


def validate(manifest: dict) -> None:
    kubernetes_validate.validate(manifest, "1.30.0", strict=True)


# -- the pod ---------------------------------------------------------------------------


def test_pod_manifest_is_exactly_this(cluster, kube_path):
    provider = make_provider(kube_path)
    instance = run(provider, provider.create(spec()))
    [post] = [r for r in cluster.requests if r.method == "POST"]
    assert post.url.path == f"/api/v1/namespaces/{NS}/pods"
    sent = json.loads(post.content)
    assert sent == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "gpucloud-gc-3a1a2245a7", "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "gpucloud",
                       "gpucloud.dev/launch-id": "gc-3a1a2245a7"},
            "annotations": {"gpucloud.dev/name": "my box",
                            "gpucloud.dev/shutdown-at": "2026-01-02T03:04:05Z"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"],
                "resources": {"limits": {"nvidia.com/gpu": "1"},
                              "requests": {"nvidia.com/gpu": "1"}}}],
            "affinity": body("create_pod_request_gpu.json")["spec"]["affinity"],
            "tolerations": body("create_pod_request_gpu.json")["spec"]["tolerations"]},
    }
    # No activeDeadlineSeconds: it cannot be moved later, and extend must work.
    assert "activeDeadlineSeconds" not in sent["spec"]
    validate(sent)
    assert instance.id == "gpucloud-gc-3a1a2245a7" and instance.name == "my box"
    assert instance.status == InstanceStatus.PENDING and instance.gpu == "H100"
    assert instance.launch_id == "gc-3a1a2245a7" and instance.shutdown_at == DEADLINE
    assert instance.region == CONTEXT and instance.price_per_hour is None


def test_plain_kubernetes_pins_the_model_by_either_gpu_label(cluster, kube_path):
    provider = make_provider(kube_path, KubernetesProvider)
    run(provider, provider.create(spec(offer=offer("NVIDIA-H100-80GB-HBM3"))))
    sent = json.loads(cluster.requests[-1].content)
    terms = sent["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [t["matchExpressions"][0]["key"] for t in terms] == [
        "nvidia.com/gpu.product", "gpu.nvidia.com/class"]
    assert all(t["matchExpressions"][0]["values"] == ["NVIDIA-H100-80GB-HBM3"] for t in terms)
    validate(sent)


def test_list_get_delete_and_job_pods_are_not_machines(cluster, kube_path):
    provider = make_provider(kube_path)
    made = run(provider, provider.create(spec()))
    job_pod = running(json.loads(cluster.requests[-1].content))
    job_pod["metadata"].update(name="gpucloud-train-ab12-xyz")
    job_pod["metadata"]["labels"].update({"gpucloud.dev/launch-id": "gj-ab12", "job-name": "x"})
    cluster.pods["gpucloud-train-ab12-xyz"] = job_pod
    cluster.pods[made.id] = running(cluster.pods[made.id])
    listed = run(provider, provider.list_instances())
    assert [i.id for i in listed] == [made.id]
    assert listed[0].status == InstanceStatus.RUNNING and listed[0].ip == "10.0.0.7"
    list_request = [r for r in cluster.requests if r.method == "GET"][-1]
    assert list_request.url.params["labelSelector"] == "app.kubernetes.io/managed-by=gpucloud"
    assert run(provider, provider.get(made.id)).status == InstanceStatus.RUNNING
    assert run(provider, provider.delete(made.id)) is None
    assert cluster.requests[-1].method == "DELETE" and made.id not in cluster.pods


@pytest.mark.parametrize("phase, deleting, expected", [
    ("Pending", False, InstanceStatus.PENDING), ("Running", False, InstanceStatus.RUNNING),
    ("Succeeded", False, InstanceStatus.TERMINATED), ("Failed", False, InstanceStatus.FAILED),
    ("Running", True, InstanceStatus.TERMINATING), ("Weird", False, InstanceStatus.UNKNOWN)])
def test_pod_phases(cluster, kube_path, phase, deleting, expected):
    provider = make_provider(kube_path)
    made = run(provider, provider.create(spec()))
    cluster.pods[made.id]["status"] = {"phase": phase}
    if deleting:
        cluster.pods[made.id]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert run(provider, provider.get(made.id)).status == expected


def test_unschedulable_pod_reports_the_schedulers_message(cluster, kube_path):
    provider = make_provider(kube_path)
    made = run(provider, provider.create(spec()))
    cluster.pods[made.id]["status"] = body("pod_status_pending_unschedulable.json")
    got = run(provider, provider.get(made.id))
    assert got.status == InstanceStatus.PENDING
    assert got.provider_status.startswith("Unschedulable: 0/12 nodes are available: "
                                          "12 Insufficient nvidia.com/gpu.")
    assert provider.wait_refusal(got, 10) is None  # not yet: autoscalers take a while
    refusal = provider.wait_refusal(got, 180)
    assert isinstance(refusal, InsufficientCapacityError)
    assert "0/12 nodes are available: 12 Insufficient nvidia.com/gpu." in str(refusal)


def test_set_deadline_patches_the_annotation(cluster, kube_path):
    provider = make_provider(kube_path)
    made = run(provider, provider.create(spec()))
    later = datetime(2026, 1, 3, 0, 0, tzinfo=timezone.utc)
    got = run(provider, provider.set_deadline(made, later))
    patch = cluster.requests[-1]
    assert patch.method == "PATCH" and patch.url.path.endswith(f"/pods/{made.id}")
    assert patch.headers["Content-Type"] == "application/merge-patch+json"
    assert json.loads(patch.content) == {
        "metadata": {"annotations": {"gpucloud.dev/shutdown-at": "2026-01-03T00:00:00Z"}}}
    assert got.shutdown_at == later


def test_a_jobs_deadline_cannot_be_extended(cluster, kube_path):
    provider = make_provider(kube_path)
    made = run(provider, provider.create(spec())).model_copy(update={"launch_id": "gj-ab12"})
    with pytest.raises(SpecError, match="activeDeadlineSeconds"):
        run(provider, provider.set_deadline(made, DEADLINE))


# -- offers ------------------------------------------------------------------------------


def test_offers_are_allocatable_minus_requested_per_model(cluster, kube_path):
    cluster.nodes = [node("gpu-node-1", 8, "H100_NVLINK_80GB"),
                     node("gpu-node-2", 8, "H100_NVLINK_80GB"),
                     node("a100-1", 8, "A100_PCIE_40GB", ready=False),
                     node("cpu-1", 0, "none")]
    provider = make_provider(kube_path)
    for i, gpus in enumerate((4, 4, 2)):  # node 1 full, node 2 has 6 free
        pod = running(body("create_pod_request_gpu.json"), "gpu-node-1" if i < 2 else "gpu-node-2")
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
        cluster.pods[f"p{i}"] = pod
    offers = run(provider, provider.offers(OfferQuery(gpu="H100")))
    assert {(o.gpu_count, o.available) for o in offers} == {
        (1, True), (2, True), (4, True), (8, False)}
    assert {o.instance_type for o in offers} == {"H100_NVLINK_80GB"}
    assert all(o.price_per_hour == 0 and o.region == CONTEXT and o.source == "live"
               for o in offers)  # unknown price: estimates say so, caps refuse
    pods_request = [r for r in cluster.requests if r.url.path == "/api/v1/pods"][0]
    assert pods_request.url.params["fieldSelector"] == \
        "status.phase!=Succeeded,status.phase!=Failed"
    assert run(provider, provider.offers(OfferQuery(gpu="A100-40GB"))) == []


def test_offers_priced_from_config_and_unknown_free_when_pods_are_forbidden(
        cluster, kube_path, tmp_path, monkeypatch):
    home = tmp_path / "gpucloud-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[coreweave.prices]\nH100_NVLINK_80GB = "2.50"\n')
    cluster.nodes = [node("gpu-node-1", 8, "H100_NVLINK_80GB")]
    cluster.pods_forbidden = True
    provider = make_provider(kube_path)
    offers = run(provider, provider.offers(OfferQuery(gpu="H100", count=2)))
    assert [(o.gpu_count, o.price_per_hour, o.available) for o in offers] == [
        (2, Decimal("5.00"), None)]


def test_nfd_product_labels_are_read_as_gpu_names(cluster, kube_path):
    cluster.nodes = [node("n1", 4, "NVIDIA-H100-80GB-HBM3", label="nvidia.com/gpu.product")]
    provider = make_provider(kube_path, KubernetesProvider)
    offers = run(provider, provider.offers(OfferQuery(count=4)))
    assert [(o.gpu, o.instance_type, o.gpu_memory_gb) for o in offers] == [
        ("H100", "NVIDIA-H100-80GB-HBM3", 80)]


def test_a_configured_gpu_label_replaces_the_defaults(cluster, kube_path, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_KUBERNETES_GPU_LABEL", "example.com/gpu")
    cluster.nodes = [node("n1", 2, "L40S", label="example.com/gpu"),
                     node("n2", 2, "H100_NVLINK_80GB")]
    provider = make_provider(kube_path, KubernetesProvider)
    assert {o.gpu for o in run(provider, provider.offers(OfferQuery()))} == {"L40S"}
