"""A batch of 200 creates under injected faults, killed with SIGKILL part-way and
restarted with the same --batch key, then `gpucloud reconcile`.

The sandbox drops the connection after committing some creates, answers 503
after committing others, and answers plain 503s and 429s. Afterwards: no
machine leaked (every live machine is journaled delivered for its launch and
reported by the restarted batch), none duplicated (one live machine per launch
id and per batch slot), every slot accounted for (one machine, or a recorded
failure). The faults are counted where the sandbox decides them (a log the
driver below appends to from inside the simulated cloud), not assumed."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from .test_reconcile_sigkill import LABEL, cloud_rows, environment

N = 200
KEY = "fault-suite"
# Runs the CLI in this process with the sandbox's fault decisions logged to a
# file, one line each, written before the decision takes effect: a SIGKILL
# loses none of them.
DRIVER = """
import os, sys
from gpucloud.providers.sandbox import server, transport
from gpucloud.errors import GpuCloudError

LOG = os.open(os.environ["FAULT_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
note = lambda kind: os.write(LOG, (kind + "\\n").encode())
roll = server.SandboxCloud._roll_failure

def logged_roll(self, op):
    try:
        after = roll(self, op)
    except server.ApiError as err:
        note(f"{err.status}:{op}")
        raise
    if after:
        note("after_create")
    return after

drop = transport.SandboxTransport._after

def logged_drop(self, request, response):
    try:
        return drop(self, request, response)
    except Exception:
        note("drop")
        raise

server.SandboxCloud._roll_failure = logged_roll
transport.SandboxTransport._after = logged_drop
from gpucloud.cli import main
sys.argv = ["gpucloud", *sys.argv[1:]]
main()
"""
FAULTS = {"GPUCLOUD_SANDBOX_FAIL_429": "0.02", "GPUCLOUD_SANDBOX_FAIL_5XX": "0.02",
          "GPUCLOUD_SANDBOX_FAIL_AFTER_CREATE": "0.03",
          "GPUCLOUD_SANDBOX_DROP_AFTER_CREATE": "0.03",
          "GPUCLOUD_SANDBOX_FAIL_ON": "create,list", "GPUCLOUD_SANDBOX_CAPACITY": "1000"}
CREATE = ["create", "--gpu", "h100", "--count", "8", "--provider", "sandbox", "--instances",
          str(N), "--batch", KEY, "--auto-shutdown", "2h", "--yes", "--json"]


def launches(env: dict[str, str]) -> list[tuple[str, str, str | None, int | None]]:
    db = sqlite3.connect(Path(env["GPUCLOUD_HOME"]) / "state.sqlite")
    try:
        return list(db.execute("SELECT launch_id, status, instance_id, slot FROM launches"
                               " WHERE batch_key = ?", (KEY,)))
    finally:
        db.close()


def live(env: dict[str, str]) -> list[dict[str, str]]:
    path = Path(env["GPUCLOUD_SANDBOX_DB"])
    db = sqlite3.connect(path, timeout=30)
    try:
        ended = {i for (i,) in db.execute(
            "SELECT id FROM instances WHERE terminated_us IS NOT NULL OR deleted_us IS NOT NULL")}
    finally:
        db.close()
    return [r for r in cloud_rows(env) if r["id"] not in ended]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_a_faulty_killed_and_restarted_batch_leaks_nothing_and_doubles_nothing(tmp_path):
    started = time.monotonic()
    env = environment(tmp_path)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    faulty = env | FAULTS | {"FAULT_LOG": str(tmp_path / "faults.log"),
                             "GPUCLOUD_SANDBOX_SEED": "10"}
    first = subprocess.Popen([sys.executable, str(driver), *CREATE], env=faulty,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(cloud_rows(env)) < N // 3:
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the batch never got a third of the way"
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == -signal.SIGKILL
    at_kill = len(cloud_rows(env))
    unresolved_at_kill = sum(1 for _, status, _, _ in launches(env)
                             if status in ("intent", "ambiguous"))

    restart = subprocess.run([sys.executable, str(driver), *CREATE], env=faulty | {
        "GPUCLOUD_SANDBOX_SEED": "11"}, capture_output=True, text=True, timeout=120)
    assert restart.stderr == ""
    doc = json.loads(restart.stdout)
    assert restart.returncode == (doc["failures"][0]["exit_code"] if doc["failures"] else 0)
    reconciled = subprocess.run([sys.executable, "-m", "gpucloud", "reconcile", "--json"],
                                env=env, capture_output=True, text=True, timeout=60)
    assert reconciled.returncode == 0, reconciled.stdout + reconciled.stderr
    report = json.loads(reconciled.stdout)

    machines = live(env)
    journal = launches(env)
    delivered = {launch: (ident, slot) for launch, status, ident, slot in journal
                 if status == "delivered"}
    reported = {i["id"] for i in doc["instances"]}
    by_launch = Counter(m[LABEL] for m in machines)
    by_slot = Counter(delivered[m[LABEL]][1] for m in machines if m[LABEL] in delivered)
    duplicates = sum(c - 1 for c in by_launch.values()) + sum(c - 1 for c in by_slot.values())
    leaks = [m for m in machines if delivered.get(m[LABEL], (None,))[0] != m["id"]
             or m["id"] not in reported]
    failed_slots = {f["index"] for f in doc["failures"]}
    made_slots = {delivered[m[LABEL]][1] for m in machines if m[LABEL] in delivered}
    faults = Counter((tmp_path / "faults.log").read_text().split())
    print(f"\nbatch of {N}: {at_kill} machines in the cloud when SIGKILL hit, "
          f"{unresolved_at_kill} launches unresolved then; after the restart "
          f"{len(doc['instances'])} machines, {len(doc['failures'])} failures recorded; "
          f"reconcile adopted {len(report['adopted'])}, orphans {len(report['orphans'])}")
    print("injected faults: " + ", ".join(f"{k} {v}" for k, v in sorted(faults.items())))
    print(f"leaks: {len(leaks)}, duplicates: {duplicates}, "
          f"elapsed {time.monotonic() - started:.1f} s")

    # Every kind of fault really happened, during the creates.
    assert faults["drop"] and faults["after_create"] and faults["503:create"]
    assert faults["429:create"] + faults["429:list"]
    assert unresolved_at_kill >= 1  # the kill left launches to settle on restart
    assert leaks == [] and duplicates == 0
    assert made_slots | failed_slots == set(range(N)) and not made_slots & failed_slots
    assert len(machines) == len(made_slots) == len(doc["instances"])
    assert report["adopted"] == [] and report["orphans"] == []
