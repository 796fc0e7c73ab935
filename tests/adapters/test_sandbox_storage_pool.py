"""The sandbox serves requests from a pool of SQLite connections, as a web
service does: requests do not each open (parse the schema) and close (fold
the write-ahead log back) the file, and what one cloud object or another
process writes is seen at once all the same."""

from __future__ import annotations

import os
import sqlite3
import threading

import httpx
import pytest

from gpucloud.providers.sandbox.server import SandboxCloud, SandboxTransport
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    BASE,
    Env,
    _no_sandbox_env,
    catalog,
    clock,
)


@pytest.fixture
def opened(monkeypatch):
    """Every connection a SandboxCloud opens (the pid it was opened in)."""
    seen: list[int] = []
    real = SandboxCloud._connect

    def connect(self):
        seen.append(os.getpid())
        return real(self)

    monkeypatch.setattr(SandboxCloud, "_connect", connect)
    return seen


def call(cloud: SandboxCloud, method: str, path: str, **kw) -> httpx.Response:
    with httpx.Client(transport=SandboxTransport(cloud), base_url=BASE) as http:
        return http.request(method, path, **kw)


def test_a_run_of_requests_reuses_one_connection(tmp_path, catalog, clock, opened):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)
    made = [env.create(launch_id=f"L-{n}") for n in range(10)]
    opened.clear()
    for machine in made:  # the reaper's two requests per machine, one after another
        assert call(env.cloud, "GET", f"/v1/instances/{machine.id}").status_code == 200
        assert call(env.cloud, "DELETE", f"/v1/instances/{machine.id}").status_code == 202
    assert call(env.cloud, "GET", "/v1/instances/sbx-missing").status_code == 404
    assert call(env.cloud, "DELETE", "/v1/instances/sbx-missing").status_code == 404
    assert call(env.cloud, "GET", "/v1/instances").status_code == 200
    assert opened == []  # the connection the creates used served them all


def test_concurrent_requests_open_at_most_one_connection_each(tmp_path, catalog, clock,
                                                              opened):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)
    made = [env.create(launch_id=f"L-{n}") for n in range(24)]
    opened.clear()
    barrier = threading.Barrier(4)

    def worker(part):
        barrier.wait()
        for machine in part:
            call(env.cloud, "DELETE", f"/v1/instances/{machine.id}")

    threads = [threading.Thread(target=worker, args=(made[n::4],)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(opened) <= 4
    listed = call(env.cloud, "GET", "/v1/instances").json()["data"]
    assert {m["status"] for m in listed} == {"terminating"}


def test_a_failed_write_leaves_no_transaction_on_the_pooled_connection(tmp_path, catalog,
                                                                        clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=1)
    env.create(launch_id="L-1")
    # 409 inside the write transaction, then 404 inside another: both roll back.
    assert call(env.cloud, "POST", "/v1/instances", json={
        "instance_type": "sim.1xH100", "region": "sim-east-1", "name": "x"}).status_code == 409
    assert call(env.cloud, "DELETE", "/v1/instances/sbx-missing").status_code == 404
    other = sqlite3.connect(env.cloud.db_path, timeout=0)  # the write lock is free
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()


def test_what_another_cloud_object_writes_is_read_at_once(tmp_path, catalog, clock):
    first = Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)
    second = Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)  # another "process"
    machine = first.create(launch_id="L-1")
    assert call(first.cloud, "GET", f"/v1/instances/{machine.id}").json()["status"] == "pending"
    assert call(second.cloud, "DELETE", f"/v1/instances/{machine.id}").status_code == 202
    assert call(first.cloud, "GET", f"/v1/instances/{machine.id}").json()["status"] \
        == "terminating"


def test_close_folds_the_write_ahead_log_back(tmp_path, catalog, clock):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)
    env.create(launch_id="L-1")
    env.cloud.close()
    wal = tmp_path / "c.sqlite-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    assert len(call(env.cloud, "GET", "/v1/instances").json()["data"]) == 1  # reopens


@pytest.fixture
def statements(monkeypatch):
    seen: list[str] = []
    real = SandboxCloud._connect

    def connect(self):
        db = real(self)
        db.set_trace_callback(seen.append)
        return db

    monkeypatch.setattr(SandboxCloud, "_connect", connect)
    return seen


@pytest.mark.parametrize("method, body", [
    ("DELETE", None),
    ("PATCH", {"shutdown_at": "2027-01-16T00:00:00Z"}),  # extend
])
def test_a_write_reads_the_machine_once_and_answers_what_a_read_would(
        tmp_path, catalog, clock, statements, method, body):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)
    machine = env.create(launch_id="L-1")
    statements.clear()
    answer = call(env.cloud, method, f"/v1/instances/{machine.id}", json=body)
    assert answer.status_code in (200, 202)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 1, reads  # the machine's row, read once under the write lock
    assert answer.json() == call(env.cloud, "GET", f"/v1/instances/{machine.id}").json()


def test_concurrent_writers_queue_in_the_process_not_in_sqlites_busy_wait(
        tmp_path, catalog, clock, monkeypatch):
    # With no busy wait at all, a write meeting another thread's write lock
    # would fail ("database is locked": a 503); queued, every delete lands.
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=1000)
    made = [env.create(launch_id=f"L-{n}") for n in range(160)]
    real = SandboxCloud._connect

    def impatient(self):
        db = real(self)
        db.execute("PRAGMA busy_timeout = 0")
        return db

    monkeypatch.setattr(SandboxCloud, "_connect", impatient)
    env.cloud.close()  # the pooled connections reopen, impatient
    barrier = threading.Barrier(8)
    codes: list[int] = []

    def worker(part):
        barrier.wait()
        codes.extend(call(env.cloud, "DELETE", f"/v1/instances/{m.id}").status_code
                     for m in part)

    threads = [threading.Thread(target=worker, args=(made[n::8],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(set(codes)) == [202] and len(codes) == 160


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_opens_its_own_connections(tmp_path, catalog, clock, opened):
    from gpucloud.providers.sandbox import storage

    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)
    machine = env.create(launch_id="L-1")
    # Held by a parent's thread at the fork (here: this one), the pools' lock
    # would never be released in the child.
    storage._POOLS_LOCK.acquire()
    try:
        child = os.fork()
        if child == 0:  # the child: its own connection, the parent's left alone
            ok = (call(env.cloud, "GET", f"/v1/instances/{machine.id}").status_code == 200
                  and os.getpid() in opened)
            os._exit(0 if ok else 1)
    finally:
        storage._POOLS_LOCK.release()
    for _ in range(200):  # a hung child fails the test rather than the run
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        threading.Event().wait(0.05)
    else:
        os.kill(child, 9)
        os.waitpid(child, 0)
        pytest.fail("the forked child hung on a lock its parent held")
    assert os.waitstatus_to_exitcode(status) == 0
    assert call(env.cloud, "GET", f"/v1/instances/{machine.id}").status_code == 200



def _open_cloud(path: str, barrier: object, failures: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    try:
        SandboxCloud(path)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        failures.put(repr(exc))  # type: ignore[attr-defined]


def test_processes_opening_one_new_cloud_file_at_once_all_open_it(tmp_path):
    """A new file's switch to the write-ahead log needs it alone, and SQLite
    answers "locked" at once (no busy wait) while another process has it open:
    every process of a burst (CLI commands started together on a fresh
    sandbox) must still open it. (Before, about one process in twenty of such
    a burst failed with "database is locked".)"""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")  # no fork of this threaded process
    failures = spawn.Queue()
    for round_ in range(10):
        barrier = spawn.Barrier(6)
        procs = [spawn.Process(target=_open_cloud,
                               args=(str(tmp_path / f"cloud{round_}.db"), barrier, failures))
                 for _ in range(6)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(60)
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert found == []
