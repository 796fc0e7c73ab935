"""Group commit: the journal writes of many threads in one transaction.

A batch launches from many threads, and each launch writes the journal twice
on its way: the intent (with its budget admission) before its create is sent,
the id the create replied after. A commit of its own for each is most of the
journal's cost of a launch. Instead every such write goes through the home's
``GroupCommit``:

* the first thread to arrive leads: it takes every write waiting, runs them in
  order in ONE exclusive transaction of the state database
  (``Journal.immediate``, BEGIN IMMEDIATE) and commits once;
* the writes that arrive while it does wait; when it is done the first of
  them leads the next group, with all the others waiting by then;
* each caller returns only once the transaction holding its write has
  committed (durability is as with a commit of its own: an intent is on disk
  before its create is sent), or raises what its write raised.

A write waits for company only as long as its caller has to wait anyway:
``slack``, the seconds before its next request could go (a launch's create
waits for its slot of the provider's rate limit, ``Limiter.backlog``). The
leader commits when ``SHARE`` of the smallest slack of its group has passed, or when
``MOST`` writes have gathered, whichever is first. A write with no slack (a
lone create, a provider with no rate to wait for) commits at once, so it is
as fast as before; a batch paced by its provider's rate commits one
transaction per many launches, at no cost to its pace. A write from a thread
running an asyncio event loop (AsyncClient) never waits: the launches that
could join it are tasks of that loop, which stands still while it waits.
This is the classic group commit of database logs (PostgreSQL's
``commit_delay``, InnoDB's binlog group commit): many waiting records, one
flush.

A write that raises something other than a database error (a budget
refusal) is undone alone (SAVEPOINT) and handed back to its caller; the rest
of the group commits. A database error fails the whole group (it is rolled
back), and every write of it gets the StateError. The budget stays exact:
each admission reads the figures inside the same transaction, after the
writes before it in the group (SQLite shows a transaction its own rows), and
BEGIN IMMEDIATE keeps every other process out until the commit.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from gpucloud.errors import StateError

if TYPE_CHECKING:
    from gpucloud.safety.journal import Journal

T = TypeVar("T")

# The most writes one transaction takes: a bound on what one commit holds up.
MOST = 64
# The share of its slack a write may wait for others. Small: the launches
# waiting here are not booked in the rate limiter meanwhile, so a long wait
# leaves it idle; measured on the batch sweep, half the slack cost more wall
# time at 500/s than the commits it saved, a tenth groups tens of writes at
# 500 ms (bench/README.md).
SHARE = 0.1


def _in_event_loop() -> bool:
    """Whether an asyncio event loop runs in this thread (AsyncClient): while
    this thread waits for company, its loop (and every other launch) stands."""
    asyncio = sys.modules.get("asyncio")  # a sync client never imports it
    return asyncio is not None and asyncio._get_running_loop() is not None


class _Write(Generic[T]):
    __slots__ = ("write", "by", "woken", "done", "result", "error")

    def __init__(self, write: Callable[[], T], by: float) -> None:
        self.write = write
        self.by = by  # when its group should be committed at the latest
        self.woken = threading.Event()
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None


class GroupCommit:
    """The group committer of one state database in this process (``for_journal``)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._lock = threading.Condition(threading.Lock())
        self._waiting: list[_Write[object]] = []
        self._leading = False
        # Counted for tests and the bench: transactions committed, writes in them.
        self.groups = 0
        self.writes = 0

    def run(self, write: Callable[[], T], slack: float = 0.0) -> T:
        """``write()`` (journal calls, which join the group's transaction) once
        committed; its result, or what it raised. ``slack``: seconds the caller
        would wait anyway after it (see the module docstring)."""
        if slack > 0 and _in_event_loop():
            slack = 0.0  # the other writers are tasks of this thread: none can come
        entry: _Write[T] = _Write(write, time.monotonic() + SHARE * max(0.0, slack))
        with self._lock:
            self._waiting.append(entry)  # type: ignore[arg-type]
            lead = not self._leading
            self._leading = True
            if not lead:
                self._lock.notify()  # a leader gathering may have enough now
        if not lead:
            entry.woken.wait()
        if not entry.done:  # leading: from the start, or handed the lead
            self._lead()
        if entry.error is not None:
            raise entry.error
        return entry.result  # type: ignore[return-value]

    def _lead(self) -> None:
        with self._lock:
            while len(self._waiting) < MOST:
                wait = min(e.by for e in self._waiting) - time.monotonic()
                if wait <= 0:
                    break
                self._lock.wait(wait)
            group, self._waiting = self._waiting[:MOST], self._waiting[MOST:]
        failure: BaseException | None = None
        try:
            self._commit(group)
        except _Undone:
            pass  # a lone write that raised: rolled back, its error is its own
        except StateError as exc:
            failure = exc
        except BaseException:  # an interrupt on the leading thread
            failure = StateError("a journal write was interrupted before it was committed",
                                 path=self.journal.where, hint="nothing of it was sent; retry")
            raise
        finally:
            with self._lock:
                for entry in group:
                    if failure is not None:
                        entry.error, entry.result = failure, None
                    entry.done = True
                following = self._waiting[0] if self._waiting else None
                if following is None:
                    self._leading = False
            for entry in group:
                entry.woken.set()
            if following is not None:
                following.woken.set()  # it leads the writes waiting now

    def _commit(self, group: list[_Write[object]]) -> None:
        alone = len(group) == 1
        with self.journal.immediate() as conn:
            for entry in group:
                if not alone:
                    conn.execute("SAVEPOINT grouped")
                try:
                    entry.result = entry.write()
                except (*self.journal.db_errors, OSError, StateError):
                    raise  # the transaction is not to be trusted: all of it goes
                except Exception as exc:  # handed back to its caller
                    entry.error = exc
                    if alone:
                        raise _Undone from exc  # the transaction is rolled back
                    conn.execute("ROLLBACK TO grouped")
                if not alone:
                    conn.execute("RELEASE grouped")
        self.groups += 1
        self.writes += len(group)


class _Undone(Exception):
    """A group of one whose write raised: its transaction is rolled back whole."""


_BY_PATH: dict[tuple[int, str], GroupCommit] = {}
_BY_PATH_LOCK = threading.Lock()


def for_journal(journal: Journal) -> GroupCommit:
    """This process's group committer of the journal's file (one per file, as its
    connection is: keyed by process too, so a forked child never waits on a
    leader of its parent's)."""
    key = (os.getpid(), journal.where)
    found = _BY_PATH.get(key)
    if found is None:
        with _BY_PATH_LOCK:
            found = _BY_PATH.setdefault(key, GroupCommit(journal))
    return found


__all__ = ["GroupCommit", "for_journal"]
