"""Ctrl-C during create: every machine that exists, or may
exist because its launch was in flight, is named with its launch id and the
command that deletes it, in text and in --json; never "nothing was done"."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.providers.sandbox.server import SandboxTransport
from gpucloud.cli import app


@pytest.fixture(autouse=True)
def launches_left_running():
    """An interrupted batch returns at once while its launch threads may still
    finish their request and read the new machine back: they must not run into
    the next test and spend its counted requests."""
    yield
    import threading

    for thread in threading.enumerate():
        if thread.name.startswith("gpucloud-launch"):
            thread.join(30)


def interrupt_on(monkeypatch, method: str, path_part: str, nth: int, *, after: bool) -> None:
    """Ctrl-C arrives during the nth matching request: before the simulated cloud
    sees it, or after it acted (the answer is lost)."""
    original = SandboxTransport.handle_request
    seen = {"n": 0}

    def handle(self, request):
        matches = request.method == method and path_part in request.url.path
        if matches:
            seen["n"] += 1
        if matches and seen["n"] == nth:
            if after:
                original(self, request)
            raise KeyboardInterrupt
        return original(self, request)

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)


def create(*extra: str):
    return CliRunner().invoke(app, ["create", "--gpu", "h100", "--count", "8", "--provider",
                                    "sandbox", "--yes", *extra])


def live_refs() -> set[str]:
    return {i.ref for i in Client().list(provider="sandbox")
            if i.status.value not in ("terminating", "terminated")}


def test_interrupt_during_a_batch_names_made_and_in_flight(monkeypatch):
    interrupt_on(monkeypatch, "POST", "/instances", 3, after=False)
    result = create("--instances", "3", "--concurrency", "1")  # in order: 2 made, 1 in flight
    assert result.exit_code == 130
    made = live_refs()
    assert len(made) == 2
    for ref in made:
        assert ref in result.stderr
    assert "gpucloud delete " + " ".join(sorted(made)) in result.stderr or all(
        ref in result.stderr.split("delete with:")[1] for ref in made)
    assert "may exist" in result.stderr and "launch id gc-" in result.stderr
    assert "nothing" not in result.stderr


def test_interrupt_with_the_answer_lost_reports_json(monkeypatch):
    interrupt_on(monkeypatch, "POST", "/instances", 2, after=True)
    result = create("--instances", "3", "--json", "--concurrency", "1")
    assert result.exit_code == 130
    doc = json.loads(result.stdout)
    assert doc["error"]["code"] == "interrupted" and doc["error"]["exit_code"] == 130
    assert len(doc["instances"]) == 1
    [flight] = doc["in_flight"]
    # The launch that was in flight did create a machine: its launch id finds it.
    existing = {i.launch_id: i.ref for i in Client().list(provider="sandbox")}
    assert flight["launch_id"] in existing
    assert doc["instances"][0]["ref"] in doc["error"]["hint"]
    assert result.stderr == ""


def test_interrupt_while_waiting_names_the_machine(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_BOOT_SECONDS", "600")
    # The first GET by id reads the new machine back; the second is the wait's first poll.
    interrupt_on(monkeypatch, "GET", "/instances/", 2, after=False)
    result = create("--wait", "--timeout", "5")
    assert result.exit_code == 130
    [ref] = live_refs()
    assert f"exists: {ref}" in result.stderr and f"gpucloud delete {ref}" in result.stderr
    doc = json.loads(CliRunner().invoke(app, ["list", "--json"]).stdout)
    assert [i["ref"] for i in doc["instances"]] == [ref]


def test_interrupt_during_the_read_back_names_the_replied_id(monkeypatch):
    """The create was answered with an id, not yet confirmed by reading it back:
    the machine may exist under that id, and the journal keeps both the id and
    the launch id for reconcile; it is not claimed to exist."""
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import Journal

    interrupt_on(monkeypatch, "GET", "/instances/", 1, after=False)
    result = create()
    assert result.exit_code == 130
    [ref] = live_refs()
    assert f"exists: {ref}" not in result.stderr
    assert "may exist: sandbox" in result.stderr and f"({ref}, the id the create reply" \
        in result.stderr
    [record] = Journal(state_db_path()).all()
    assert (record.status, f"sandbox/{record.instance_id}") == ("ambiguous", ref)
    assert f"launch id {record.launch_id}" in result.stderr
    doc = json.loads(CliRunner().invoke(app, ["reconcile", "--json"]).stdout)
    assert [i["ref"] for i in doc["adopted"]] == [ref]


def test_interrupt_before_any_launch_says_none_was_created(monkeypatch):
    interrupt_on(monkeypatch, "GET", "/instance-types", 1, after=False)
    result = create()
    assert result.exit_code == 130
    assert live_refs() == set()


def test_sdk_keeps_what_an_interrupted_create_made(monkeypatch):
    interrupt_on(monkeypatch, "POST", "/instances", 2, after=False)
    client = Client()
    with pytest.raises(KeyboardInterrupt):
        client.create_many(gpu="h100", count=8, n=2, provider="sandbox", concurrency=1)
    [made] = client.last_created
    [flight] = client.in_flight
    assert made.ref in live_refs() and flight.launch_id.startswith("gc-")
    assert flight.outcome == "launching"


def test_interrupting_a_concurrent_batch_names_every_launch_in_flight(monkeypatch):
    """Three launches at once: the interrupt arrives while all three are sent and
    unanswered; each is named, none forgotten because another thread held it."""
    import threading

    original = SandboxTransport.handle_request
    release = threading.Event()
    seen = {"n": 0}
    lock = threading.Lock()

    def handle(self, request):
        if request.method == "POST" and request.url.path.endswith("/instances"):
            with lock:
                seen["n"] += 1
                n = seen["n"]
            if n == 3:
                raise KeyboardInterrupt
            release.wait(10)  # still unanswered when the interrupt arrives
        return original(self, request)

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)
    client = Client()
    try:
        with pytest.raises(KeyboardInterrupt):
            client.create_many(gpu="h100", count=8, n=3, provider="sandbox", concurrency=3)
        flights = client.in_flight
    finally:
        release.set()
    assert len({f.launch_id for f in flights}) == 3
    assert all(f.outcome == "launching" for f in flights)
