"""Kubernetes offers on a large cluster: peak memory and time of the paged lists
(limit 500) against one unpaginated list of each, side by side in one run.

A cluster of 5,000 GPU nodes and 40,000 running pods is served by respx at
httpx's transport (no socket): every page, and the whole lists, are serialized
before measuring starts, and each answer hands the client a fresh copy of its
bytes, as a transport does. `KubernetesProvider.offers` then runs through the
engine's Session (retry policy, driver) twice per round, alternating:

* paged: `page_size` 500 (the default, client-go's): 10 node pages, 80 pod pages;
* unpaginated: `page_size` None: one request per list, the whole response held
  at once, which is what offers did before paging (it held both parsed lists).

Peak Python memory is tracemalloc's peak during one offers call (the client's
allocations only: the pages served were allocated before tracing began); time
is measured in separate runs without tracemalloc, which slows allocation.
Printed: medians and the unpaginated / paged ratios, and the size of the whole
responses. Nothing here asserts an absolute figure.

    python bench/k8s_offers_scale.py [--nodes 5000] [--pods 40000] [--rounds 3]

The node and pod objects are CONSTRUCTED in the shapes the API returns (a GPU
node's labels, capacity, allocatable and conditions; a running GPU pod with its
spec, status and container status), without managedFields or a node's image
list, which real objects carry: real responses are larger, so the unpaginated
figure here is a lower bound.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

SERVER = "http://k8s.bench"
MODELS = ("H100_NVLINK_80GB", "A100_NVLINK_80GB", "L40S")


def gpu_node(i: int) -> dict[str, Any]:
    name = f"gpu-node-{i:05d}"
    model = MODELS[i % len(MODELS)]
    resources = {"cpu": "128", "memory": "2113602576Ki", "ephemeral-storage": "7499362608Ki",
                 "hugepages-1Gi": "0", "hugepages-2Mi": "0", "nvidia.com/gpu": "8",
                 "pods": "110"}
    return {"metadata": {
        "name": name, "uid": f"6f1c2d3e-0000-4000-8000-{i:012d}", "resourceVersion": str(i + 1),
        "creationTimestamp": "2026-11-01T00:00:00Z",
        "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "kubernetes.io/arch": "amd64", "topology.kubernetes.io/region": "US-EAST-04A",
                   "gpu.nvidia.com/class": model, "nvidia.com/gpu.count": "8",
                   "nvidia.com/gpu.product": f"NVIDIA-{model}", "node.kubernetes.io/instance-type":
                   f"gd-8x{model.lower()}"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                        "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
        "spec": {"podCIDR": f"10.{i // 250}.{i % 250}.0/24",
                 "taints": [{"key": "nvidia.com/gpu", "value": "present",
                             "effect": "NoSchedule"}]},
        "status": {"capacity": dict(resources), "allocatable": dict(resources),
                   "conditions": [{"type": kind, "status": "False", "reason": reason,
                                   "lastHeartbeatTime": "2026-12-01T00:00:00Z",
                                   "lastTransitionTime": "2026-11-01T00:00:00Z"}
                                  for kind, reason in (
                                      ("MemoryPressure", "KubeletHasSufficientMemory"),
                                      ("DiskPressure", "KubeletHasNoDiskPressure"),
                                      ("PIDPressure", "KubeletHasSufficientPID"))]
                   + [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "lastHeartbeatTime": "2026-12-01T00:00:00Z",
                       "lastTransitionTime": "2026-11-01T00:00:00Z"}],
                   "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"},
                                 {"type": "Hostname", "address": name}],
                   "nodeInfo": {"kubeletVersion": "v1.31.0", "containerRuntimeVersion":
                                "containerd://1.7.20", "osImage": "Ubuntu 22.04.4 LTS",
                                "kernelVersion": "5.15.0-119-generic", "architecture": "amd64",
                                "operatingSystem": "linux"}}}


def gpu_pod(j: int, nodes: int) -> dict[str, Any]:
    name, node = f"train-{j:06d}", f"gpu-node-{j % nodes:05d}"
    return {"metadata": {
        "name": name, "namespace": f"team-{j % 40}", "uid": f"0a1b2c3d-0000-4000-8000-{j:012d}",
        "resourceVersion": str(100000 + j), "creationTimestamp": "2026-12-01T00:00:00Z",
        "labels": {"app.kubernetes.io/name": "trainer", "batch.kubernetes.io/job-name": name}},
        "spec": {"restartPolicy": "Never", "nodeName": node, "schedulerName": "default-scheduler",
                 "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                 "command": ["python", "train.py"],
                                 "resources": {"limits": {"nvidia.com/gpu": "1"},
                                               "requests": {"cpu": "8", "memory": "64Gi",
                                                            "nvidia.com/gpu": "1"}}}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                  "effect": "NoSchedule"}]},
        "status": {"phase": "Running", "hostIP": "10.0.0.10", "podIP": f"10.244.{j % 250}.7",
                   "startTime": "2026-12-01T00:00:01Z", "qosClass": "Burstable",
                   "conditions": [{"type": kind, "status": "True",
                                   "lastTransitionTime": "2026-12-01T00:00:05Z"}
                                  for kind in ("Initialized", "Ready", "ContainersReady",
                                               "PodScheduled")],
                   "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0,
                                          "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                          "started": True, "state": {"running": {
                                              "startedAt": "2026-12-01T00:00:05Z"}}}]}}


def serialize(kind: str, items: list[dict[str, Any]], token: str) -> bytes:
    meta = {"resourceVersion": "123456", **({"continue": token} if token else {})}
    return json.dumps({"kind": kind, "apiVersion": "v1", "metadata": meta, "items": items},
                      separators=(",", ":")).encode()


class Served:
    """Every page of 500 and the whole lists, as bytes, made before measuring."""

    def __init__(self, nodes: int, pods: int, limit: int) -> None:
        self.limit = limit
        self.pages: dict[tuple[str, str], bytes] = {}
        self.whole: dict[str, bytes] = {}
        for path, kind, total, make in (
                ("/api/v1/nodes", "NodeList", nodes, gpu_node),
                ("/api/v1/pods", "PodList", pods, lambda j: gpu_pod(j, nodes))):
            items = [make(i) for i in range(total)]
            self.whole[path] = serialize(kind, items, "")
            for start in range(0, total, limit):
                end = min(total, start + limit)
                token = f"{path.rsplit('/', 1)[1]}-{end}" if end < total else ""
                self.pages[(path, f"{path.rsplit('/', 1)[1]}-{start}" if start else "")] = \
                    serialize(kind, items[start:end], token)
        self.requests = 0
        self.histories: list[list[Any]] = []  # respx's call records, emptied as we go

    def __call__(self, request: Any) -> Any:
        import httpx

        # respx keeps every request and response it saw: that would be the
        # bench holding all pages, not the client.
        for calls in self.histories:
            calls.clear()
        self.requests += 1
        path, params = request.url.path, request.url.params
        if "limit" not in params:
            body = self.whole[path]
        else:
            assert params["limit"] == str(self.limit), params
            body = self.pages[(path, params.get("continue", ""))]
        # A transport allocates the bytes it receives: hand out a copy.
        return httpx.Response(200, content=body + b"\n",
                              headers={"Content-Type": "application/json"})


def provider_for(home: Path):  # unannotated: gpucloud is imported late, after compileall
    from pydantic import SecretStr

    from gpucloud.providers.kubernetes import KubernetesProvider
    from gpucloud.catalog.bundled import load_catalogs
    from gpucloud.config.credentials import Credential

    kubeconfig = home / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: bench\n  cluster:\n    server: {SERVER}\n"
        "users:\n- name: bench\n  user:\n    token: bench-token\n"
        "contexts:\n- name: bench\n  context:\n    cluster: bench\n    user: bench\n"
        "current-context: bench\n")
    return KubernetesProvider(load_catalogs()["kubernetes"],
                              Credential("kubernetes", SecretStr(""), "bench",
                                         client_id=str(kubeconfig)))


def offers(provider, page_size: int | None, traced: bool) -> tuple[float, int, int]:
    """(seconds, peak bytes or 0, offers) of one offers call through a Session."""
    from gpucloud.transport.http import Session
    from gpucloud.providers.base import OfferQuery

    provider.page_size = page_size
    session = Session(provider, sleep=lambda s: None)
    try:
        if traced:
            tracemalloc.start()
        start = time.perf_counter()
        found = session.run(provider.offers(OfferQuery()))
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] if traced else 0
    finally:
        if traced:
            tracemalloc.stop()
        session.close()
    return elapsed, peak, len(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=40000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.rounds < 1 or args.nodes < 1 or args.pods < 0:
        parser.error("--rounds and --nodes must be at least 1, --pods at least 0")

    import respx

    import gpucloud
    from gpucloud.providers.kubernetes._pages import PAGE_SIZE

    compileall.compile_dir(str(Path(gpucloud.__file__).parent), quiet=1)
    served = Served(args.nodes, args.pods, PAGE_SIZE)
    whole_mb = sum(len(b) for b in served.whole.values()) / 1e6
    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as tmp, \
            respx.mock(assert_all_called=False) as router:
        os.environ["GPUCLOUD_HOME"] = tmp  # no user config.toml
        route = router.route(host="k8s.bench").mock(side_effect=served)
        served.histories = [router.calls, route.calls]
        provider = provider_for(Path(tmp))
        sides = {"paged": PAGE_SIZE, "unpaginated": None}
        answers = {name: offers(provider, size, False)[2] for name, size in sides.items()}
        if answers["paged"] != answers["unpaginated"]:
            print(f"the two answers differ: {answers}")
            return 1
        peaks: dict[str, list[int]] = {name: [] for name in sides}
        times: dict[str, list[float]] = {name: [] for name in sides}
        requests: dict[str, int] = {}
        for _ in range(args.rounds):
            for name, size in sides.items():
                before = served.requests
                peaks[name].append(offers(provider, size, True)[1])
                requests[name] = served.requests - before
                times[name].append(offers(provider, size, False)[0])
    peak = {name: statistics.median(v) / 1e6 for name, v in peaks.items()}
    took = {name: statistics.median(v) for name, v in times.items()}
    print(f"{args.nodes} nodes, {args.pods} pods; whole responses {whole_mb:.1f} MB of JSON "
          f"(nodes {len(served.whole['/api/v1/nodes']) / 1e6:.1f} MB, "
          f"pods {len(served.whole['/api/v1/pods']) / 1e6:.1f} MB); {args.rounds} rounds")
    for name in sides:
        spread = ", ".join(f"{v / 1e6:.1f}" for v in peaks[name])
        print(f"{name:>12}: {requests[name]:3d} requests, peak {peak[name]:7.1f} MB "
              f"({spread}), median {took[name]:.2f} s")
    print(f"peak memory unpaginated / paged = {peak['unpaginated'] / peak['paged']:.1f}x; "
          f"time paged / unpaginated = {took['paged'] / took['unpaginated']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
