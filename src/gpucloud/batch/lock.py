"""One run at a time per batch key.

Two runs of one key at once would both see the same missing slots and both
launch them: duplicate billed machines. So a run holds an OS lock on a file
per key (``batches/<sha256(key)[:32]>.lock`` beside the journal) from before
it plans until it and every launch it started have ended (``held``; each
launch ``pinned``), and a second run of the key fails fast with
BatchBusyError, before planning or launching anything.

The kernel drops the lock when its process dies: a SIGKILLed run never leaves
its key locked, so the rerun that ``--batch`` exists for is never refused.
The file's content (pid, start time, key as JSON; nothing secret) only words
the message: whether the key is busy comes from the lock alone, so stale or
damaged content cannot lock a key or unlock one.

POSIX: ``flock(LOCK_EX | LOCK_NB)``. flock locks belong to an open file
description, so a second ``open`` of the file in the same process conflicts
too; a process-wide set of held keys catches that case first, to say "this
process" rather than name our own pid as "another process".
Windows (best effort, not exercised by the test suite): ``msvcrt.locking`` of
one byte far past the content, so that a refused run can still read the
content; Windows releases it when the process ends.

In team mode (a team database holds the journal) two computers must not run
one key at once either: the key is a session advisory lock in that database,
held on a connection of its own, which the server releases when the holder's
process dies, as the kernel does a flock.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Union

from gpucloud.errors import BatchBusyError, SpecError, StateError, option

if TYPE_CHECKING:
    from gpucloud.safety.journal import Journal
    from gpucloud.safety.store_postgres import AdvisoryLock, PostgresStore

# Windows locks byte ranges, and a locked range cannot be read by another
# handle: lock a byte well past the JSON so the refused run can read it.
_WIN_OFFSET = 1 << 20
_GUARD = threading.Lock()


class _Lease:
    """A key held by this process. `users`: the run, plus each of its launches
    still going: a sync run interrupted (Ctrl-C) returns at once while its
    launches in flight finish in their threads, and the key stays held until
    the last of them has (a rerun then sees every machine they made).
    `fd`: the lock file's descriptor; `team`: the team database's lock instead."""

    def __init__(self, fd: int, team: AdvisoryLock | None = None) -> None:
        self.fd, self.team, self.users = fd, team, 1


# Lock file path -> its lease; None while the lock is being taken.
_HELD: dict[str, _Lease | None] = {}


def _after_fork_in_child() -> None:
    """A forked child (multiprocessing) inherits the lock files' descriptors and
    with them the locks, which would outlive a parent that is killed. It runs
    none of the parent's batches: close them (the parent's own stay locked)."""
    global _GUARD
    _GUARD = threading.Lock()  # another thread may have held it at the fork
    for lease in _HELD.values():
        if lease is not None and lease.team is None:
            try:
                os.close(lease.fd)
            except OSError:
                pass
    # A team lock's connection is the parent's: dropped here, never closed
    # (psycopg ends a session only in the process that opened it).
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def lock_path(directory: Path, key: str) -> Path:
    """The lock file of a key: hashed, so any key is a safe file name."""
    import hashlib

    return directory / "batches" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.lock"


# Where a key is locked: a journal (its store decides), or the directory of
# the lock files itself.
Place = Union["Journal", Path]


def _team(where: Place) -> PostgresStore | None:
    if isinstance(where, Path) or where.team is None:
        return None
    from gpucloud.safety.store_postgres import PostgresStore

    assert isinstance(where.team, PostgresStore)
    return where.team


def _directory(where: Place) -> Path:
    return where if isinstance(where, Path) else where.path.parent


def _ident(where: Place, key: str) -> str:
    team = _team(where)
    if team is not None:
        return f"{team.shown}#batch:{key}"
    return os.path.abspath(lock_path(_directory(where), key))


@contextmanager
def held(where: Place, key: str) -> Iterator[None]:
    """Hold batch `key` for the body, or raise BatchBusyError at once: in the
    journal's store (a lock file beside the local file, or the team database),
    or in the lock directory given."""
    if not isinstance(key, str):
        raise SpecError(f"a batch key is a string, got {key!r}")
    ident = _ident(where, key)
    with _GUARD:
        if ident in _HELD:
            raise BatchBusyError(
                f"batch {key!r} is already being run in this process (another thread "
                "or client)", hint=_hint(key))
        _HELD[ident] = None
    try:
        lease = _take(where, key)
    except BaseException:
        with _GUARD:
            del _HELD[ident]
        raise
    with _GUARD:
        _HELD[ident] = lease
    try:
        yield
    finally:
        _drop(ident, lease)


def _take(where: Place, key: str) -> _Lease:
    store = _team(where)
    if store is not None:
        team = store.try_advisory(f"batch:{key}")
        if team is None:
            raise BatchBusyError(f"batch {key!r} is being run by another gpucloud process "
                                 f"of the team ({store.shown})", hint=_hint(key))
        return _Lease(-1, team)
    path = lock_path(_directory(where), key)
    fd = _open(path)
    try:
        if not _lock(fd, path):
            raise BatchBusyError(_busy_message(key, _holder(fd, key)), hint=_hint(key))
        _write(fd, key)
    except BaseException:
        os.close(fd)
        raise
    return _Lease(fd)


def probe(where: Place, key: str) -> None:
    """Raise BatchBusyError now if another run holds `key` (takes the lock and
    gives it back): for callers that plan and ask before create_many takes it
    for good, so a refused run has not printed a plan or asked anything."""
    with held(where, key):
        pass


@contextmanager
def pinned(where: Place, key: str) -> Iterator[bool]:
    """Keep batch `key` held while the body (one launch of the batch) runs, even
    if its run has returned meanwhile; yields whether the key is held. A key
    this process does not hold pins nothing and yields False: a batch without a
    key, or a keyed run that has already let go (interrupted before this launch
    began: it must not launch, a rerun may be taking its slot)."""
    ident = _ident(where, key)
    with _GUARD:
        lease = _HELD.get(ident)
        if lease is not None:
            lease.users += 1
    if lease is not None and lease.team is not None and not lease.team.alive():
        # The team lock's session broke (a restart, a dropped connection): the
        # server has freed the key, another computer may be running it now.
        _drop(ident, lease)
        yield False
        return
    try:
        yield lease is not None
    finally:
        if lease is not None:
            _drop(ident, lease)


def _drop(ident: str, lease: _Lease) -> None:
    # Unlocked before it leaves _HELD: no moment in which another thread of
    # this process passes the in-process check and meets our own flock.
    with _GUARD:
        lease.users -= 1
        if lease.users:
            return
        if lease.team is not None:
            try:
                lease.team.release()
            finally:
                del _HELD[ident]
            return
        try:
            _unlock(lease.fd)
        finally:
            os.close(lease.fd)
            del _HELD[ident]


def _hint(key: str) -> str:
    import shlex

    return (f"wait for it to finish (or stop it); running the same "
            f"{option('batch', '--batch', repr(key), shlex.quote(key))} afterwards resumes it")


def _busy_message(key: str, holder: tuple[int, str] | None) -> str:
    who = f" (pid {holder[0]}, started {holder[1]})" if holder else ""
    return f"batch {key!r} is being run by another gpucloud process{who}"


def _open(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise _state_error(path, f"cannot open the batch lock file: {exc.strerror or exc}")


def _state_error(path: Path, detail: str) -> StateError:
    return StateError(f"{detail} ({path})", path=path,
                      hint=f"make {path.parent} writable, or point GPUCLOUD_HOME at a "
                           "writable local directory")


def _lock(fd: int, path: Path) -> bool:
    """True when this run now holds the lock; False when another holds it."""
    try:
        if os.name == "nt":  # pragma: no cover - Windows
            import msvcrt

            os.lseek(fd, _WIN_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except PermissionError:  # msvcrt's "locked by another process" (EACCES)
        if os.name == "nt":  # pragma: no cover - Windows
            return False
        raise _state_error(path, "cannot lock the batch lock file") from None
    except OSError as exc:
        if os.name == "nt":  # pragma: no cover - Windows: EDEADLOCK after its retries
            return False
        # No silent fallback: running unlocked is what makes duplicate machines.
        raise _state_error(path, f"cannot lock the batch lock file: {exc.strerror or exc}")
    return True


def _unlock(fd: int) -> None:
    # Cleared while still held, so a finished run leaves no pid behind; the
    # file itself stays: unlinking a lock file lets two runs lock two inodes.
    try:
        os.ftruncate(fd, 0)
    except OSError:
        pass  # the content only words messages; the lock is what matters
    if os.name == "nt":  # pragma: no cover - Windows
        import msvcrt

        os.lseek(fd, _WIN_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
    # POSIX: closing the descriptor (the caller does) releases the flock.


def _write(fd: int, key: str) -> None:
    from datetime import datetime, timezone

    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    data = json.dumps({"pid": os.getpid(), "started": started, "key": key}).encode()
    try:
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
    except OSError:
        pass  # a refused run then says "another process" without a pid


def _holder(fd: int, key: str) -> tuple[int, str] | None:
    """(pid, start time) the holder wrote, when the content is whole and ours."""
    import re

    try:
        os.lseek(fd, 0, os.SEEK_SET)
        doc = json.loads(os.read(fd, 4096).decode())
    except (OSError, ValueError):  # empty (just created), damaged, not UTF-8
        return None
    if not isinstance(doc, dict) or doc.get("key") != key:
        return None
    pid, started = doc.get("pid"), doc.get("started")
    if (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0
            and isinstance(started, str)
            and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", started)):
        return pid, started
    return None
