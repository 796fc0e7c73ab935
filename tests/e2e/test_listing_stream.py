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
from collections.abc import Callable

import pytest

from gpucloud import AsyncClient, Client
from gpucloud.cli.commands import instance as instance_cmds
from gpucloud.config.settings import sandbox_db_path, state_db_path
from gpucloud.errors import GpuCloudError
from gpucloud.models import Connection, Instance
from gpucloud.providers.sandbox import adapter as sandbox_adapter
from gpucloud.providers.sandbox.server import SandboxCloud
from gpucloud.safety import listing_memo
from gpucloud.safety.journal import Journal, release
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


def live_instances() -> int:
    import gc

    gc.collect()  # what is still reachable only
    return sum(1 for o in gc.get_objects() if isinstance(o, Instance))


def test_iter_list_lets_a_page_go_before_the_next_is_read(monkeypatch):
    """When the cloud reads a later page, nothing of the pages before is held
    but the machine the reader holds: the first page was kept until the
    provider's listing ended (a second page in flight at the peak)."""
    fill(3 * sandbox_adapter.PAGE)
    held: list[int] = []
    read = SandboxCloud._page_rows

    def page_rows(self, after, *args):
        if after:  # a later page: what the listing holds as it asks for it
            held.append(live_instances())
        return read(self, after, *args)

    monkeypatch.setattr(SandboxCloud, "_page_rows", page_rows)
    machine = None
    count = 0
    before = live_instances()  # those other tests left behind
    for machine in Client(["sandbox"]).iter_list():
        count += 1
    assert count == 3 * sandbox_adapter.PAGE and machine is not None
    assert len(held) >= 2 and max(held) - before < 10, (before, held)


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


def sqlite_memory() -> tuple[Callable[[], int], Callable[[], int]] | None:
    """SQLite's own allocations (its page caches among them; tracemalloc sees
    none of it), from the library the sqlite3 module runs on: (bytes in use,
    the high-water mark since the last call, then reset to what is in use);
    None where the library does not export them."""
    import ctypes

    import _sqlite3

    try:
        library = ctypes.CDLL(_sqlite3.__file__)
        used, highwater = library.sqlite3_memory_used, library.sqlite3_memory_highwater
    except (OSError, AttributeError):
        return None
    used.restype, highwater.restype, highwater.argtypes = ctypes.c_int64, ctypes.c_int64, \
        [ctypes.c_int]
    return (lambda: int(used())), (lambda: int(highwater(1)))


def peaks_of_list_json(machines: int, tmp_path, monkeypatch,
                       known: bool = False) -> tuple[int, int, int | None]:
    """(bytes traced at the peak of `gpucloud list --json` over what was traced
    before it, bytes printed, SQLite's high-water mark over what it held
    before), in a home and a cloud of their own. `known`: the ledger has seen
    every machine already (a listing before, in another process: this one
    remembers nothing of it), as a listing run every few minutes finds it."""
    monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path / f"home-{machines}-{known}"))
    fill(machines)
    if known:
        Client(["sandbox"]).list()
        listing_memo.forget(Journal(state_db_path()))
        release()  # nor its connection, with the pages it read
    sink = Sink()
    monkeypatch.setattr(sys, "stdout", sink)
    sqlite = sqlite_memory()
    if sqlite is not None:
        sqlite[1]()  # the mark reset to what SQLite holds now
        sqlite_before = sqlite[0]()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    instance_cmds.list_(provider=None, show_all=False, status=None, mine=False,
                        json_output=True)
    traced = tracemalloc.get_traced_memory()[1] - before
    return traced, sink.size, sqlite[1]() - sqlite_before if sqlite is not None else None


def held_per_byte_printed(tmp_path, monkeypatch, known: bool,
                          big: int = 3000) -> tuple[float, float | None]:
    """What one more machine costs at the peak, against what it adds to the
    output: measured as the growth between two sizes, so what any listing
    costs once (validators built, modules, a page in flight) cancels out.
    First what Python allocates (tracemalloc), then what SQLite does."""
    tracemalloc.start()
    try:
        peaks_of_list_json(50, tmp_path, monkeypatch, known)  # warm: one-time costs
        small, small_out, small_sql = peaks_of_list_json(600, tmp_path, monkeypatch, known)
        large, large_out, sql = peaks_of_list_json(big, tmp_path, monkeypatch, known)
    finally:
        tracemalloc.stop()
    assert large_out > 4 * small_out
    return (large - small) / (large_out - small_out), None \
        if sql is None or small_sql is None else (sql - small_sql) / (large_out - small_out)


def test_list_json_holds_memory_in_proportion_to_a_page_not_to_the_listing(
        tmp_path, monkeypatch):
    """A first listing: every machine is new to the ledger, so every one has a
    row to write when the listing ends (one transaction), and those rows are
    most of what is left per machine. The whole reply, every model and the
    whole text held at once cost about nine and a half bytes per byte printed;
    streamed, with every machine's latest row kept and a provider's first
    page held to the end of its listing, 1.8; now about 1.1."""
    per_byte, _ = held_per_byte_printed(tmp_path, monkeypatch, known=False)
    assert per_byte < 1.4, f"{per_byte:.1f} bytes held per byte printed"


def test_a_listing_the_ledger_knows_keeps_about_an_id_per_machine(tmp_path, monkeypatch):
    """The ledger has seen every machine: nothing changed, nothing to write.
    What the listing keeps per machine until it ends (and the memo after) is
    what it compares of the machine's latest row, shared by most machines,
    under the machine's id: about a tenth of what each machine prints. With
    each machine's latest row kept (and a provider's first page held to the
    end of its listing), over one byte per byte printed.

    Nor do SQLite's page caches (the cost ledger's connection; the sandbox's
    own, which runs in this process) grow with it: each page of a listing
    reads its own rows once, so a cache kept across pages would only fill up
    (to SQLite's default 2 MiB a connection) with pages not read again. Its
    high-water mark grew by about a third of a byte per byte printed between
    600 and 6,000 machines with the default caches, under a tenth with the
    listing's small ones (tracemalloc sees none of SQLite's allocations)."""
    per_byte, sqlite_per_byte = held_per_byte_printed(tmp_path, monkeypatch, known=True,
                                                      big=6000)
    assert per_byte < 0.4, f"{per_byte:.2f} bytes held per byte printed"
    if sqlite_per_byte is not None:  # None: the library does not export its figures
        assert sqlite_per_byte < 0.2, \
            f"SQLite's high-water mark {sqlite_per_byte:.2f} bytes per byte printed"


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
