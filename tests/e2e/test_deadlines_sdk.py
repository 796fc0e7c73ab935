"""extend and reap through the SDK, sync and async, against the sandbox with
its own timer off: the provider's copy of the deadline is what moves."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from gpucloud import AsyncClient, Client, SpecError


@pytest.fixture(autouse=True)
def no_native_timer(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_NATIVE_TIMER", "0")


def test_extend_moves_the_providers_copy_and_the_reaper_honours_it():
    with Client(providers=["sandbox"]) as client:
        machine = client.create(gpu="h100", count=1, auto_shutdown="1s")
        extended = client.extend(machine, by="1h")
        assert extended.shutdown_at == machine.shutdown_at + timedelta(hours=1)
        time.sleep(1.2)
        report = client.reap()
        assert report.actions == () and report.checked == 1
        with Client(providers=["sandbox"]) as other:  # another process reads the cloud
            assert other.get(machine.ref).shutdown_at == extended.shutdown_at


def test_extend_refuses_an_ended_machine():
    with Client(providers=["sandbox"]) as client:
        machine = client.create(gpu="h100", count=1, auto_shutdown="1h")
        client.delete(machine)
        with pytest.raises(SpecError, match="nothing to extend"):
            client.extend(machine, by="1h")


def test_async_extend_and_reap():
    async def run():
        async with AsyncClient(providers=["sandbox"]) as client:
            soon = await client.create(gpu="h100", count=1, auto_shutdown="1s")
            later = await client.create(gpu="h100", count=1, auto_shutdown="1h")
            moved = await client.extend(later, until=later.shutdown_at + timedelta(hours=1))
            await asyncio.sleep(1.2)
            report = await client.reap()
            return soon, moved, report
    soon, moved, report = asyncio.run(run())
    assert moved.shutdown_at is not None
    assert [(a.action, a.instance.id) for a in report.actions] == [("terminated", soon.id)]


def _statements_while(action):
    """The SQL the state file's connection runs during `action` (traced)."""
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import _shared

    statements: list[str] = []
    connection = _shared(state_db_path()).connection()
    assert connection is not None
    connection.set_trace_callback(statements.append)
    try:
        action()
    finally:
        connection.set_trace_callback(None)
    return [s.strip().upper() for s in statements]


def _commits_while(action):
    """The write transactions begun or committed during `action`."""
    return sum(1 for s in _statements_while(action) if s.startswith(("BEGIN", "COMMIT")))


def _commit_count(action):
    """The COMMITs the state file's connection runs during `action`."""
    return sum(1 for s in _statements_while(action) if s.startswith("COMMIT"))


@pytest.mark.parametrize("overdue", [2, 12])
def test_a_reap_pass_records_its_terminations_in_a_fixed_number_of_commits(overdue):
    # One pass writes the journal and the ledger for all it ended at once: the
    # commits do not grow with the number of machines reaped.
    with Client(providers=["sandbox"]) as client:
        made = client.create_many(gpu="h100", count=1, n=overdue, auto_shutdown="1s")
        assert len(made.instances) == overdue
        time.sleep(1.2)
        client.list()  # the ledger has seen them: the reap's listing writes nothing new
        reports = []
        commits = _commits_while(lambda: reports.append(client.reap()))
    assert [a.action for a in reports[0].actions] == ["terminated"] * overdue
    assert commits <= 6, commits


def _ended_in_state(machines):
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import Journal
    from gpucloud.safety.ledger import Ledger

    journal = Journal(state_db_path())
    statuses = {journal.by_instance("sandbox", m.id).status for m in machines}
    latest = Ledger(journal).latest([("sandbox", m.id) for m in machines])
    return statuses, {row.state for row in latest.values()}, len(latest)


@pytest.mark.parametrize("overdue", [2, 12])
def test_a_reap_pass_writes_the_journal_and_the_ledger_in_one_transaction(overdue):
    with Client(providers=["sandbox"]) as client:
        made = client.create_many(gpu="h100", count=1, n=overdue, auto_shutdown="1s").instances
        time.sleep(1.2)
        client.list()  # the ledger has seen them: the reap's listing writes nothing new
        reports = []
        commits = _commit_count(lambda: reports.append(client.reap()))
    assert [a.action for a in reports[0].actions] == ["terminated"] * overdue
    assert commits == 1
    assert _ended_in_state(made) == ({"deleted"}, {"ended"}, overdue)


def test_delete_all_writes_the_journal_and_the_ledger_once_per_pass(monkeypatch):
    from gpucloud.core import housekeeping

    monkeypatch.setattr(housekeeping, "DELETE_CHUNK", 2)  # five machines: three chunks
    with Client(providers=["sandbox"]) as client:
        made = client.create_many(gpu="h100", count=1, n=5, auto_shutdown="1h").instances
        client.list()
        deleted = []
        commits = _commit_count(lambda: deleted.extend(client.delete_all()))
    assert sorted(m.id for m in deleted) == sorted(m.id for m in made)
    assert commits == 1
    assert _ended_in_state(made) == ({"deleted"}, {"ended"}, 5)


def test_an_interrupted_delete_all_records_the_chunks_it_finished(monkeypatch):
    # Ctrl-C during the second chunk: the first chunk's machines are gone, and
    # the journal and the ledger say so before the interrupt propagates.
    from gpucloud.core import housekeeping
    from gpucloud.providers.sandbox.server import SandboxCloud

    monkeypatch.setattr(housekeeping, "DELETE_CHUNK", 2)
    with Client(providers=["sandbox"]) as client:
        made = client.create_many(gpu="h100", count=1, n=5, auto_shutdown="1h").instances
        order = client.list()
        listed = [m for m in order if m.id in {x.id for x in made}]
        doomed = listed[2].id  # the second chunk's first machine
        real = SandboxCloud.handle

        def handle(self, request):
            if request.method == "DELETE" and request.url.path.endswith(doomed):
                raise KeyboardInterrupt
            return real(self, request)

        monkeypatch.setattr(SandboxCloud, "handle", handle)
        with pytest.raises(KeyboardInterrupt):
            client.delete_all()
    assert _ended_in_state(listed[:2]) == ({"deleted"}, {"ended"}, 2)
    assert _ended_in_state(listed[4:])[0] == {"delivered"}  # never sent


def test_delete_all_records_what_it_deleted_even_when_one_delete_blows_up(monkeypatch):
    # A bug (not an API error) in one delete's answer is raised, but the machines
    # the pass did delete are in the journal and the ledger first: they are gone.
    from gpucloud.config.settings import state_db_path
    from gpucloud.providers.sandbox.server import SandboxCloud
    from gpucloud.safety.journal import Journal
    from gpucloud.safety.ledger import Ledger

    with Client(providers=["sandbox"]) as client:
        made = client.create_many(gpu="h100", count=1, n=3, auto_shutdown="1h").instances
        doomed = made[1].id
        real = SandboxCloud.handle

        def handle(self, request):
            response = real(self, request)
            if request.method == "DELETE" and request.url.path.endswith(doomed):
                raise RuntimeError("a bug in reading the answer")  # the delete was done
            return response

        monkeypatch.setattr(SandboxCloud, "handle", handle)
        with pytest.raises(RuntimeError):
            client.delete_all()
    journal = Journal(state_db_path())
    others = [m for m in made if m.id != doomed]
    assert [journal.by_instance("sandbox", m.id).status for m in others] == ["deleted"] * 2
    latest = Ledger(journal).latest([("sandbox", m.id) for m in others])
    assert {row.state for row in latest.values()} == {"ended"}
