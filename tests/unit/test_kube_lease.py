"""The kubernetes elector's rules (client-go's leader election, leaderelection.go)
against the Kubernetes API emulator over loopback HTTP, through the SDK's
``client.provider("kubernetes").read_lease/write_lease``. Each elector has a
fake clock of its own, so expiry is exact; the emulator checks every write's
resourceVersion as the API server does, and every Lease body sent is checked
against the Kubernetes 1.30 schema."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest

from gpucloud import AsyncClient, Client
from gpucloud.safety import reaper_watch
from gpucloud.safety.kube_lease import KubernetesLease
from tests.k8s_emulator import KubeEmulator, write_kubeconfig

NS = "reapers"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def emulator(tmp_path, monkeypatch):
    with KubeEmulator(namespaces=("default", NS)) as emu:
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kc", emu,
                                                              namespace=NS)))
        yield emu


def elector(name: str, clock: Clock, duration: int = 10) -> KubernetesLease:
    return KubernetesLease(Client(["kubernetes"]).provider("kubernetes"), duration,
                           holder_identity=name, clock=clock)


def spec(emulator: KubeEmulator) -> dict:
    return emulator.cluster.leases[(NS, "gpucloud-reaper")]["spec"]


def sent(emulator: KubeEmulator) -> list[dict]:
    bodies = [e["body"] for e in emulator.requests
              if "/leases" in e["path"] and e["method"] in ("POST", "PUT")]
    for body in bodies:
        kubernetes_validate.validate(body, "1.30.0", strict=True)
    return bodies


def test_the_first_creates_the_lease_and_the_others_stand_by(emulator):
    a, b = elector("a", Clock()), elector("b", Clock())
    assert a.lead() is True
    assert b.lead() is False and b.holder == "a"
    lease = spec(emulator)
    assert lease["holderIdentity"] == "a" and lease["leaseDurationSeconds"] == 10
    assert lease["leaseTransitions"] == 0
    assert MICRO.match(lease["acquireTime"]) and MICRO.match(lease["renewTime"])
    [created] = sent(emulator)
    assert created["metadata"] == {"name": "gpucloud-reaper", "namespace": NS}
    assert "a leads" in a.describe() and "b stands by" in b.describe()


def test_the_holder_renews_with_the_version_of_its_own_write(emulator):
    clock = Clock()
    a = elector("a", clock)
    assert a.lead()
    first = spec(emulator)
    clock.now += 3
    before = len(emulator.requests)
    assert a.lead()
    # One PUT, no read: the optimistic renewal of leaderelection.go's fast path.
    assert [e["method"] for e in emulator.requests[before:]] == ["PUT"]
    renewed = spec(emulator)
    assert renewed["acquireTime"] == first["acquireTime"]
    assert renewed["renewTime"] >= first["renewTime"] and renewed["leaseTransitions"] == 0


def test_a_standby_waits_the_whole_duration_on_its_own_clock_then_takes_over(emulator):
    clock_a, clock_b = Clock(), Clock()
    a, b = elector("a", clock_a), elector("b", clock_b)
    assert a.lead() and not b.lead()
    # b's clock is far ahead: the renewTime written by a's machine means
    # nothing to it; only how long b itself has seen the record unchanged.
    clock_b.now += 9.9
    assert not b.lead()
    clock_a.now += 5
    assert a.lead()  # a renews
    assert not b.lead()  # b sees the new record: it counts from now
    clock_b.now += 9.9
    assert not b.lead()
    clock_b.now += 0.2  # 10.1 s unchanged since b saw the renewal: a is gone
    assert b.lead() and b.holder == "b"
    assert spec(emulator)["leaseTransitions"] == 1
    # a, whose own clock says its lease is still valid (a slow clock, or a
    # network cut off), renews with the version of its last write: refused (a
    # stale resourceVersion, 409); its read then shows b, and it stands by.
    clock_a.now += 1
    assert not a.lead() and a.holder == "b"
    assert any(e["status"] == 409 for e in emulator.requests)


def test_of_two_standbys_taking_an_expired_lease_only_one_wins(emulator):
    clock = Clock()
    a, b, c = elector("a", clock), elector("b", clock), elector("c", clock)
    assert a.lead() and not b.lead() and not c.lead()
    clock.now += 11
    # b and c both read the expired Lease before either writes.
    store_b, store_c = b.store, c.store
    seen = store_c.read_lease("gpucloud-reaper")
    assert b.lead()
    late = store_c.write_lease("gpucloud-reaper", {**seen["spec"], "holderIdentity": "c"},
                               resource_version=seen["metadata"]["resourceVersion"])
    assert late is None  # 409 Conflict: b got there first
    assert not c.lead() and spec(emulator)["holderIdentity"] == "b"
    assert store_b is not store_c


def test_release_empties_the_lease_and_a_standby_takes_it_at_once(emulator):
    clock = Clock()
    a, b = elector("a", clock), elector("b", clock)
    assert a.lead() and not b.lead()
    a.release()
    released = spec(emulator)
    assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1
    assert b.lead()  # no waiting: nobody holds it
    assert spec(emulator)["leaseTransitions"] == 1
    b.release()
    b.release()  # not the holder any more: nothing sent
    assert sum(1 for body in sent(emulator) if body["spec"]["holderIdentity"] == "") == 2


def test_release_wins_over_a_renewal_that_landed_after_it_was_sent(emulator):
    """Ctrl-C during a renewal: the PUT may still land, moving the version on
    from the one this process last saw; the release reads again and still
    empties the Lease."""
    a = elector("a", Clock())
    assert a.lead()
    landed = a.store.read_lease("gpucloud-reaper")
    assert a.store.write_lease("gpucloud-reaper", {**landed["spec"], "renewTime":
                                                   "2026-12-01T10:00:01.000000Z"},
                               resource_version=landed["metadata"]["resourceVersion"])
    a.release()
    assert spec(emulator)["holderIdentity"] == ""


def test_a_holder_that_cannot_renew_does_not_lead(emulator):
    clock = Clock()
    a = elector("a", clock)
    assert a.lead()
    emulator.cluster.denied.update({("update", "leases"), ("get", "leases")})  # 403s
    clock.now += 1
    assert a.lead() is False
    emulator.cluster.denied.clear()
    assert a.lead() is True  # still its own, renewed


def test_a_denied_lease_means_not_leading(emulator):
    emulator.cluster.denied.add(("get", "leases"))
    emulator.cluster.denied.add(("create", "leases"))
    assert elector("a", Clock()).lead() is False


def test_the_sdk_reads_and_writes_the_lease_sync_and_async(emulator):
    import asyncio

    body = {"holderIdentity": "sdk", "leaseDurationSeconds": 5}
    provider = Client(["kubernetes"]).provider("kubernetes")
    assert provider.read_lease("other") is None
    made = provider.write_lease("other", body)
    assert made["spec"]["holderIdentity"] == "sdk"
    assert provider.write_lease("other", body) is None  # AlreadyExists

    async def replace() -> dict | None:
        async with AsyncClient(["kubernetes"]) as client:
            calls = client.provider("kubernetes")
            read = await calls.read_lease("other")
            return await calls.write_lease("other", {**body, "holderIdentity": "async"},
                                           resource_version=read["metadata"]["resourceVersion"])

    assert asyncio.run(replace())["spec"]["holderIdentity"] == "async"
    assert "read_lease" in provider.calls and "write_lease" in provider.calls


@pytest.mark.parametrize("interval", [1.0, 1.5, 60.0, 600.0])
def test_the_lease_arithmetic_promises_takeover_within_two_intervals(interval):
    duration, poll = reaper_watch.lease_seconds(interval), reaper_watch.poll_seconds(interval)
    assert isinstance(duration, int) and duration >= 1
    # death after the last renewal r: seen by r + P, expired D later, taken within P
    assert poll + duration + poll <= 1.5 * interval
    # the leader renews every P: a live leader's record never stays unchanged for D
    assert duration >= 2 * poll
