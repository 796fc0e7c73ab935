"""A state database that fails after the launch was sent (the machine exists,
its outcome cannot be recorded) is a warning naming `gpucloud reconcile`, on
stderr and in --json `warnings`: never a quiet success.

The failure is real, not injected: while the simulated cloud holds its
answer to the create (HANG_AFTER_CREATE), the test moves the state database
away and puts a directory in its place, so every later write of the create
process fails in SQLite itself ("unable to open database file"). Tests run
as root here, where taking write permission away would not stop a write.
Putting the database back, `gpucloud reconcile` adopts the machine."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .test_reconcile_sigkill import LABEL, cloud_rows, environment, gpucloud

CREATE = [sys.executable, "-m", "gpucloud", "create", "--gpu", "h100", "--count", "8",
          "--provider", "sandbox", "--auto-shutdown", "1h", "--yes"]
FILES = ("state.sqlite", "state.sqlite-wal", "state.sqlite-shm")


def create_losing_state(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str],
                                                              dict[str, str], Path]:
    env = environment(tmp_path) | {"GPUCLOUD_SANDBOX_HANG_AFTER_CREATE": "2"}
    home = Path(env["GPUCLOUD_HOME"])
    proc = subprocess.Popen([*CREATE, *extra], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not cloud_rows(env):  # the machine exists; its answer is held back
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the create never reached the cloud"
        time.sleep(0.02)
    aside = tmp_path / "aside"
    aside.mkdir()
    for name in FILES:
        if (home / name).exists():
            (home / name).rename(aside / name)
    (home / "state.sqlite").mkdir()  # no database can be opened at this path now
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), env, aside


def put_back(env: dict[str, str], aside: Path) -> None:
    home = Path(env["GPUCLOUD_HOME"])
    (home / "state.sqlite").rmdir()
    for name in FILES:
        if (aside / name).exists():
            (aside / name).rename(home / name)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file moves")
def test_json_names_reconcile_in_warnings_and_reconcile_then_adopts(tmp_path):
    result, env, aside = create_losing_state(tmp_path, "--json")
    assert result.returncode == 0, result.stderr  # the machine was made: a script must see it
    doc = json.loads(result.stdout)
    ref = doc["instance"]["ref"]
    about = [w for w in doc["warnings"] if ref in w]
    print(f"\nwarnings: {about}")
    assert about and all("gpucloud reconcile" in w for w in about), doc["warnings"]
    assert any("not journaled as delivered" in w for w in about)
    assert any("cost ledger" in w for w in about)
    put_back(env, aside)
    report = gpucloud(env, "reconcile", "--json")
    assert report.returncode == 0, report.stderr
    [adopted] = json.loads(report.stdout)["adopted"]
    assert adopted["launch_id"] == cloud_rows(env)[0][LABEL]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file moves")
def test_text_output_warns_on_stderr(tmp_path):
    result, _, _ = create_losing_state(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "created sandbox/" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    print(f"\nstderr warnings: {warnings}")
    assert any("gpucloud reconcile" in w and "not journaled as delivered" in w
               for w in warnings), result.stderr
