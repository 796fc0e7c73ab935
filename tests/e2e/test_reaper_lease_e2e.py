"""Three reapers, one Lease: every machine ends exactly once, one reaper acts at a time.

Three ``gpucloud reap --watch 1s --lease kubernetes`` processes (separate
GPUCLOUD_HOMEs: three boxes) share one sandbox cloud (GPUCLOUD_SANDBOX_DB)
whose own timer is off, so only a reaper ends a machine, and elect their
leader through a coordination.k8s.io/v1 Lease on the Kubernetes API emulator
(real HTTP on 127.0.0.1). Machines fall due over several seconds while the
leader is SIGKILLed (no release: a standby must wait out the lease, and act
within two intervals) and its successor is SIGTERMed (it releases: the last
standby acts at once). The sandbox logs every request of every process
(GPUCLOUD_SANDBOX_REQUEST_LOG): each machine gets exactly one DELETE.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import kubernetes_validate

from gpucloud import Client
from tests.k8s_emulator import KubeEmulator, write_kubeconfig

INTERVAL = 1.0
MACHINES = 24
LEASE = "gpucloud-reaper"


class Reaper:
    def __init__(self, name: str, env: dict[str, str], json_output: bool) -> None:
        self.name = name
        args = [sys.executable, "-m", "gpucloud", "reap", "--watch", f"{INTERVAL:g}s",
                "--lease", "kubernetes", "--provider", "sandbox"]
        self.proc = subprocess.Popen(args + (["--json"] if json_output else []), env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[tuple[float, str]] = []
        self.err: list[str] = []
        self._threads = [threading.Thread(target=self._read, args=(self.proc.stdout, True),
                                          daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, False),
                                          daemon=True)]
        for thread in self._threads:
            thread.start()

    def _read(self, stream, out: bool) -> None:
        for line in stream:
            if out:
                self.out.append((time.monotonic(), line))
            else:
                self.err.append(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        for thread in self._threads:
            thread.join(timeout=5)
        return code

    def passes(self) -> list[dict]:
        """One JSON line per interval (the report or a standby line), less the
        error line of the Ctrl-C that stopped it (exit 130)."""
        lines = [json.loads(line) for _, line in self.out if line.strip()]
        return [line for line in lines
                if (line.get("error") or {}).get("code") != "interrupted"]


def _holder(emulator: KubeEmulator) -> str:
    with emulator.cluster.lock:
        lease = emulator.cluster.leases.get(("default", LEASE))
        return (lease or {}).get("spec", {}).get("holderIdentity") or ""


def _wait(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _deleted(cloud: Path) -> dict[str, bool]:
    with sqlite3.connect(cloud) as db:
        return {r[0]: r[1] is not None for r in db.execute("SELECT id, deleted_us FROM instances")}


def _taken_after(emulator: KubeEmulator, since: float, not_by: str) -> tuple[float, str] | None:
    """The first Lease write after `since` that gave it to a holder other than `not_by`."""
    with emulator.cluster.lock:
        for at, _, _, spec in emulator.cluster.lease_writes:
            holder = spec.get("holderIdentity") or ""
            if at >= since and holder and holder != not_by:
                return at, holder
    return None


def test_reapers_elected_by_a_lease_end_each_machine_once_and_hand_over(tmp_path, monkeypatch):
    cloud = tmp_path / "cloud.sqlite"
    requests = tmp_path / "sandbox-requests.log"
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", str(cloud))
    monkeypatch.setenv("GPUCLOUD_SANDBOX_NATIVE_TIMER", "0")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", str(MACHINES))
    monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path / "laptop"))
    with KubeEmulator() as emulator:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", emulator)
        reapers = []
        for n in range(3):
            env = {**os.environ, "GPUCLOUD_HOME": str(tmp_path / f"box-{n}"),
                   "KUBECONFIG": str(kubeconfig), "GPUCLOUD_SANDBOX_REQUEST_LOG": str(requests),
                   "GPUCLOUD_USER": f"reaper{n}", "PYTHONUNBUFFERED": "1"}
            reapers.append(Reaper(f"reaper{n}", env, json_output=n < 2))
        by_pid = {r.pid: r for r in reapers}
        try:
            assert _wait(lambda: all(r.out or r.err for r in reapers), 60), \
                [r.err for r in reapers]
            assert _wait(lambda: _holder(emulator) != "", 10)
            with Client(providers=["sandbox"]) as laptop:
                # Due over the next seconds: before, during and after each handover.
                made = [laptop.create(gpu="h100", count=1, provider="sandbox",
                                      until=datetime.now(timezone.utc)
                                      + timedelta(seconds=2 + 6 * k / MACHINES))
                        for k in range(MACHINES)]

            # SIGKILL the leader: no release, a standby waits the lease out.
            time.sleep(2.0)
            first = _holder(emulator)
            killed = by_pid[int(first.rsplit(":", 1)[1])]
            killed_at = time.monotonic()
            killed.proc.send_signal(signal.SIGKILL)
            assert _wait(lambda: _taken_after(emulator, killed_at, first) is not None, 10)
            taken_at, second = _taken_after(emulator, killed_at, first)
            after_kill = taken_at - killed_at

            # SIGTERM its successor: it releases, the last standby takes over at once.
            time.sleep(1.5)
            successor = by_pid[int(second.rsplit(":", 1)[1])]
            termed_at = time.monotonic()
            successor.proc.send_signal(signal.SIGTERM)
            assert successor.proc.wait(timeout=10) == 0
            released = [at for at, _, _, spec in emulator.cluster.lease_writes
                        if at >= termed_at and spec.get("holderIdentity") == ""]
            assert released, "SIGTERM did not release the Lease"
            assert _wait(lambda: _taken_after(emulator, termed_at, second) is not None, 10)
            third_at, third = _taken_after(emulator, termed_at, second)
            after_term = third_at - termed_at

            assert _wait(lambda: all(_deleted(cloud).values()), 30), _deleted(cloud)
            time.sleep(1.5)  # a late second delete would show in the log now
        finally:
            codes = {r.name: r.stop() for r in reapers}
        writes = list(emulator.cluster.lease_writes)
        sent = [e["body"] for e in emulator.requests
                if "/leases" in e["path"] and e["method"] in ("POST", "PUT")]

    print(f"\nlease handover: SIGKILL of the leader -> a standby holds the Lease after "
          f"{after_kill:.2f} s (limit {2 * INTERVAL:g} s); SIGTERM -> released after "
          f"{released[0] - termed_at:.2f} s, the last standby holds it after "
          f"{after_term:.2f} s")
    deletes = Counter(line.split()[1].rsplit("/", 1)[1]
                      for line in requests.read_text().splitlines()
                      if line.startswith("DELETE /v1/instances/"))
    assert {m.id for m in made} <= set(deletes)
    assert {i: n for i, n in deletes.items() if n != 1} == {}, deletes
    assert after_kill <= 2 * INTERVAL
    assert after_term <= INTERVAL
    assert {first, second, third} == {f"reaper{n}@{_host()}:{r.pid}"
                                      for n, r in enumerate(reapers)}
    # One holder at a time: the Lease changed hands only after a release, or
    # after its holder had not renewed it for leaseDurationSeconds.
    last_renewal: dict[str, float] = {}
    holder = ""
    for at, _, _, spec in writes:
        new = spec.get("holderIdentity") or ""
        if new and holder and new != holder:
            assert at - last_renewal[holder] >= spec["leaseDurationSeconds"], (holder, new)
        if new:
            last_renewal[new] = at
        holder = new
    # Each pass a reaper reported, it reported as the leader, and passes of
    # the JSON reapers name the Lease; a standby said so.
    for reaper in reapers[:2]:
        for line in reaper.passes():
            if line.get("standby"):
                assert line["leader"] != line["identity"]
            else:
                assert line["leader"].startswith(f"{reaper.name}@") and line["lease"] == \
                    "kubernetes"
    assert any(line.get("standby") for r in reapers[:2] for line in r.passes())
    # The text reaper: a standby line on stderr whenever it did not hold the
    # Lease at its first try (someone else created it).
    initial = writes[0][3]["holderIdentity"]
    if not initial.startswith("reaper2@"):
        assert any(" reap: standing by: " in line and "leads" in line
                   for line in reapers[2].err), reapers[2].err
    assert all("Traceback" not in line for r in reapers for line in r.err)
    assert codes[killed.name] == -signal.SIGKILL and codes[successor.name] == 0
    # The last holder, stopped by Ctrl-C (exit 130), released the Lease too.
    last = next(r for r in reapers if r.pid == int(third.rsplit(":", 1)[1]))
    assert codes[last.name] == 130, (codes, last.err[-5:])
    assert writes[-1][3]["holderIdentity"] == "", writes[-3:]
    for body in sent:
        kubernetes_validate.validate(body, "1.30.0", strict=True)


def _host() -> str:
    import socket

    return socket.gethostname()
