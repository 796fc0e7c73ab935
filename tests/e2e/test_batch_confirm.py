"""A batch confirms the machines it made with a listing per pass, not a read
by id per machine, and keeps every check a read back makes: a machine the
listing does not show is read back by id, a replied id that names no machine
(404) or someone else's machine (another launch id) is looked for by launch
id, and is adopted only when found under it. Against the in-process sandbox;
requests are counted at its transport. Where a test counts them exactly it
launches one at a time: the last listing then starts after every create was
answered (with several in flight, a create the cloud answers at once can
still be on its way when that listing is read)."""

from __future__ import annotations

import json
import re
import threading

import httpx
import pytest

from gpucloud import Client
from gpucloud.batch import confirm
from gpucloud.providers.sandbox.adapter import LAUNCH_LABEL
from gpucloud.providers.sandbox.server import SandboxTransport


@pytest.fixture(autouse=True)
def room(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "300")


def counting(monkeypatch, rewrite=None) -> dict[str, int]:
    """Counts the simulated cloud's requests by kind; ``rewrite(kind, n, response)``
    may replace the nth answer of a kind (n from 1)."""
    original = SandboxTransport.handle_request
    counts = {"create": 0, "list": 0, "get": 0, "other": 0}
    lock = threading.Lock()

    def handle(self, request):
        path = request.url.path.rstrip("/")
        kind = ("create" if request.method == "POST" and path == "/v1/instances" else
                "list" if request.method == "GET" and path == "/v1/instances" else
                "get" if request.method == "GET" and path.startswith("/v1/instances/") else
                "other")
        with lock:
            counts[kind] += 1
            n = counts[kind]
        response = original(self, request)
        if rewrite is not None:
            response.read()
            response = rewrite(kind, n, response) or response
        return response

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)
    return counts


def answer(response: httpx.Response, body) -> httpx.Response:
    return httpx.Response(response.status_code, json=body)


def test_a_batch_makes_one_request_per_machine_and_a_listing_per_pass(monkeypatch):
    """N creates, a listing per pass, and reads by id only for the machines the
    last listing missed: it is sent once the last create is, while the last
    creates are answered, so at most the launches then in flight (here the
    cloud answers at once, so a create can be answered after a listing sent
    after it). Never a read per machine (2N)."""
    counts = counting(monkeypatch)
    n, wide = 40, 4
    result = Client().create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                  auto_shutdown="1h", concurrency=wide)
    assert result.ok and len(result.instances) == n
    assert counts["create"] == n
    assert counts["get"] <= wide
    assert 1 <= counts["list"] <= 2 + n // confirm.EVERY
    assert {i.launch_id for i in result.instances} == {i.launch_id for i in result.items}
    listed = {i.ref: i.launch_id for i in Client().list(provider="sandbox")}
    assert all(listed[i.ref] == i.launch_id for i in result.instances)


def test_a_small_batch_reads_each_machine_back(monkeypatch):
    counts = counting(monkeypatch)
    n = confirm.FEWEST - 1
    result = Client().create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                  auto_shutdown="1h")
    assert result.ok and counts["get"] == n and counts["list"] == 0


def test_machines_the_listing_does_not_show_yet_are_read_back_by_id(monkeypatch):
    """Eventual consistency: a listing that lags the creates confirms nothing
    (read again once, it still shows none), and each machine is then read
    back by its id."""
    def lagging(kind, n, response):
        if kind == "list":
            return answer(response, {"data": []})
        return None

    counts = counting(monkeypatch, lagging)
    result = Client().create_many(gpu="h100", count=8, n=10, provider="sandbox",
                                  auto_shutdown="1h", concurrency=1)
    assert result.ok and len(result.instances) == 10
    assert counts["get"] == 10
    assert all(item.status == "created" for item in result.items)


def test_a_last_listing_missing_several_machines_is_read_again_not_each_by_id(monkeypatch):
    """The last page read before the last creates reached the cloud: once every
    launch has ended it is read again, one request, instead of a read by id
    for each machine it missed."""
    def lagging(kind, n, response):
        if kind == "list" and n == 1:
            return answer(response, {"data": []})
        return None

    counts = counting(monkeypatch, lagging)
    result = Client().create_many(gpu="h100", count=8, n=10, provider="sandbox",
                                  auto_shutdown="1h", concurrency=1)
    assert result.ok and len(result.instances) == 10
    assert counts["list"] == 2 and counts["get"] == 0
    assert all(item.status == "created" for item in result.items)
    journaled_and_billed(result.instances)


def test_a_listed_machine_with_another_launch_id_is_not_taken(monkeypatch):
    """The listing shows the replied id carrying someone else's launch id: that
    launch is looked for by its own launch id (a listing) and adopted there."""
    foreign = {}

    def relabel(kind, n, response):
        if kind == "list" and n == 1:
            body = json.loads(response.content)
            first = body["data"][0]
            foreign["id"] = first["id"]
            first["labels"] = {**first["labels"], LAUNCH_LABEL: "gc-0123456789"}
            return answer(response, body)
        return None

    counts = counting(monkeypatch, relabel)
    result = Client().create_many(gpu="h100", count=8, n=10, provider="sandbox",
                                  auto_shutdown="1h", concurrency=1)
    assert result.ok and len(result.instances) == 10
    [adopted] = [i for i in result.items if i.attempts[-1].outcome == "adopted"]
    assert adopted.instance.id == foreign["id"] and adopted.launch_id != "gc-0123456789"
    assert counts["list"] == 2 and counts["get"] == 0


def test_a_replied_id_that_names_no_machine_is_looked_for_by_launch_id(monkeypatch):
    """A create reply naming an id of the right form that does not exist: the
    listing does not show it, the read by id answers 404, and the machine is
    found under its launch id (with its real id), never taken as replied."""
    lie = "sbx-0000000000ff"

    def lying(kind, n, response):
        if kind == "create" and n == 3:
            return answer(response, {**json.loads(response.content), "id": lie})
        return None

    counts = counting(monkeypatch, lying)
    result = Client().create_many(gpu="h100", count=8, n=10, provider="sandbox",
                                  auto_shutdown="1h", concurrency=1)
    assert result.ok and len(result.instances) == 10
    assert lie not in {i.id for i in result.instances}
    [adopted] = [i for i in result.items if i.attempts[-1].outcome == "adopted"]
    assert adopted.instance.launch_id == adopted.launch_id
    assert counts["get"] == 1  # the lie alone is read by id


def test_a_lie_not_found_by_launch_id_fails_keeping_the_launch_id(monkeypatch):
    """The machine a lying reply stood for is nowhere under its launch id: that
    slot fails with its launch id kept (reconcile can settle it later); the
    others are made."""
    monkeypatch.setattr("gpucloud.core.launch.RECONCILE_DELAYS", (0.0,))
    lie = "sbx-0000000000ff"
    hidden = {}

    def lying(kind, n, response):
        if kind == "create" and n == 3:
            body = json.loads(response.content)
            hidden["id"] = body["id"]
            return answer(response, {**body, "id": lie})
        if kind == "list":  # the real machine never shows up
            body = json.loads(response.content)
            body["data"] = [m for m in body["data"] if m["id"] != hidden.get("id")]
            return answer(response, body)
        return None

    counting(monkeypatch, lying)
    result = Client().create_many(gpu="h100", count=8, n=10, provider="sandbox",
                                  auto_shutdown="1h", concurrency=1)
    [failed] = [i for i in result.items if i.status == "failed"]
    assert failed.launch_id and failed.launch_id.startswith("gc-")
    assert failed.error_code == "invalid_response"
    assert len(result.instances) == 9
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import Journal

    [record] = [r for r in Journal(state_db_path()).all() if r.launch_id == failed.launch_id]
    assert record.status == "ambiguous"  # left for reconcile, never called made or failed


def journaled_and_billed(instances) -> None:
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import Journal
    from gpucloud.safety.ledger import Ledger

    journal = Journal(state_db_path())
    delivered = {r.launch_id: r.instance_id for r in journal.all() if r.status == "delivered"}
    assert delivered == {i.launch_id: i.id for i in instances}
    started = {r.instance_id for r in Ledger(journal).rows() if r.event == "started"}
    assert started == {i.id for i in instances}


def test_a_pass_records_every_machine_in_the_journal_and_the_ledger(monkeypatch):
    result = Client().create_many(gpu="h100", count=8, n=12, provider="sandbox",
                                  auto_shutdown="1h")
    assert result.ok
    journaled_and_billed(result.instances)


def test_a_pass_the_database_refuses_as_one_transaction_records_each_on_its_own(monkeypatch):
    """The grouped write fails (the database busy past its timeout, say): nothing
    of it is kept, and each machine is then recorded by itself."""
    from contextlib import contextmanager

    from gpucloud.errors import StateError
    from gpucloud.safety.journal import Journal

    @contextmanager
    def refused(self, schema=()):
        raise StateError("state database is unusable: database is locked (test)",
                         path=self.path)
        yield

    monkeypatch.setattr(Journal, "exclusive", refused)
    result = Client().create_many(gpu="h100", count=8, n=12, provider="sandbox",
                                  auto_shutdown="1h")
    assert result.ok and len(result.instances) == 12
    journaled_and_billed(result.instances)


def test_a_pass_records_in_groups_and_a_group_refused_records_each_on_its_own(monkeypatch):
    """A pass's machines are recorded a few at a time (the launches still
    going wait for the home's write lock meanwhile); a group the database
    refuses leaves the groups before it recorded, and its own machines are
    each recorded by themselves."""
    from gpucloud.core import launch as launch_module
    from gpucloud.errors import StateError
    from gpucloud.safety.journal import Journal

    monkeypatch.setattr(launch_module, "RECORDED_TOGETHER", 4)
    grouped = {"calls": 0, "sizes": []}
    original = Journal.exclusive
    known = launch_module.ledger_events.launched_all

    def counted(ctx, launches):
        grouped["sizes"].append(len(launches))
        return known(ctx, launches)

    def second_refused(self, schema=()):
        grouped["calls"] += 1
        if grouped["calls"] == 2:
            raise StateError("state database is unusable: database is locked (test)",
                             path=self.path)
        return original(self, schema)

    monkeypatch.setattr(launch_module.ledger_events, "launched_all", counted)
    monkeypatch.setattr(Journal, "exclusive", second_refused)
    n = 12
    result = Client().create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                  auto_shutdown="1h")
    assert result.ok and len(result.instances) == n
    assert grouped["sizes"] and max(grouped["sizes"]) <= 4
    assert sum(grouped["sizes"]) >= n  # the refused group's machines each on its own
    journaled_and_billed(result.instances)


def test_a_batch_looks_for_its_ssh_key_once_and_journals_it_for_every_launch(monkeypatch,
                                                                          tmp_path):
    """The default key is found once for the batch, not once per launch (each
    look is file-system work on the launch path); every launch still journals
    it, for `gpucloud ssh` to offer its private half later."""
    import os

    from gpucloud.config.settings import state_db_path
    from gpucloud.core import context
    from gpucloud.safety.journal import Journal

    key = tmp_path / "home" / ".ssh" / "id_ed25519.pub"
    key.parent.mkdir(parents=True)
    # Constructed: any well-formed public key line will do.
    key.write_text("ssh-ed25519 "
                   "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
                   " test@example\n")
    looks = []
    real = context.resolve_ssh_key
    monkeypatch.setattr(context, "resolve_ssh_key", lambda k: looks.append(k) or real(k))
    result = Client().create_many(gpu="h100", count=8, n=10, provider="sandbox",
                                  auto_shutdown="1h", concurrency=1)
    assert result.ok and looks == [None]
    paths = {r.ssh_key_path for r in Journal(state_db_path()).all()}
    assert paths == {os.path.abspath(key)}


def test_an_interrupt_before_the_pass_names_each_machine_by_its_replied_id(monkeypatch):
    """Ctrl-C while the listing that would confirm a batch is in flight: every
    machine is named as one that may exist, under the id its create reply
    named and its launch id; the journal holds both (ambiguous), and
    reconcile adopts them all."""
    from typer.testing import CliRunner

    from gpucloud.cli import app
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import Journal

    original = SandboxTransport.handle_request

    def handle(self, request):
        if request.method == "GET" and request.url.path.rstrip("/") == "/v1/instances":
            raise KeyboardInterrupt
        return original(self, request)

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)
    before = set(threading.enumerate())
    result = CliRunner().invoke(app, ["create", "--gpu", "h100", "--count", "8", "--provider",
                                      "sandbox", "--instances", "10", "--yes"])
    assert result.exit_code == 130
    # A process would exit here; in this one, creates answered after the
    # interrupt still finish recording (what reconcile then reads).
    for thread in set(threading.enumerate()) - before:
        thread.join(10)
    monkeypatch.setattr(SandboxTransport, "handle_request", original)
    records = Journal(state_db_path()).all()
    assert len(records) == 10 and {r.status for r in records} == {"ambiguous"}
    # The listing goes out once the last create is sent, not answered: a create
    # still unanswered at the interrupt is named by its launch id alone (its
    # thread may record the id it is then told after the report).
    named = dict((launch, ref) for ref, launch in re.findall(
        r"\(sandbox/(\S+), the id the create reply named, not yet read back; "
        r"launch id (gc-[0-9a-f]+)\)", result.stderr))
    assert named  # those answered before the interrupt are named by their replied id
    for record in records:
        assert f"launch id {record.launch_id}" in result.stderr
        assert named.get(record.launch_id, record.instance_id) == record.instance_id
    assert "exists:" not in result.stderr  # none is claimed made before it is confirmed
    doc = json.loads(CliRunner().invoke(app, ["reconcile", "--json"]).stdout)
    assert sorted(i["ref"] for i in doc["adopted"]) == sorted(
        f"sandbox/{r.instance_id}" for r in records)


def test_an_interrupt_with_launches_not_started_leaves_no_thread_going_on(monkeypatch):
    """Ctrl-C while launches wait for their turn: they never start, so the
    creates they would send never go, and the listings beside the launches
    (waiting for every create to be sent) stop too. A thread left waiting
    would keep the process from exiting: Python joins a pool's threads at
    exit."""
    original = SandboxTransport.handle_request
    lock = threading.Lock()
    seen = {"creates": 0}

    def handle(self, request):
        if request.method == "POST" and request.url.path.rstrip("/") == "/v1/instances":
            with lock:
                seen["creates"] += 1
                third = seen["creates"] == 3
            if third:
                raise KeyboardInterrupt
        return original(self, request)

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)
    before = set(threading.enumerate())
    with pytest.raises(KeyboardInterrupt):
        Client().create_many(gpu="h100", count=8, n=30, provider="sandbox",
                             auto_shutdown="1h", concurrency=2)
    assert seen["creates"] < 30  # launches were still waiting for their turn
    for thread in set(threading.enumerate()) - before:
        if not thread.daemon:
            thread.join(5)
            assert not thread.is_alive(), f"{thread.name} goes on after the interrupt"


def test_the_last_listing_is_on_its_way_while_the_last_create_is_answered(monkeypatch):
    """The last pass's listing does not wait for the last creates' answers (a
    round trip): the cloud here holds the answer to the last create until a
    listing arrives (3 s at most), and the listing comes."""
    original = SandboxTransport.handle_request
    n = 10
    listed = threading.Event()
    seen = {"creates": 0}
    lock = threading.Lock()

    def handle(self, request):
        path = request.url.path.rstrip("/")
        if request.method == "GET" and path == "/v1/instances":
            listed.set()
        response = original(self, request)
        if request.method == "POST" and path == "/v1/instances":
            with lock:
                seen["creates"] += 1
                last = seen["creates"] == n
            if last:
                seen["released by the listing"] = listed.wait(3)
        return response

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)
    result = Client().create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                  auto_shutdown="1h", concurrency=3)
    assert result.ok and len(result.instances) == n
    assert seen["released by the listing"] is True


def _holding_listings_until(monkeypatch, creates: int) -> dict[str, int]:
    """Counts as ``counting`` does; each listing is served only once ``creates``
    creates were answered (3 s at most), so every machine is there to be listed."""
    original = SandboxTransport.handle_request
    counts = {"create": 0, "list": 0, "get": 0}
    made = threading.Event()
    lock = threading.Lock()

    def handle(self, request):
        path = request.url.path.rstrip("/")
        is_list = request.method == "GET" and path == "/v1/instances"
        if is_list:
            made.wait(3)
        response = original(self, request)
        with lock:
            if request.method == "POST" and path == "/v1/instances":
                counts["create"] += 1
                if counts["create"] == creates:
                    made.set()
            elif is_list:
                counts["list"] += 1
            elif request.method == "GET" and path.startswith("/v1/instances/"):
                counts["get"] += 1
        return response

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)
    return counts


def test_the_last_listing_stops_at_a_full_page_holding_every_machine_of_the_batch(
        monkeypatch):
    """Machines that fill whole pages: the page after them is empty, and is
    not read (a round trip after the last create) once the pages read hold
    every launch the batch sent."""
    from gpucloud.providers.sandbox import adapter as sandbox_adapter

    monkeypatch.setattr(sandbox_adapter, "PAGE", 5)
    n = 10
    counts = _holding_listings_until(monkeypatch, n)
    result = Client().create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                  auto_shutdown="1h", concurrency=3)
    assert result.ok and len(result.instances) == n
    assert counts == {"create": n, "list": n // 5, "get": 0}


def test_the_last_listing_reads_on_while_a_launch_of_the_batch_is_missing(monkeypatch):
    """Another machine of the account on the full last page is not one of the
    batch's: the listing goes on to the next page, where its last machine is."""
    from gpucloud.providers.sandbox import adapter as sandbox_adapter

    monkeypatch.setattr(sandbox_adapter, "PAGE", 5)
    Client().create(gpu="h100", count=8, provider="sandbox", auto_shutdown="1h")
    n = 10
    counts = _holding_listings_until(monkeypatch, n)
    result = Client().create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                  auto_shutdown="1h", concurrency=3)
    assert result.ok and len(result.instances) == n
    assert counts == {"create": n, "list": 3, "get": 0}


def test_the_machines_of_full_pages_are_confirmed_before_the_last_answers(monkeypatch):
    """Once the last create is sent, the launches whose machines are in the
    full pages read already (under the replied id, with their own launch id)
    are confirmed while the last creates are answered; the last pass confirms
    the rest. Every machine is confirmed once, journaled and billed."""
    from gpucloud.providers.sandbox import adapter as sandbox_adapter

    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "400")
    monkeypatch.setattr(sandbox_adapter, "PAGE", 20)
    early = []
    original = confirm.listed_early

    def counted(*args, **kwargs):
        done = yield from original(*args, **kwargs)
        early.append(len(done))
        return done

    monkeypatch.setattr(confirm, "listed_early", counted)
    n = confirm.EVERY + 44
    counts = counting(monkeypatch)
    result = Client().create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                  auto_shutdown="1h", concurrency=4)
    assert result.ok and len(result.instances) == n
    assert len(early) == 1 and 0 < early[0] < n - confirm.EVERY
    assert counts["create"] == n and counts["get"] <= 4
    assert len({i.index for i in result.items}) == n
    journaled_and_billed(result.instances)


def test_the_last_listing_is_not_held_behind_a_page_read_on_its_way(monkeypatch):
    """The pages are read as they fill while the creates go out; the last
    pass's listing is sent once the last create is, even while such a read is
    still on its way (waiting for a read of a page not due to be full would
    put up to a round trip between the last create and the last listing).
    Here the cloud holds the first read of the listing (of a page just begun)
    until another listing arrives (3 s at most): only a last listing sent
    apart from it releases it."""
    from gpucloud.providers.sandbox import adapter as sandbox_adapter

    monkeypatch.setattr(sandbox_adapter, "PAGE", 5)
    monkeypatch.setattr(confirm, "EVERY", 10**6)  # no pass among the launches
    known = confirm.Confirmations.__init__

    def paged(self):  # as if a pass had seen the listing come in pages of 5
        known(self)
        self.page_size = 5

    monkeypatch.setattr(confirm.Confirmations, "__init__", paged)
    original = SandboxTransport.handle_request
    n = 20
    listings = []
    another = threading.Event()
    lock = threading.Lock()

    def handle(self, request):
        path = request.url.path.rstrip("/")
        if request.method == "GET" and path == "/v1/instances":
            with lock:
                listings.append(request.url.params.get("cursor"))
                first = len(listings) == 1
            if not first:
                another.set()
            elif not another.wait(3):
                listings.append("held 3 s")
        return original(self, request)

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)
    result = Client().create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                  auto_shutdown="1h", concurrency=2)
    assert result.ok and len(result.instances) == n
    assert listings[0] is None  # the first page, read while the creates went out
    assert "held 3 s" not in listings
