"""Kubernetes' part of the adapter tests (test_kubernetes_*.py), beside
tests/adapters/support.py.

respx answers at the HTTP transport with a small in-memory cluster
(``FakeCluster``) that serves exactly the paths the adapter uses, with the
example bodies in tests/fixtures/kubernetes (Status errors, the Unschedulable
pod status, TokenRequest). Flows run through the real driver (Session).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
import yaml
from pydantic import SecretStr

from gpucloud.transport.http import RetryPolicy, Session
from gpucloud.providers.kubernetes import CoreWeaveProvider, KubernetesProvider
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from tests.adapters import support

_FILES = support.Fixtures("kubernetes")
FIXTURES = _FILES.path
SERVER = "https://k8s.test:6443"
TOKEN = "kube-secret-token-value"
NS = "tenant-my-ns"
CONTEXT = "gpucloud@cks-cluster"
MINUTE_ZERO = "2026-01-01T00:00:00Z"


body = _FILES.file  # its callers name the file with its suffix (".json")


def kubeconfig(tmp: Path, user: dict[str, Any] | None = None, **cluster: Any) -> Path:
    """The example kubeconfig with our server and token (or `user`)."""
    raw = yaml.safe_load((FIXTURES / "kubeconfig_example.yaml").read_text())
    raw["clusters"][0]["cluster"] = {"server": SERVER, **cluster}
    raw["users"][0]["user"] = user if user is not None else {"token": TOKEN}
    path = tmp / "kubeconfig"
    path.write_text(yaml.safe_dump(raw))
    return path


def make_provider(path: Path, cls: type[KubernetesProvider] = CoreWeaveProvider
                  ) -> KubernetesProvider:
    return cls(load_catalogs()[cls.name], Credential(cls.name, SecretStr(""), "test",
                                                     client_id=str(path)))


def node(name: str, gpus: int, gpu_class: str, label: str = "gpu.nvidia.com/class",
         ready: bool = True) -> dict[str, Any]:
    return {"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": name, "labels": {label: gpu_class}},
            "spec": {}, "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": str(gpus)},
                                   "conditions": [{"type": "Ready",
                                                   "status": "True" if ready else "False"}]}}


def running(pod: dict[str, Any], node_name: str = "gpu-node-1") -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["spec"]["nodeName"] = node_name
    pod["status"] = {"phase": "Running", "podIP": "10.0.0.7",
                     "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return pod


def status_body(code: int) -> dict[str, Any]:
    name = {401: "status_401_unauthorized", 403: "status_403_forbidden",
            404: "status_404_not_found", 409: "status_409_already_exists",
            422: "status_422_invalid"}[code]
    return body(f"{name}.json")


class FakeCluster:
    """The API server's side of the paths the adapter uses; records requests."""

    def __init__(self, router: respx.MockRouter) -> None:
        self.requests: list[httpx.Request] = []
        self.nodes: list[dict[str, Any]] = []
        self.pods: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.services: dict[str, dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        self.logs: dict[str, str] = {}
        self.fail: dict[tuple[str, str], tuple[int, Any]] = {}  # (method, path regex)
        self.pods_forbidden = False
        self.bearer: str | None = f"Bearer {TOKEN}"
        router.route(host="k8s.test").mock(side_effect=self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path, method = request.url.path, request.method
        if self.bearer is not None and request.headers.get("Authorization") != self.bearer:
            return httpx.Response(401, json=status_body(401))
        for (m, pattern), (code, payload) in self.fail.items():
            if m == method and re.fullmatch(pattern, path):
                return httpx.Response(code, json=payload)
        return self._answer(method, path, request)

    def _answer(self, method: str, path: str, request: httpx.Request) -> httpx.Response:
        ns = f"/namespaces/{NS}"
        pod = re.fullmatch(rf"/api/v1{ns}/pods/([^/]+)(/log)?", path)
        job = re.fullmatch(rf"/apis/batch/v1{ns}/jobs/([^/]+)", path)
        if path == "/api/v1/nodes":
            return _list("NodeList", self.nodes)
        if path == "/api/v1/pods":
            if self.pods_forbidden:
                return httpx.Response(403, json=status_body(403))
            return _list("PodList", [p for p in self.pods.values()
                                     if p.get("status", {}).get("phase") not in
                                     ("Succeeded", "Failed")])
        if path == f"/api/v1{ns}/pods" and method == "GET":
            return _list("PodList", [p for p in self.pods.values()
                                     if _selected(p, request.url.params.get("labelSelector"))])
        if path == f"/api/v1{ns}/pods" and method == "POST":
            created = json.loads(request.content)
            created.setdefault("metadata", {})["creationTimestamp"] = MINUTE_ZERO
            created["status"] = {"phase": "Pending"}
            self.pods[created["metadata"]["name"]] = created
            return httpx.Response(201, json=created)
        if pod and pod.group(2):
            return httpx.Response(200, text=self.logs.get(pod.group(1), ""))
        if pod:
            return self._object(self.pods, pod.group(1), method, request)
        if path == f"/apis/batch/v1{ns}/jobs" and method == "POST":
            created = json.loads(request.content)
            created["metadata"]["creationTimestamp"] = MINUTE_ZERO
            created["metadata"]["uid"] = f"uid-{created['metadata']['name']}"
            created["status"] = {}
            self.jobs[created["metadata"]["name"]] = created
            return httpx.Response(201, json=created)
        for kind, store, plural in (("Service", self.services, "services"),
                                    ("PersistentVolumeClaim", self.claims,
                                     "persistentvolumeclaims")):
            if path == f"/api/v1{ns}/{plural}" and method == "POST":
                created = json.loads(request.content)
                created["metadata"]["creationTimestamp"] = MINUTE_ZERO
                store[created["metadata"]["name"]] = created
                return httpx.Response(201, json=created)
            if path == f"/api/v1{ns}/{plural}":
                return _list(f"{kind}List", list(store.values()))
            one = re.fullmatch(rf"/api/v1{ns}/{plural}/([^/]+)", path)
            if one:
                return self._object(store, one.group(1), method, request)
        if path == f"/apis/batch/v1{ns}/jobs":
            return _list("JobList", list(self.jobs.values()))
        if job:
            return self._object(self.jobs, job.group(1), method, request)
        raise AssertionError(f"unexpected request {method} {request.url}")

    def _object(self, store: dict[str, Any], name: str, method: str,
                request: httpx.Request) -> httpx.Response:
        if name not in store:
            return httpx.Response(404, json=status_body(404))
        if method == "DELETE":
            gone = store.pop(name)
            return httpx.Response(200, json=gone if gone.get("kind") == "Pod"
                                  else body("status_200_delete_success.json"))
        if method == "PATCH":
            patch = json.loads(request.content)
            store[name]["metadata"].setdefault("annotations", {}).update(
                patch["metadata"]["annotations"])
        return httpx.Response(200, json=store[name])


def _list(kind: str, objects: list[dict[str, Any]]) -> httpx.Response:
    return httpx.Response(200, json={"kind": kind, "apiVersion": "v1",
                                     "metadata": {"resourceVersion": "1"}, "items": objects})


def _selected(obj: dict[str, Any], selector: str | None) -> bool:
    if not selector:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, _, v in (t.partition("=") for t in selector.split(",")))


@pytest.fixture(name="cluster")
def cluster_fixture() -> Any:
    with respx.mock(assert_all_called=False) as router:
        yield FakeCluster(router)


@pytest.fixture(name="kube_path")
def kube_path_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    return kubeconfig(tmp_path)


def run(provider: KubernetesProvider, flow: Any) -> Any:
    session = Session(provider, sleep=lambda s: None, policy=RetryPolicy(max_retries=1))
    try:
        return session.run(flow)
    finally:
        session.close()
