"""A reap pass reads each overdue machine again and deletes it at once after
its own read, not after every other overdue machine has been read: the time
an extend from elsewhere can land unseen between the two is one request's,
whatever the number of machines. Against the sandbox with its own timer off
(a deadline past ends nothing by itself), its machines made through its API
with deadlines already past."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import httpx
import pytest

from gpucloud import Client

OVERDUE = 24
KEPT = 3  # a deadline still ahead: listed, never read again


@pytest.fixture(autouse=True)
def no_native_timer(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_NATIVE_TIMER", "0")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "100")


def _launch(http: httpx.Client, n: int, deadline: datetime) -> str:
    answer = http.post("/v1/instances", json={
        "instance_type": "sim.1xH100", "region": "sim-east-1", "name": f"reap-{n}",
        "shutdown_at": deadline.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "labels": {"gpucloud-launch-id": f"gc-{n:010x}"}})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_each_delete_follows_its_own_read_not_every_read():
    client = Client(["sandbox"])
    sandbox = client._ctx.adapter("sandbox")  # the cloud this client's requests reach
    now = datetime.now(timezone.utc)
    with httpx.Client(transport=sandbox.transport(), base_url=sandbox.base_url) as http:
        overdue = {_launch(http, n, now - timedelta(hours=1)) for n in range(OVERDUE)}
        for n in range(OVERDUE, OVERDUE + KEPT):
            _launch(http, n, now + timedelta(hours=1))
    cloud = sandbox.cloud
    cloud.log.clear()
    report = client.reap()
    assert sorted(a.instance.id for a in report.actions if a.action == "terminated") \
        == sorted(overdue)
    asked = [(method, path.rsplit("/", 1)[-1]) for method, path, _ in cloud.log
             if path.startswith("/v1/instances/")]
    reads = [ident for method, ident in asked if method == "GET"]
    deletes = [ident for method, ident in asked if method == "DELETE"]
    assert sorted(reads) == sorted(deletes) == sorted(overdue)  # two requests each
    for ident in overdue:  # a fresh read before each delete
        assert asked.index(("GET", ident)) < asked.index(("DELETE", ident))
    # The first delete went out before the last read: with the reads all
    # first, every one of them came before any delete.
    first_delete = asked.index(("DELETE", deletes[0]))
    assert sum(1 for method, _ in asked[:first_delete] if method == "GET") < OVERDUE
    client.close()
