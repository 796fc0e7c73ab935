"""A `gpucloud create` killed with SIGKILL after the cloud made the machine and
before the journal learnt it: `gpucloud reconcile` adopts the
machine. No duplicate (one machine carries the launch id), no leak (journaled
delivered, listed, no warning left). Real processes, the sandbox cloud."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
LABEL = "gpucloud-launch-id"  # the sandbox adapter's label for the launch id


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLOUD_")}
    env.update(HOME=os.environ["HOME"], GPUCLOUD_HOME=str(tmp_path / "home"),
               GPUCLOUD_SANDBOX_DB=str(tmp_path / "cloud" / "cloud.sqlite"),
               GPUCLOUD_SANDBOX_BOOT_SECONDS="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])))
    return env


def gpucloud(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpucloud", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def cloud_rows(env: dict[str, str]) -> list[dict[str, str]]:
    """The simulated cloud's own records: what exists, whatever any journal says."""
    path = Path(env["GPUCLOUD_SANDBOX_DB"])
    if not path.exists():
        return []
    db = sqlite3.connect(path, timeout=30)
    try:
        return [json.loads(labels) | {"id": ident} for ident, labels in
                db.execute("SELECT id, labels FROM instances").fetchall()]
    except sqlite3.OperationalError:  # the table is not there yet
        return []
    finally:
        db.close()


def journal(env: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    db = sqlite3.connect(Path(env["GPUCLOUD_HOME"]) / "state.sqlite")
    try:
        return {launch: (status, ident) for launch, status, ident in
                db.execute("SELECT launch_id, status, instance_id FROM launches")}
    finally:
        db.close()


def kill_once_the_cloud_has_it(env: dict[str, str], argv: list[str]) -> int:
    """Run `gpucloud ARGV` and SIGKILL it once the cloud has committed its
    machine, while the cloud holds its answer (the window between the create
    and its journal entry); its exit status."""
    create = subprocess.Popen(
        [sys.executable, "-m", "gpucloud", *argv],
        env=env | {"GPUCLOUD_SANDBOX_HANG_AFTER_CREATE": "60"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not cloud_rows(env):
            assert create.poll() is None, create.communicate()
            assert time.monotonic() < deadline, "the create never reached the cloud"
            time.sleep(0.05)
        create.send_signal(signal.SIGKILL)
        create.wait(timeout=30)
    finally:
        if create.poll() is None:
            create.kill()
            create.wait()
    return create.returncode


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_sigkill_between_the_create_and_its_journal_entry_is_repaired(tmp_path):
    env = environment(tmp_path)
    code = kill_once_the_cloud_has_it(env, [
        "create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
        "--auto-shutdown", "4h", "--yes", "--json"])
    assert code == -signal.SIGKILL
    [row] = cloud_rows(env)
    launch_id = row[LABEL]
    # Killed in the window: the request was sent, the outcome never journaled.
    assert journal(env)[launch_id] == ("intent", None)
    before = gpucloud(env, "list")
    assert before.returncode == 0, before.stderr
    assert launch_id in before.stderr and "gpucloud reconcile" in before.stderr

    result = gpucloud(env, "reconcile", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    report = json.loads(result.stdout)
    listed = json.loads(gpucloud(env, "list", "--json").stdout)
    rows = cloud_rows(env)
    carrying = [r for r in rows if r.get(LABEL) == launch_id]
    untracked = [r for r in rows if journal(env).get(r.get(LABEL), ("", None))[1] != r["id"]]
    print(f"\nmachines in cloud: {len(rows)}, adopted: {len(report['adopted'])}, "
          f"duplicates: {len(carrying) - 1}, leaks (not journaled delivered): {len(untracked)}, "
          f"warnings after reconcile: {len(listed['warnings'])}")

    [adopted] = report["adopted"]
    assert adopted["id"] == row["id"] and adopted["launch_id"] == launch_id
    assert adopted["shutdown_at"] is not None  # the deadline the create asked for
    assert report["failed"] == [] and report["pending"] == [] and report["orphans"] == []
    assert len(carrying) == 1  # no duplicate: nothing was re-sent
    assert journal(env)[launch_id] == ("delivered", row["id"])
    assert untracked == []  # no leak
    assert [i["ref"] for i in listed["instances"]] == [f"sandbox/{row['id']}"]
    assert listed["warnings"] == []
    # A second run finds nothing left to do.
    again = json.loads(gpucloud(env, "reconcile", "--json").stdout)
    assert again["adopted"] == [] and again["pending"] == [] and again["failed"] == []
