"""Kubernetes adapter: every list is read in chunks (`limit` + `continue`, 500
items a page as client-go's pager), an expired continue token (410 Expired)
restarts the list, and the answer is the one an unpaginated list gives.

respx serves pages generated on demand (a cluster of 1,001 nodes and 1,300
pods never exists as a whole); the expiry is the 410 body a real API server
sent (tests/fixtures/kubernetes/status_410_expired_continue.json). The last
tests run the adapter against the emulator (tests/k8s_emulator), which pages
like the API server and expires tokens on demand."""

from __future__ import annotations

import gc
import weakref
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from gpucloud.transport.http import RetryPolicy, Session
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.kubernetes import KubernetesProvider
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from gpucloud.errors import APIResponseValidationError, APIStatusError
from gpucloud.models import InstanceSpec, JobRun, Offer
from tests.adapters._kubernetes_support import (  # noqa: F401 (fixtures)
    body,
    kube_path_fixture,
    make_provider,
    node,
    run,
    running,
)
from tests.k8s_emulator import Knobs, KubeEmulator, gpu_node, write_kubeconfig

LIVE = "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"
EXPIRED = body("status_410_expired_continue.json")
POD = body("create_pod_request_gpu.json")
DEADLINE = datetime(2026, 1, 2, 0, 0, tzinfo=timezone.utc)


class PagedCluster:
    """Nodes and pods made when a page asks for them: node i has 8 GPUs (H100
    for even i, A100 for odd); pod j runs on node j // 100 % nodes and holds 1 GPU
    when j is a multiple of 100 (the others are CPU pods). Records every query
    string and page size; `expire` lists which continued requests (1 = the first
    request carrying a token) are answered 410 Expired."""

    def __init__(self, router: respx.MockRouter, nodes: int, pods: int) -> None:
        self.counts = {"/api/v1/nodes": nodes, "/api/v1/pods": pods}
        self.queries: list[str] = []
        self.sizes: list[int] = []
        self.expire: set[int] = set()
        self.repeat_token = False
        self.continued = 0
        self.on_request: Any = None
        self.served: weakref.WeakSet[httpx.Response] = weakref.WeakSet()
        self.router = router
        self.route = router.route(host="k8s.test").mock(side_effect=self)

    def item(self, path: str, index: int) -> dict[str, Any]:
        if path == "/api/v1/nodes":
            return node(f"node-{index:05d}", 8,
                        "H100_NVLINK_80GB" if index % 2 == 0 else "A100_NVLINK_80GB")
        pod = running(POD, f"node-{index // 100 % self.counts['/api/v1/nodes']:05d}")
        pod["metadata"]["name"] = f"pod-{index:05d}"
        if index % 100:
            pod["spec"]["containers"][0]["resources"] = {}
        return pod

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.on_request is not None:
            self.on_request()
        path, params = request.url.path, request.url.params
        query = request.url.query.decode()
        self.queries.append(f"{path}?{query}" if query else path)
        token = params.get("continue")
        if token:
            self.continued += 1
            if self.continued in self.expire:
                return httpx.Response(410, json=EXPIRED)
        start = int(token.rpartition("-")[2]) if token else 0
        total = self.counts[path]
        end = min(total, start + int(params["limit"])) if "limit" in params else total
        items = [self.item(path, i) for i in range(start, end)]
        self.sizes.append(len(items))
        meta: dict[str, Any] = {"resourceVersion": "7"}
        if end < total:
            meta["continue"] = (token if self.repeat_token and token
                                else f"{path.rsplit('/', 1)[1]}-{end}")
        response = httpx.Response(200, json={"kind": "List", "apiVersion": "v1",
                                             "metadata": meta, "items": items})
        self.served.add(response)
        return response

    def client_responses(self) -> int:
        """Responses alive on the client's side (not ours, not respx's records)."""
        self.router.calls.clear()
        self.route.calls.clear()
        return sum(1 for o in gc.get_objects()
                   if isinstance(o, httpx.Response) and o not in self.served
                   and getattr(o, "_request", None) is not None
                   and o._request.url.host == "k8s.test")


@pytest.fixture(name="paged")
def paged_fixture():
    with respx.mock(assert_all_called=False) as router:
        yield PagedCluster(router, nodes=1001, pods=1300)


def offers_of(provider: KubernetesProvider) -> list[tuple[str, int, bool | None]]:
    return [(o.instance_type, o.gpu_count, o.available)
            for o in run(provider, provider.offers(OfferQuery()))]


def unpaginated(provider: KubernetesProvider, paged: PagedCluster) -> list[Any]:
    """The answer of one request per list, then forget those requests."""
    provider.page_size = None
    try:
        return offers_of(provider)
    finally:
        provider.page_size = 500
        paged.queries.clear()
        paged.sizes.clear()


def test_offers_ask_for_pages_of_500_and_follow_continue(paged, kube_path):
    provider = make_provider(kube_path)
    whole = unpaginated(provider, paged)
    assert offers_of(provider) == whole
    assert paged.queries == [
        "/api/v1/nodes?limit=500",
        "/api/v1/nodes?limit=500&continue=nodes-500",
        "/api/v1/nodes?limit=500&continue=nodes-1000",
        f"/api/v1/pods?{LIVE}&limit=500",
        f"/api/v1/pods?{LIVE}&limit=500&continue=pods-500",
        f"/api/v1/pods?{LIVE}&limit=500&continue=pods-1000",
    ]
    assert paged.sizes == [500, 500, 1, 500, 500, 300]
    assert ("H100_NVLINK_80GB", 8, True) in whole and ("A100_NVLINK_80GB", 8, True) in whole


def test_a_read_page_is_freed_at_once_not_left_to_the_garbage_collector(paged, kube_path):
    """httpx ties each response to its stream in a reference cycle; left so,
    every page read would stay in memory until a collection of the oldest
    generation, and 90 pages of a large cluster pile up first."""
    provider = make_provider(kube_path)
    alive: list[int] = []
    paged.on_request = lambda: alive.append(paged.client_responses())
    gc.collect()
    gc.disable()
    try:
        offers_of(provider)
    finally:
        gc.enable()
    # When a page is asked for, at most the one before it is still referenced
    # (the retry policy keeps the last response for its error messages).
    assert len(alive) == 6 and max(alive) <= 1
    assert paged.client_responses() == 0


def test_an_expired_token_restarts_the_list_and_forgets_the_pages_before(paged, kube_path):
    provider = make_provider(kube_path)
    # Two nodes of 8 GPUs; the 13 GPU pods leave 1 free on the H100 node and 2
    # on the A100 one. Were the pods' first page (3 + 2 of them) counted again
    # after the restart, both would look full.
    paged.counts["/api/v1/nodes"] = 2
    whole = unpaginated(provider, paged)
    assert ("H100_NVLINK_80GB", 1, True) in whole and ("A100_NVLINK_80GB", 2, True) in whole
    assert ("H100_NVLINK_80GB", 2, False) in whole
    paged.expire = {1}
    assert offers_of(provider) == whole
    assert paged.queries == [
        "/api/v1/nodes?limit=500",
        f"/api/v1/pods?{LIVE}&limit=500",
        f"/api/v1/pods?{LIVE}&limit=500&continue=pods-500",  # 410 Expired
        f"/api/v1/pods?{LIVE}&limit=500",
        f"/api/v1/pods?{LIVE}&limit=500&continue=pods-500",
        f"/api/v1/pods?{LIVE}&limit=500&continue=pods-1000",
    ]


def test_a_second_expiry_is_one_unpaginated_list_as_client_gos_pager_falls_back(
        paged, kube_path):
    provider = make_provider(kube_path)
    whole = unpaginated(provider, paged)
    paged.expire = {1, 2}
    assert offers_of(provider) == whole
    assert paged.queries == [
        "/api/v1/nodes?limit=500",
        "/api/v1/nodes?limit=500&continue=nodes-500",  # 410
        "/api/v1/nodes?limit=500",
        "/api/v1/nodes?limit=500&continue=nodes-500",  # 410 again
        "/api/v1/nodes",
        f"/api/v1/pods?{LIVE}&limit=500",
        f"/api/v1/pods?{LIVE}&limit=500&continue=pods-500",
        f"/api/v1/pods?{LIVE}&limit=500&continue=pods-1000",
    ]


def test_a_410_without_a_continue_token_is_an_error(kube_path):
    with respx.mock() as router:
        router.get("https://k8s.test:6443/api/v1/nodes").respond(410, json=EXPIRED)
        provider = make_provider(kube_path)
        with pytest.raises(APIStatusError) as caught:
            run(provider, provider.offers(OfferQuery()))
    assert caught.value.status_code == 410 and caught.value.provider_code == "Expired"


def test_a_continue_token_sent_back_unchanged_is_an_unexpected_reply(paged, kube_path):
    paged.repeat_token = True
    provider = make_provider(kube_path)
    with pytest.raises(APIResponseValidationError):
        run(provider, provider.offers(OfferQuery()))
    assert len(paged.queries) == 2  # the second page gave the same token back: stop


# -- against the emulator ---------------------------------------------------------------


@pytest.fixture(name="emulator")
def emulator_fixture():
    nodes = [gpu_node(f"gpu-{i}", gpus=4) for i in range(5)]
    with KubeEmulator(nodes, knobs=Knobs(pod_start_seconds=0)) as emu:
        yield emu


def emulator_provider(emu: KubeEmulator, tmp_path: Path, page_size: int | None
                      ) -> KubernetesProvider:
    path = write_kubeconfig(tmp_path / "kubeconfig", emu)
    provider = KubernetesProvider(load_catalogs()["kubernetes"],
                                  Credential("kubernetes", SecretStr(""), "test",
                                             client_id=str(path)))
    provider.page_size = page_size
    return provider


def emulator_run(provider: KubernetesProvider, flow: Any) -> Any:
    session = Session(provider, sleep=lambda s: None, policy=RetryPolicy(max_retries=1))
    try:
        return session.run(flow)
    finally:
        session.close()


def lists(emu: KubeEmulator) -> list[tuple[str, str, str]]:
    return [(r["path"], r["query"].get("limit", ""), r["query"].get("continue", "")[:3])
            for r in emu.requests if r["method"] == "GET"]


def fill(emu: KubeEmulator) -> None:
    for i in range(7):  # 1 or 2 GPUs each, some of them gpucloud's machines
        labels = {"app.kubernetes.io/managed-by": "gpucloud",
                  "gpucloud.dev/launch-id": f"gc-{i:010d}"} if i % 2 else {"app": "other"}
        emu.cluster.create_pod("default", {"metadata": {"name": f"pod-{i}", "labels": labels},
                                           "spec": {"containers": [{
                                               "name": "main", "image": "busybox",
                                               "resources": {"limits": {
                                                   "nvidia.com/gpu": str(1 + i % 2)}}}]}})


def test_offers_and_machines_against_the_emulator_equal_the_unpaginated_answer(
        emulator, tmp_path):
    fill(emulator)
    whole = emulator_provider(emulator, tmp_path, None)
    paged = emulator_provider(emulator, tmp_path, 2)
    offers = emulator_run(whole, whole.offers(OfferQuery()))
    machines = emulator_run(whole, whole.list_instances())
    emulator.requests.clear()
    emulator.knobs.expire_continue = 1  # the nodes' second page: a restart
    assert emulator_run(paged, paged.offers(OfferQuery())) == offers
    assert lists(emulator) == [
        ("/api/v1/nodes", "2", ""), ("/api/v1/nodes", "2", "eyJ"),  # 410
        ("/api/v1/nodes", "2", ""), ("/api/v1/nodes", "2", "eyJ"), ("/api/v1/nodes", "2", "eyJ"),
        ("/api/v1/pods", "2", ""), ("/api/v1/pods", "2", "eyJ"), ("/api/v1/pods", "2", "eyJ"),
        ("/api/v1/pods", "2", "eyJ")]
    assert [r["status"] for r in emulator.requests].count(410) == 1
    emulator.requests.clear()
    assert {m.id for m in emulator_run(paged, paged.list_instances())} == \
        {m.id for m in machines} == {"pod-1", "pod-3", "pod-5"}
    assert [q[1:] for q in lists(emulator)] == [("2", ""), ("2", "eyJ")]


def test_jobs_and_their_pods_are_listed_in_pages(emulator, tmp_path):
    provider = emulator_provider(emulator, tmp_path, 1)
    offer = Offer(provider="kubernetes", instance_type="H100_NVLINK_80GB", region="x",
                  gpu="H100", gpu_count=1, price_per_hour=Decimal(0), source="live")
    for i in range(3):
        run_ = JobRun(name=f"job{i}", image="busybox", command=("true",),
                      max_runtime_seconds=600, gpu_count=1)
        spec = InstanceSpec(offer=offer, launch_id=f"gj-{i:010d}", name=f"job{i}",
                            shutdown_at=DEADLINE, job=run_)
        emulator_run(provider, provider.submit_job(spec))
    emulator.requests.clear()
    jobs = emulator_run(provider, provider.list_jobs())
    assert len(jobs) == 3
    pages = [(r["path"].rsplit("/", 1)[1], r["query"].get("limit")) for r in emulator.requests]
    assert pages.count(("jobs", "1")) == 3 and all(limit == "1" for _, limit in pages)
    emulator.requests.clear()
    emulator_run(provider, provider.get_job(jobs[0].id))
    job_pods = [r["query"] for r in emulator.requests if r["path"].endswith("/pods")]
    assert job_pods and all(q.get("limit") == "1" for q in job_pods)


def test_every_page_of_the_real_size_bench_stays_within_the_limit(paged, kube_path):
    """What bench/k8s_offers_scale.py measures, at a size a test can afford:
    no single response over `limit` items, and ceil(n / limit) pages a list."""
    paged.counts = {"/api/v1/nodes": 2_000, "/api/v1/pods": 4_001}
    provider = make_provider(kube_path)
    offers_of(provider)
    assert max(paged.sizes) == 500
    assert len(paged.queries) == 4 + 9 and sum(paged.sizes) == 6_001
    assert paged.sizes == [500] * 4 + [500] * 8 + [1]
