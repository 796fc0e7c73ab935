"""The emulator's coordination.k8s.io/v1 Leases, proven with plain httpx: the
optimistic concurrency the reapers' election rests on. Its 409 answers are
compared with a real API server's (tests/fixtures/kubernetes/SOURCE.txt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.k8s_emulator import KubeEmulator

LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "kubernetes"
REAL_CONFLICT = json.loads((FIXTURES / "status_409_lease_conflict.json").read_text())
REAL_EXISTS = json.loads((FIXTURES / "status_409_lease_already_exists.json").read_text())


def lease(name: str = "my-lease", rv: str | None = None, **spec) -> dict:
    meta = {"name": name, **({"resourceVersion": rv} if rv else {})}
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": spec}


@pytest.fixture
def http():
    with KubeEmulator() as emu, emu.admin_client() as client:
        yield client


def test_create_get_and_replace_with_the_version_read(http):
    made = http.post(LEASES, json=lease(holderIdentity="a", leaseDurationSeconds=15,
                                        renewTime="2026-12-01T10:00:00.5Z"))
    assert made.status_code == 201
    body = made.json()
    assert body["metadata"]["namespace"] == "default" and body["metadata"]["uid"]
    # stored as metav1.MicroTime marshals: six fraction digits, UTC
    assert body["spec"]["renewTime"] == "2026-12-01T10:00:00.500000Z"
    got = http.get(f"{LEASES}/my-lease").json()
    assert got == body
    rv = got["metadata"]["resourceVersion"]
    put = http.put(f"{LEASES}/my-lease", json=lease(rv=rv, holderIdentity="b",
                                                    leaseDurationSeconds=15))
    assert put.status_code == 200
    assert put.json()["spec"]["holderIdentity"] == "b"
    assert put.json()["metadata"]["resourceVersion"] != rv


def test_a_stale_version_is_a_conflict_as_the_api_server_words_it(http):
    rv = http.post(LEASES, json=lease(holderIdentity="a")).json()["metadata"]["resourceVersion"]
    assert http.put(f"{LEASES}/my-lease", json=lease(rv=rv, holderIdentity="b")).is_success
    stale = http.put(f"{LEASES}/my-lease", json=lease(rv=rv, holderIdentity="c"))
    assert stale.status_code == 409
    assert stale.json() == REAL_CONFLICT
    assert http.get(f"{LEASES}/my-lease").json()["spec"]["holderIdentity"] == "b"


def test_creating_a_name_that_exists_is_already_exists(http):
    assert http.post(LEASES, json=lease(holderIdentity="a")).status_code == 201
    again = http.post(LEASES, json=lease(holderIdentity="b"))
    assert again.status_code == 409
    assert again.json() == REAL_EXISTS


def test_missing_invalid_and_unversioned_leases_are_refused(http):
    missing = http.get(f"{LEASES}/nobody")
    assert missing.status_code == 404 and missing.json()["reason"] == "NotFound"
    assert http.put(f"{LEASES}/nobody", json=lease("nobody", rv="5")).status_code == 404
    zero = http.post(LEASES, json=lease(leaseDurationSeconds=0))
    assert zero.status_code == 422
    assert zero.json()["details"]["causes"][0]["field"] == "spec.leaseDurationSeconds"
    assert http.post(LEASES, json=lease(leaseTransitions=-1)).status_code == 422
    assert http.post(LEASES, json=lease(renewTime="yesterday")).status_code == 422
    assert http.post(LEASES, json=lease()).status_code == 201
    assert http.put(f"{LEASES}/my-lease", json=lease()).status_code == 422  # no version
