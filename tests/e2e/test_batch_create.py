"""Batch create against the in-process sandbox: no cap at
100, launches really concurrent in both clients and bounded, all-or-nothing
terminates what it made, max_cost over a list of requests, the CLI's report
and exit code when some machines fail."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from typer.testing import CliRunner

from gpucloud import AsyncClient, BatchIncompleteError, BudgetExceededError, Client, CreateRequest
from gpucloud.providers.sandbox.server import SandboxTransport
from gpucloud.cli import app


def live_refs() -> set[str]:
    return {i.ref for i in Client().list(provider="sandbox")
            if i.status.value not in ("terminating", "terminated")}


def refuse_nth_create(monkeypatch, nth: int) -> None:
    """The nth POST /v1/instances is refused with a 400 (definite: nothing made)."""
    original = SandboxTransport.handle_request
    seen = {"n": 0}
    lock = threading.Lock()

    def handle(self, request):
        if request.method == "POST" and request.url.path == "/v1/instances":
            with lock:
                seen["n"] += 1
                n = seen["n"]
            if n == nth:
                return httpx.Response(400, json={"error": {"code": "invalid_request",
                                                           "message": "refused (test)"}})
        return original(self, request)

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)


def test_more_than_100_machines_in_one_batch(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "200")
    result = Client().create_many(gpu="h100", count=8, n=101, provider="sandbox",
                                  auto_shutdown="1h", name="big", concurrency=16)
    assert result.ok and len(result.instances) == 101 == len(live_refs())
    assert [i.name for i in result.items][:2] == ["big-1", "big-2"]
    assert [i.index for i in result.items] == list(range(101))


def track_concurrency(monkeypatch) -> dict[str, int]:
    original = SandboxTransport.handle_request
    state = {"now": 0, "max": 0}
    lock = threading.Lock()

    def handle(self, request):
        creating = request.method == "POST" and request.url.path == "/v1/instances"
        if creating:
            with lock:
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
            time.sleep(0.05)
        try:
            return original(self, request)
        finally:
            if creating:
                with lock:
                    state["now"] -= 1

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)
    monkeypatch.setattr(SandboxTransport, "handle_async_request",
                        lambda self, request: asyncio.to_thread(handle, self, request))
    return state


def test_launches_run_concurrently_within_the_bound(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "50")
    state = track_concurrency(monkeypatch)
    result = Client().create_many(gpu="h100", count=8, n=12, provider="sandbox",
                                  auto_shutdown="1h", concurrency=4)
    assert result.ok and 3 <= state["max"] <= 4


def test_async_launches_run_concurrently_within_the_bound(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "50")
    state = track_concurrency(monkeypatch)

    async def go():
        async with AsyncClient() as client:
            return await client.create_many(gpu="h100", count=8, n=12, provider="sandbox",
                                            auto_shutdown="1h", concurrency=4)

    result = asyncio.run(go())
    assert result.ok and len(result.instances) == 12 and 3 <= state["max"] <= 4


def test_all_or_nothing_terminates_what_it_made(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "50")
    refuse_nth_create(monkeypatch, 3)
    client = Client()
    with pytest.raises(BatchIncompleteError) as caught:
        client.create_many(gpu="h100", count=8, n=5, provider="sandbox", auto_shutdown="1h",
                           concurrency=1, all_or_nothing=True)
    items = caught.value.result.items
    assert [i.status for i in items] == ["terminated", "terminated", "failed", "not_launched",
                                         "not_launched"]
    assert caught.value.exit_code == 2 and caught.value.code == "invalid_request"
    assert live_refs() == set() and client.last_created == []
    assert "were terminated" in caught.value.hint


def test_without_all_or_nothing_a_failure_is_reported_and_the_rest_made(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "50")
    refuse_nth_create(monkeypatch, 2)
    result = Client().create_many(gpu="h100", count=8, n=4, provider="sandbox",
                                  auto_shutdown="1h", concurrency=1)
    assert not result.ok and len(result.instances) == 3 == len(live_refs())
    [failure] = result.failures
    assert failure.index == 1 and failure.error_code == "invalid_request"
    assert failure.launch_id and failure.attempts[0].launch_id == failure.launch_id


def test_max_cost_caps_a_list_of_requests_together():
    requests = [CreateRequest(gpu="h100", count=8, provider="sandbox", auto_shutdown="1h"),
                {"gpu": "h100", "count": 1, "provider": "sandbox", "auto_shutdown": "1h"}]
    client = Client()
    plans = [client.plan(gpu=r["gpu"] if isinstance(r, dict) else r.gpu,
                         count=r["count"] if isinstance(r, dict) else r.count,
                         provider="sandbox", auto_shutdown="1h") for r in requests]
    each = max(p.total for p in plans)
    with pytest.raises(BudgetExceededError):  # each fits alone, not both together
        client.create_many(requests=requests, max_cost=each)
    assert live_refs() == set()
    done = client.create_many(requests=requests, max_cost=sum(p.total for p in plans))
    assert done.ok and len(done.plans) == 2
    assert [i.instance.gpu_count for i in done.items] == [8, 1]


def test_cli_reports_failures_and_exits_with_the_first_ones_code(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "50")
    refuse_nth_create(monkeypatch, 2)
    result = CliRunner().invoke(app, ["create", "--gpu", "h100", "--provider", "sandbox",
                                      "--instances", "3", "--concurrency", "1",
                                      "--auto-shutdown", "1h", "--yes", "--json"])
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    assert len(doc["instances"]) == 2 and doc["instance"] is None
    [failure] = doc["failures"]
    assert failure["index"] == 1 and result.exit_code == failure["exit_code"] == 2
    plain = CliRunner().invoke(app, ["create", "--gpu", "h100", "--provider", "sandbox",
                                     "--instances", "3", "--auto-shutdown", "1h", "--yes",
                                     "--batch", doc["batch"]])
    # The same key: the two machines are adopted, only the failed slot is made.
    assert plain.exit_code == 0, plain.output
    assert plain.stderr.count("already made (earlier run)") == 2
    assert plain.stderr.count(": created sandbox/") == 1 and "[3/3]" in plain.stderr
    assert len(live_refs()) == 3
