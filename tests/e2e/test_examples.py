"""Every example runs, as a user would run it, in a fresh GPUCLOUD_HOME."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLOUD_")}
    env["GPUCLOUD_HOME"] = os.environ["GPUCLOUD_HOME"]
    env["HOME"] = os.environ["HOME"]
    env["GPUCLOUD_SANDBOX_BOOT_SECONDS"] = "0"
    return subprocess.run([sys.executable, str(EXAMPLES / name)], env=env, capture_output=True,
                          text=True, timeout=120)


def test_every_example_is_tested():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == [
        "batch_provision.py", "cheapest_h100.py", "quickstart.py"]


def test_quickstart():
    result = run("quickstart.py")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "(simulated)" in out and "72 hours would cost $1434.24 USD" in out
    assert "is running" in out and "deleted sandbox/" in out
    assert "now terminat" in out


def test_cheapest_h100():
    result = run("cheapest_h100.py")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("provider")
    assert "catalog" in lines[1] and "cheapest for 72 h:" in lines[-1]


@pytest.mark.parametrize("name", ["quickstart.py", "cheapest_h100.py"])
def test_examples_leave_nothing_running(name):
    assert run(name).returncode == 0
    result = subprocess.run(
        [sys.executable, "-m", "gpucloud", "list", "--provider", "sandbox", "--json"],
        capture_output=True, text=True, env={**os.environ})
    assert result.returncode == 0, result.stdout
    running = [i for i in json.loads(result.stdout)["instances"]
               if i["status"] in ("pending", "running")]
    assert running == []


def test_batch_provision():
    result = run("batch_provision.py")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "6 made, 0 failed" in out and out.count(": created sandbox/") == 6
    assert "run again with the same key: 6 adopted, 0 created" in out
    assert "deleted 6 machines" in out
