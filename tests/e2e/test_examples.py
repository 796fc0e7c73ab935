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


def gpucloud(*args, **env_extra):
    """The CLI as a user runs it, in a subprocess of the test's GPUCLOUD_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLOUD_")}
    env.update(GPUCLOUD_HOME=os.environ["GPUCLOUD_HOME"], HOME=os.environ["HOME"],
               GPUCLOUD_SANDBOX_BOOT_SECONDS="0", **env_extra)
    return subprocess.run([sys.executable, "-m", "gpucloud", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_multinode_train_plans_both_nodes_and_runs_on_the_sandbox():
    from decimal import Decimal

    from gpucloud.jobs.spec import load

    example = str(EXAMPLES / "multinode-train.yaml")
    spec = load(example)  # validates as a job file
    assert spec.nodes == 2 and spec.resources.gpu_count == 8
    assert [(v.name, v.size_gb, v.mount) for v in spec.volumes] == [("datasets", 1000, "/data")]
    assert spec.command[:2] == ["sh", "-c"] and "--node_rank=$NODE_RANK" in spec.command[2]

    dry = gpucloud("submit", example, "--provider", "sandbox", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)["plan"]
    assert plan["instances"] == 2
    # 2 x $19.92/h x 12 h, plus the new 1000 GB volume at the sandbox's
    # $0.07/GB-month for 12 of 730 hours ($1.15)
    assert Decimal(plan["total"]) == Decimal("479.23") <= Decimal(spec.max_cost)

    made = gpucloud("submit", example, "--provider", "sandbox", "--yes", "--json",
                    GPUCLOUD_SANDBOX_JOB_SECONDS="0.3")
    assert made.returncode == 0, made.stderr
    job = json.loads(made.stdout)["job"]
    assert job["nodes"] == 2 and len(job["instances"]) == 2
    followed = gpucloud("jobs", "logs", "-f", job["ref"])
    assert followed.returncode == 0, followed.stderr
    assert "succeeded" in followed.stderr
    nodes = {}
    for line in followed.stdout.splitlines():
        if "] env: " in line and "[node " in line:
            names = dict(p.split("=", 1) for p in line.split("] env: ", 1)[1].split())
            nodes[names["NODE_RANK"]] = names
    assert sorted(nodes) == ["0", "1"]
    assert nodes["0"]["MASTER_ADDR"] == nodes["1"]["MASTER_ADDR"] \
        == job["instances"][0]["private_ip"]
    assert nodes["0"]["WORLD_SIZE"] == "16" and nodes["0"]["NNODES"] == "2"
    listed = json.loads(gpucloud("list", "--provider", "sandbox", "--json").stdout)
    assert {i["status"] for i in listed["instances"]} <= {"terminating", "terminated"}
