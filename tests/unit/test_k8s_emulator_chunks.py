"""The emulator's list chunking (tests/k8s_emulator/chunks.py) proven with plain
httpx: `limit` pages, `continue` tokens, and the 410 Expired a compacted token
gets, compared with a real API server's body (a collected fixture)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest

from tests.k8s_emulator import Knobs, KubeEmulator, gpu_node

EXPIRED_410 = json.loads((Path(__file__).resolve().parent.parent / "fixtures" / "kubernetes"
                          / "status_410_expired_continue.json").read_text())


def token_of(value: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))


@pytest.fixture
def emu():
    nodes = [gpu_node(f"node-{i:02d}") for i in range(7)]
    with KubeEmulator(nodes, knobs=Knobs()) as emulator:
        yield emulator


@pytest.fixture
def api(emu):
    with emu.admin_client() as client:
        yield client


def names(reply: httpx.Response) -> list[str]:
    return [n["metadata"]["name"] for n in reply.json()["items"]]


def test_limit_pages_and_continue_tokens_cover_the_list_once(api):
    whole = api.get("/api/v1/nodes").json()
    assert "continue" not in whole["metadata"] and len(whole["items"]) == 7
    first = api.get("/api/v1/nodes", params={"limit": "3"}).json()["metadata"]
    assert first["remainingItemCount"] == 4
    assert token_of(first["continue"]) == {"v": "meta.k8s.io/v1",
                                           "rv": int(first["resourceVersion"]),
                                           "start": "node-02\x00"}
    seen, token, sizes = [], "", []
    while True:
        reply = api.get("/api/v1/nodes", params={"limit": "3", **({"continue": token}
                                                                    if token else {})})
        seen += names(reply)
        sizes.append(len(reply.json()["items"]))
        token = reply.json()["metadata"].get("continue", "")
        if not token:
            break
    assert sizes == [3, 3, 1]
    assert seen == [n["metadata"]["name"] for n in whole["items"]] == sorted(seen)


def test_a_selected_list_pages_its_matches_and_has_no_remaining_count(api, emu):
    reply = api.get("/api/v1/nodes", params={"limit": "2",
                                             "fieldSelector": "metadata.name!=node-00"})
    assert names(reply) == ["node-01", "node-02"]
    assert "remainingItemCount" not in reply.json()["metadata"]


def test_a_compacted_token_is_410_expired_as_a_real_api_server_says_it(api, emu):
    token = api.get("/api/v1/nodes", params={"limit": "3"}).json()["metadata"]["continue"]
    emu.cluster.compact()
    reply = api.get("/api/v1/nodes", params={"limit": "3", "continue": token})
    assert reply.status_code == 410
    body = reply.json()
    # The collected body: same fields in the same order, same message and reason.
    assert list(body) == list(EXPIRED_410)
    assert {k: v for k, v in body.items() if k != "metadata"} == \
        {k: v for k, v in EXPIRED_410.items() if k != "metadata"}
    assert token_of(body["metadata"]["continue"]) == {"v": "meta.k8s.io/v1", "rv": -1,
                                                      "start": "node-02\x00"}
    assert token_of(EXPIRED_410["metadata"]["continue"])["rv"] == -1
    # That token goes on from the next key, at the latest version (inconsistently).
    rest = api.get("/api/v1/nodes", params={"limit": "10",
                                            "continue": body["metadata"]["continue"]})
    assert names(rest) == [f"node-{i:02d}" for i in range(3, 7)]
    # A new list is not expired.
    again = api.get("/api/v1/nodes", params={"limit": "3"}).json()["metadata"]["continue"]
    assert api.get("/api/v1/nodes", params={"limit": "3", "continue": again}).status_code == 200


def test_the_expire_knob_compacts_before_that_many_continued_lists(api, emu):
    emu.knobs.expire_continue = 1
    token = api.get("/api/v1/nodes", params={"limit": "3"}).json()["metadata"]["continue"]
    assert api.get("/api/v1/nodes", params={"limit": "3", "continue": token}).status_code == 410
    token = api.get("/api/v1/nodes", params={"limit": "3"}).json()["metadata"]["continue"]
    assert api.get("/api/v1/nodes", params={"limit": "3", "continue": token}).status_code == 200


@pytest.mark.parametrize("token, message", [
    ("not-base64!", "invalid continue token: continue key is not valid"),
    (base64.urlsafe_b64encode(b'{"v":"v2","rv":5,"start":"a"}').decode(),
     "server does not recognize this encoded version"),
    (base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":5,"start":""}').decode(),
     "encoded start key empty"),
])
def test_a_bad_token_is_a_400(api, token, message):
    reply = api.get("/api/v1/pods", params={"limit": "1", "continue": token})
    assert reply.status_code == 400 and message in reply.json()["message"]
    assert reply.json()["reason"] == "BadRequest"


def test_pods_and_jobs_page_in_namespace_name_order(api, emu):
    for ns in ("default", "kube-system"):
        for i in range(3):
            emu.cluster.create_pod(ns, {"metadata": {"name": f"p{i}"}, "spec": {
                "containers": [{"name": "main", "image": "busybox"}]}})
    first = api.get("/api/v1/pods", params={"limit": "4"}).json()
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in first["items"]] == [
        ("default", "p0"), ("default", "p1"), ("default", "p2"), ("kube-system", "p0")]
    assert token_of(first["metadata"]["continue"])["start"] == "kube-system/p0\x00"
    rest = api.get("/api/v1/pods", params={"limit": "4",
                                           "continue": first["metadata"]["continue"]}).json()
    assert [p["metadata"]["name"] for p in rest["items"]] == ["p1", "p2"]
    assert api.get("/apis/batch/v1/jobs", params={"limit": "1"}).json()["items"] == []
