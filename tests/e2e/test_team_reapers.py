"""Three reapers, one team database: every machine is deleted exactly once,
and a killed leader is replaced within two intervals.

Three ``gpucloud reap --watch 1s`` processes with their own homes (three
boxes) and the team's PostgreSQL database (a real server) elect their leader
there by default: a session advisory lock. One simulated cloud holds 100
machines falling due over several seconds; its own timer is off, so only a
reaper ends a machine, and every process logs each request it sends
(GPUCLOUD_SANDBOX_REQUEST_LOG), which is where the DELETEs are counted.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gpucloud import Client
from gpucloud.safety.store_postgres import PostgresStore
from gpucloud.safety.team_lease import PURPOSE
from tests.support.postgres import pg_url, postgres_server  # noqa: F401

INTERVAL = 1.0
MACHINES = 100


def _deleted(cloud: Path) -> dict[str, bool]:
    with sqlite3.connect(cloud) as db:
        return {r[0]: r[1] is not None for r in db.execute("SELECT id, deleted_us FROM instances")}


def _wait(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_three_reapers_on_a_team_database_delete_each_machine_once_and_hand_over(
        tmp_path, monkeypatch, pg_url):
    cloud = tmp_path / "cloud.sqlite"
    requests = tmp_path / "sandbox-requests.log"
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", str(cloud))
    monkeypatch.setenv("GPUCLOUD_SANDBOX_NATIVE_TIMER", "0")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", str(MACHINES))
    monkeypatch.setenv("GPUCLOUD_STATE_URL", pg_url)
    store = PostgresStore(pg_url)
    with Client(providers=["sandbox"]) as laptop:
        made = [laptop.create(gpu="h100", count=1, provider="sandbox",
                              until=datetime.now(timezone.utc)
                              + timedelta(seconds=4 + 6 * k / MACHINES))
                for k in range(MACHINES)]
    procs: dict[str, subprocess.Popen[str]] = {}
    for n in range(3):
        env = {**os.environ, "GPUCLOUD_HOME": str(tmp_path / f"box-{n}"),
               "GPUCLOUD_SANDBOX_REQUEST_LOG": str(requests), "GPUCLOUD_USER": f"reaper{n}"}
        procs[f"reaper{n}"] = subprocess.Popen(
            [sys.executable, "-m", "gpucloud", "reap", "--watch", f"{INTERVAL:g}s",
             "--provider", "sandbox", "--json"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: store.holder(PURPOSE) is not None, 60)
        # Kill the leader while machines are falling due: no release, its
        # session ends with its socket, and a standby must act.
        assert _wait(lambda: any(_deleted(cloud).values()), 30)
        first = store.holder(PURPOSE)
        assert first is not None
        killed = procs[first.split("@")[0]]
        killed_at = time.monotonic()
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=10)
        assert _wait(lambda: store.holder(PURPOSE) not in (None, first), 10)
        after_kill = time.monotonic() - killed_at
        second = store.holder(PURPOSE)
        assert _wait(lambda: all(_deleted(cloud).values()), 60), \
            sum(not d for d in _deleted(cloud).values())
        time.sleep(2 * INTERVAL)  # a late second delete would show in the log now
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        errors = {name: proc.communicate(timeout=30)[1] for name, proc in procs.items()}
        store.release()
    deletes = Counter(line.split()[1].rsplit("/", 1)[1]
                      for line in requests.read_text().splitlines()
                      if line.startswith("DELETE /v1/instances/"))
    twice = {i: n for i, n in deletes.items() if n != 1}
    print(f"\n3 reapers, {MACHINES} machines: DELETE requests {sum(deletes.values())} for "
          f"{len(deletes)} machines (more than one: {len(twice)}); leader {first} SIGKILLed, "
          f"{second} led after {after_kill:.2f} s (limit {2 * INTERVAL:g} s)")
    assert {m.id for m in made} == set(deletes)
    assert twice == {}
    assert after_kill <= 2 * INTERVAL
    assert second is not None and second.split("@")[0] != first.split("@")[0]
    for name, err in errors.items():
        assert "Traceback" not in err, (name, err)
