"""Kubernetes adapter: volumes are PersistentVolumeClaims in the namespace
(golden create request validated against the Kubernetes 1.30 schemas; list
reads size, status and the pods that mount each claim; delete)."""

from __future__ import annotations

import json
from decimal import Decimal

import kubernetes_validate
import pytest

from gpucloud.errors import ConfigurationError, NotFoundError, SpecError, exit_code_for
from gpucloud.models import VolumeSpec
from tests.adapters._kubernetes_support import (  # noqa: F401 (fixtures)
    CONTEXT,
    NS,
    cluster_fixture,
    kube_path_fixture,
    make_provider,
    run,
)


def _pod(name: str, claim: str, phase: str = "Running") -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "labels": {}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}],
                     "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}},
                                 {"name": "scratch", "emptyDir": {}}]},
            "status": {"phase": phase}}


def test_create_volume_posts_this_claim(cluster, kube_path):
    provider = make_provider(kube_path)
    volume = run(provider, provider.create_volume(VolumeSpec(name="data", size_gb=500,
                                                             region=CONTEXT)))
    [post] = [r for r in cluster.requests if r.method == "POST"]
    assert post.url.path == f"/api/v1/namespaces/{NS}/persistentvolumeclaims"
    sent = json.loads(post.content)
    assert sent == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": NS,
                     "labels": {"app.kubernetes.io/managed-by": "gpucloud"}},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "500Gi"}}},
    }
    kubernetes_validate.validate(sent, "1.30.0", strict=True)
    assert (volume.ref, volume.name, volume.size_gb, volume.region) == \
        ("coreweave/data", "data", 500, CONTEXT)
    assert volume.price_per_gb_month is None  # nobody said: unknown, never 0


def test_storage_class_access_mode_and_price_come_from_the_settings(cluster, kube_path,
                                                                    monkeypatch):
    monkeypatch.setenv("GPUCLOUD_COREWEAVE_STORAGE_CLASS", "shared-vast")
    monkeypatch.setenv("GPUCLOUD_COREWEAVE_VOLUME_ACCESS_MODE", "ReadWriteMany")
    monkeypatch.setenv("GPUCLOUD_COREWEAVE_VOLUME_PRICE", "0.07")
    provider = make_provider(kube_path)
    volume = run(provider, provider.create_volume(VolumeSpec(name="shared", size_gb=10,
                                                             region=CONTEXT)))
    [post] = [r for r in cluster.requests if r.method == "POST"]
    sent = json.loads(post.content)
    kubernetes_validate.validate(sent, "1.30.0", strict=True)
    assert sent["spec"]["storageClassName"] == "shared-vast"
    assert sent["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume.price_per_gb_month == Decimal("0.07")
    assert volume.price_per_month == Decimal("0.70")


@pytest.mark.parametrize("name, value", [("VOLUME_ACCESS_MODE", "ReadWriteSometimes"),
                                          ("VOLUME_PRICE", "cheap")])
def test_a_bad_volume_setting_is_a_configuration_error(kube_path, monkeypatch, name, value):
    monkeypatch.setenv(f"GPUCLOUD_COREWEAVE_{name}", value)
    with pytest.raises(ConfigurationError, match=name.lower()):
        make_provider(kube_path).settings  # the property loads them


@pytest.mark.parametrize("spec, words", [
    (VolumeSpec(name="data", size_gb=1, region="another-context"), "one region"),
    (VolumeSpec(name="My Data", size_gb=1, region=CONTEXT), "Kubernetes object name"),
])
def test_create_volume_refuses_what_the_cluster_cannot_have(cluster, kube_path, spec, words):
    provider = make_provider(kube_path)
    with pytest.raises(SpecError, match=words) as info:
        run(provider, provider.create_volume(spec))
    assert exit_code_for(info.value) == 2 and info.value.hint
    assert not [r for r in cluster.requests if r.method == "POST"]


def test_list_volumes_reads_size_status_and_the_pods_mounting_each(cluster, kube_path):
    cluster.claims = {
        "bound": {"kind": "PersistentVolumeClaim",
                  "metadata": {"name": "bound", "creationTimestamp": "2026-01-01T00:00:00Z"},
                  # The bound volume can be larger than asked: its capacity counts.
                  "spec": {"resources": {"requests": {"storage": "100Gi"}}},
                  "status": {"phase": "Bound", "capacity": {"storage": "1Ti"}}},
        "waiting": {"kind": "PersistentVolumeClaim", "metadata": {"name": "waiting"},
                    "spec": {"resources": {"requests": {"storage": "50G"}}},
                    "status": {"phase": "Pending"}},
    }
    cluster.pods = {"a": _pod("a", "bound"), "b": _pod("b", "bound"),
                    "done": _pod("done", "bound", "Succeeded"), "c": _pod("c", "elsewhere")}
    provider = make_provider(kube_path)
    bound, waiting = run(provider, provider.list_volumes())
    assert (bound.id, bound.size_gb, bound.status, bound.attached_to) == \
        ("bound", 1024, "Bound", ("a", "b"))
    assert bound.region == CONTEXT and bound.created_at is not None
    assert (waiting.id, waiting.size_gb, waiting.status, waiting.attached_to) == \
        ("waiting", 47, "Pending", ())  # 50 GB is 46.6 GiB, rounded up


def test_delete_volume_deletes_the_claim(cluster, kube_path):
    cluster.claims["data"] = {"kind": "PersistentVolumeClaim", "metadata": {"name": "data"}}
    provider = make_provider(kube_path)
    assert run(provider, provider.delete_volume("data")) is None
    assert cluster.requests[-1].method == "DELETE"
    assert cluster.requests[-1].url.path == \
        f"/api/v1/namespaces/{NS}/persistentvolumeclaims/data"
    assert cluster.claims == {}
    with pytest.raises(NotFoundError):
        run(provider, provider.delete_volume("data"))
