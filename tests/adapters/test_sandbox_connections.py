"""The simulated cloud keeps its SQLite connections between requests (closing
the last one checkpoints the write-ahead log: milliseconds of disk work per
request that would be charged to the client measuring it), and still reads a
file that was replaced under it afresh."""

from __future__ import annotations

import sqlite3
from contextlib import closing

from gpucloud.providers.sandbox.server import SandboxCloud
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    Env,
    _no_sandbox_env,
    catalog,
    clock,
)


def test_requests_reuse_the_clouds_connections(tmp_path, catalog, clock, monkeypatch):
    env = Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)
    opened: list[object] = []
    real = SandboxCloud._connect

    def connect(self):
        opened.append(self)
        return real(self)

    monkeypatch.setattr(SandboxCloud, "_connect", connect)
    for n in range(10):
        env.create(launch_id=f"L-{n}")
        assert env.raw("GET", "/v1/instances").status_code == 200
    assert len(opened) <= 1  # one request at a time: one connection, kept


def test_a_file_replaced_under_the_cloud_is_read_afresh(tmp_path, catalog, clock):
    busy = Env(tmp_path / "busy.sqlite", catalog, clock, capacity=100)
    for n in range(3):
        busy.create(launch_id=f"L-{n}")
    empty = Env(tmp_path / "empty.sqlite", catalog, clock, capacity=100)
    assert len(empty.raw("GET", "/v1/instances").json()["data"]) == 0
    # A whole copy (SQLite's backup: the write-ahead log's part included),
    # closed so that the file alone holds it.
    with closing(sqlite3.connect(tmp_path / "busy.sqlite")) as source, \
            closing(sqlite3.connect(tmp_path / "copy.sqlite")) as copy:
        source.backup(copy)
    # Replaced whole: a write-ahead-logged database is its file, -wal and -shm.
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"empty.sqlite{suffix}").unlink(missing_ok=True)
    (tmp_path / "copy.sqlite").replace(tmp_path / "empty.sqlite")
    assert len(empty.raw("GET", "/v1/instances").json()["data"]) == 3
