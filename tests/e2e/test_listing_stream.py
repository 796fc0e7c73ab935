"""A listing is streamed and lean: the sandbox answers page by page, each
machine is parsed once and its Instance validated once, `Client.iter_list`
hands each page on before asking for the next, `gpucloud list --json` prints
each machine as it comes (the very document it printed whole before) and
holds memory in proportion to a page, not to the listing; and a listing that
breaks off part way leaves the cost ledger claiming nothing it did not see."""

from __future__ import annotations

import io
import json
import sys
import tracemalloc

import pytest

from gpucloud import AsyncClient, Client
from gpucloud.cli.commands import instance as instance_cmds
from gpucloud.config.settings import sandbox_db_path, state_db_path
from gpucloud.errors import GpuCloudError
from gpucloud.models import Connection, Instance
from gpucloud.providers.sandbox import adapter as sandbox_adapter
from gpucloud.providers.sandbox.server import SandboxCloud
from gpucloud.safety.journal import Journal
from gpucloud.safety.ledger import Ledger
from tests.cli.test_display import invoke


def fill(machines: int) -> None:
    """`machines` running sandbox machines of gpucloud's, made by the cloud's
    own insert in one transaction (as bench/listing.py fills its cloud)."""
    cloud = SandboxCloud(sandbox_db_path(), {"capacity": 1_000_000, "boot_seconds": 0})
    with cloud._write_lock() as db:
        now = cloud._now()
        for n in range(machines):
            cloud._insert(db, {"instance_type": "sim.8xH100", "region": "sim-east-1",
                               "name": f"m-{n}", "labels": {"gpucloud-launch-id": f"gc-{n:010x}"}},
                          now)


def listing_requests(client: Client) -> int:
    cloud = client._ctx.adapter("sandbox").cloud
    return sum(1 for method, path, _ in cloud.log if (method, path) == ("GET", "/v1/instances"))


class Counting:
    """A model's validator that counts what it validates (pydantic calls
    `validate_python` once for every model it builds)."""

    def __init__(self, real: object) -> None:
        self.real, self.calls = real, 0

    def validate_python(self, *args: object, **kwargs: object) -> object:
        self.calls += 1
        return self.real.validate_python(*args, **kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


def test_each_machine_of_a_listing_is_validated_once(monkeypatch):
    fill(300)
    Instance(provider="sandbox", id="built")  # the deferred validators, built now
    Connection(method="api")
    counters = []
    for model in (Instance, Connection):
        counter = Counting(model.__pydantic_validator__)
        monkeypatch.setattr(model, "__pydantic_validator__", counter)
        counters.append(counter)
    listed = Client(["sandbox"]).list()
    assert len(listed) == 300 and {m.status.value for m in listed} == {"running"}
    assert all(m.connection is not None and m.connection.method == "api" for m in listed)
    # One Instance each; their one way in (the cloud's exec API) is one shared
    # Connection, validated at most once in the process, not once per machine.
    assert 300 <= sum(c.calls for c in counters) <= 301


def test_iter_list_hands_on_a_page_before_asking_for_the_next():
    fill(2 * sandbox_adapter.PAGE + 1)  # three pages
    client = Client(["sandbox"])
    machines = client.iter_list()
    first = next(machines)
    assert listing_requests(client) == 1
    rest = list(machines)
    assert listing_requests(client) == 3
    assert [m.ref for m in [first, *rest]] == [m.ref for m in client.list()]
    assert len(rest) == 2 * sandbox_adapter.PAGE


def test_async_iter_list_answers_as_list_does():
    import asyncio

    fill(sandbox_adapter.PAGE + 3)

    async def both():
        async with AsyncClient(["sandbox"]) as client:
            streamed = [m.ref async for m in client.iter_list()]
            return streamed, [m.ref for m in await client.list()]

    streamed, listed = asyncio.run(both())
    assert streamed == listed and len(streamed) == sandbox_adapter.PAGE + 3


@pytest.mark.parametrize("machines", [0, 1, 2 * sandbox_adapter.PAGE + 7])
def test_list_json_prints_the_document_it_printed_whole(machines):
    fill(machines)
    result = invoke("list", "--json")
    assert result.exit_code == 0, result.output
    listed = Client(["sandbox"]).list()
    # What `gpucloud list --json` printed before it streamed: one json.dumps.
    whole = json.dumps({"instances": [m.model_dump(mode="json") for m in listed],
                        "warnings": []}) + "\n"
    assert result.stdout == whole


class Sink(io.TextIOBase):
    """stdout that counts what is written and keeps none of it."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, text: str) -> int:
        self.size += len(text)
        return len(text)


def traced_peak_of_list_json(machines: int, tmp_path, monkeypatch) -> tuple[int, int]:
    """(bytes traced at the peak of `gpucloud list --json` over what was traced
    before it, bytes printed), in a home and a cloud of their own."""
    monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path / f"home-{machines}"))
    fill(machines)
    sink = Sink()
    monkeypatch.setattr(sys, "stdout", sink)
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    instance_cmds.list_(provider=None, show_all=False, status=None, json_output=True)
    return tracemalloc.get_traced_memory()[1] - before, sink.size


def test_list_json_holds_memory_in_proportion_to_a_page_not_to_the_listing(
        tmp_path, monkeypatch):
    """What one more machine costs at the peak, against what it adds to the
    output: the whole reply, every model and the whole text held at once cost
    about nine and a half bytes per byte printed; streamed, what is left per
    machine is mostly its latest ledger row (the listing memo): under two.
    Measured as the growth between two sizes, so what any listing costs once
    (validators built, modules) cancels out."""
    tracemalloc.start()
    try:
        traced_peak_of_list_json(50, tmp_path, monkeypatch)  # warm: one-time costs
        small, small_out = traced_peak_of_list_json(600, tmp_path, monkeypatch)
        big, big_out = traced_peak_of_list_json(3000, tmp_path, monkeypatch)
    finally:
        tracemalloc.stop()
    assert big_out > 4 * small_out
    per_byte = (big - small) / (big_out - small_out)
    assert per_byte < 3.5, f"{per_byte:.1f} bytes held per byte printed"


def test_a_listing_broken_off_part_way_records_nothing_it_did_not_see(monkeypatch):
    fill(2 * sandbox_adapter.PAGE + 5)
    book = Ledger(Journal(state_db_path()))
    known = Client(["sandbox"]).list()  # the ledger now has every machine running
    before = book.rows()
    assert len(before) == len(known)
    # The cloud answers the first page, then fails every later one (503s,
    # retried, then given up): the machines on those pages are not seen.
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_5XX", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "list_more")
    client = Client(["sandbox"], sleep=lambda _s: None)
    streamed = []
    with pytest.raises(GpuCloudError) as raised:
        for machine in client.iter_list():
            streamed.append(machine.ref)
    assert raised.value.code == "server_error"  # the 503, once the retries gave up
    assert streamed == [m.ref for m in known[:sandbox_adapter.PAGE]]
    # No machine of a later page is taken as ended, and nothing of the first
    # page is written either: a listing that broke off records nothing.
    assert book.rows() == before
    with pytest.raises(GpuCloudError):
        Client(["sandbox"], sleep=lambda _s: None).list()
    assert book.rows() == before


def test_list_json_broken_off_part_way_is_still_one_document(monkeypatch):
    fill(sandbox_adapter.PAGE + 2)
    Client(["sandbox"]).list()
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_5XX", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "list_more")
    monkeypatch.setattr("time.sleep", lambda _s: None)  # the retries' pauses
    result = invoke("list", "--json")
    document = json.loads(result.stdout)
    assert set(document) == {"instances", "error"}
    assert len(document["instances"]) == sandbox_adapter.PAGE  # what was printed
    assert document["error"]["code"] == "server_error"
    assert result.exit_code == document["error"]["exit_code"] != 0
