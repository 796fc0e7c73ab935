"""Group commit (safety/group_commit.py): writes that arrive while a group
commits wait and are committed together, each caller released only once its
own write is committed; a write that raises is undone alone."""

from __future__ import annotations

import threading
import time

import pytest

from gpucloud.safety import group_commit
from gpucloud.safety.journal import Journal, _shared


def _journal(tmp_path) -> tuple[Journal, list[str]]:
    journal = Journal(tmp_path / "state.sqlite")
    journal.all()
    statements: list[str] = []
    conn = _shared(journal.path).conn
    assert conn is not None
    conn.set_trace_callback(statements.append)
    return journal, statements


def _intent(journal: Journal, launch_id: str) -> None:
    journal.record_intent(launch_id=launch_id, provider="sandbox", instance_type="t",
                          region="r", name=None, price_per_hour="1", shutdown_at=None)


def _commits(statements: list[str]) -> int:
    return sum(1 for s in statements if s.strip().upper() == "COMMIT")


def _wait_for(condition) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.001)


def test_writes_arriving_during_a_commit_are_committed_together(tmp_path):
    journal, statements = _journal(tmp_path)
    group = group_commit.for_journal(journal)
    inside = threading.Event()
    release = threading.Event()

    def first() -> None:
        _intent(journal, "gc-first")
        inside.set()
        release.wait(10)

    threads = [threading.Thread(target=group.run, args=(first,))]
    threads[0].start()
    inside.wait(10)
    for i in range(7):
        thread = threading.Thread(target=group.run,
                                  args=(lambda i=i: _intent(journal, f"gc-{i}"),))
        thread.start()
        threads.append(thread)
    _wait_for(lambda: len(group._waiting) == 7)
    release.set()
    for thread in threads:
        thread.join(10)
    assert _commits(statements) == 2  # the first alone, then the seven together
    assert len(journal.all()) == 8


def test_a_write_that_raises_is_undone_alone_and_raised_to_its_caller(tmp_path):
    journal, _ = _journal(tmp_path)
    group = group_commit.for_journal(journal)
    inside = threading.Event()
    release = threading.Event()
    raised: list[BaseException] = []

    def first() -> None:
        _intent(journal, "gc-first")
        inside.set()
        release.wait(10)

    def refused() -> None:
        _intent(journal, "gc-refused")
        raise ValueError("over the budget")

    def run_refused() -> None:
        try:
            group.run(refused)
        except ValueError as exc:
            raised.append(exc)

    threads = [threading.Thread(target=group.run, args=(first,))]
    threads[0].start()
    inside.wait(10)
    threads.append(threading.Thread(target=run_refused))
    threads.append(threading.Thread(target=group.run,
                                    args=(lambda: _intent(journal, "gc-kept"),)))
    for thread in threads[1:]:
        thread.start()
    _wait_for(lambda: len(group._waiting) == 2)
    release.set()
    for thread in threads:
        thread.join(10)
    assert [str(e) for e in raised] == ["over the budget"]
    assert sorted(r.launch_id for r in journal.all()) == ["gc-first", "gc-kept"]


def test_a_lone_write_that_raises_leaves_nothing(tmp_path):
    journal, _ = _journal(tmp_path)

    def refused() -> None:
        _intent(journal, "gc-refused")
        raise ValueError("over the budget")

    with pytest.raises(ValueError):
        group_commit.for_journal(journal).run(refused)
    assert journal.all() == []
    group_commit.for_journal(journal).run(lambda: _intent(journal, "gc-next"))
    assert [r.launch_id for r in journal.all()] == ["gc-next"]


def test_a_write_with_slack_waits_for_company_within_it(tmp_path):
    """Writes whose callers wait anyway (their create's rate-limit slot) are
    gathered for part of that wait: two arriving within it share one commit."""
    journal, statements = _journal(tmp_path)
    group = group_commit.for_journal(journal)
    first = threading.Thread(target=group.run,
                             args=(lambda: _intent(journal, "gc-a"),),
                             kwargs={"slack": 60.0 / group_commit.SHARE})
    first.start()
    _wait_for(lambda: group._leading)
    group.run(lambda: _intent(journal, "gc-b"))  # no slack: the group commits now
    first.join(10)
    assert _commits(statements) == 1
    assert len(journal.all()) == 2


def test_a_write_from_an_event_loop_never_waits_for_company(tmp_path):
    """AsyncClient's launches are tasks of one thread: a write that waited for
    others would stop the loop (and them) for its whole slack. With a slack of
    an hour, the write still commits at once."""
    import asyncio

    journal, statements = _journal(tmp_path)
    group = group_commit.for_journal(journal)
    out: list[str] = []

    async def write() -> None:
        group.run(lambda: _intent(journal, "gc-async"), slack=3600.0)
        out.append("committed")

    worker = threading.Thread(target=asyncio.run, args=(write(),), daemon=True)
    worker.start()
    worker.join(30)
    assert out == ["committed"], "the write waited for company inside the event loop"
    assert _commits(statements) == 1
    assert [r.launch_id for r in journal.all()] == ["gc-async"]
