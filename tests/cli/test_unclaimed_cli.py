"""`gpucloud reconcile --orphans [--delete]` and the unclaimed report of
`gpucloud reap --watch`, each in a process of its own. Two homes share one
simulated cloud: machines launched from "the other laptop" are unclaimed
here; machines without gpucloud's launch id (or with a look-alike) are
foreign and never touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from gpucloud.catalog.bundled import load_catalogs
from gpucloud.providers.sandbox.adapter import LAUNCH_LABEL
from gpucloud.providers.sandbox.server import SandboxCloud, SandboxTransport
from tests.cli._subprocess import gpucloud as run_gpucloud


@pytest.fixture
def homes(tmp_path, monkeypatch):
    cloud = tmp_path / "cloud.sqlite"
    extra = {"GPUCLOUD_SANDBOX_DB": str(cloud), "GPUCLOUD_SANDBOX_NATIVE_TIMER": "0",
             "GPUCLOUD_SANDBOX_BOOT_SECONDS": "0", "GPUCLOUD_SANDBOX_CAPACITY": "20"}
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "20")  # for `labelled`, in this process
    laptop, other = tmp_path / "laptop", tmp_path / "other-laptop"
    laptop.mkdir()
    other.mkdir()

    def here(*args: str) -> subprocess.CompletedProcess[str]:
        return run_gpucloud(*args, home=laptop, **extra)

    def there(*args: str) -> subprocess.CompletedProcess[str]:
        return run_gpucloud(*args, home=other, **extra)

    return here, there, cloud, laptop, extra


def created(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["instance"]["ref"])


def create(run) -> str:
    return created(run("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
                       "--yes", "--json"))


def labelled(cloud: Path, label: str | None) -> str:
    """A machine made through the simulated cloud's API by someone else."""
    sim = SandboxCloud(cloud, {}, catalog=load_catalogs()["sandbox"])
    with httpx.Client(transport=SandboxTransport(sim),
                      base_url="https://sandbox.gpucloud.invalid") as http:
        response = http.post("/v1/instances", json={
            "instance_type": "sim.8xH100", "region": "sim-east-1", "name": "not-ours",
            "labels": {} if label is None else {LAUNCH_LABEL: label}})
    assert response.status_code == 201, response.text
    return f"sandbox/{response.json()['id']}"


def alive(run) -> set[str]:
    doc = json.loads(run("list", "--provider", "sandbox", "--json").stdout)
    return {i["ref"] for i in doc["instances"]
            if i["status"] not in ("terminating", "terminated")}


def test_orphans_lists_unclaimed_machines_with_age_and_cost(homes):
    here, there, cloud, _, _ = homes
    theirs = create(there)
    ours = create(here)
    unmarked = labelled(cloud, None)
    result = here("reconcile", "--orphans", "--json")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    doc = json.loads(result.stdout)
    [found] = doc["unclaimed"]
    assert found["instance"]["ref"] == theirs
    assert found["age_seconds"] >= 0 and found["price_source"] == "instance"
    assert found["cost_so_far"] is not None and doc["unclaimed_cost"] == found["cost_so_far"]
    assert doc["terminated"] == [] and doc["not_deleted"] == []
    assert {theirs, ours, unmarked} <= alive(here)
    text = here("reconcile", "--orphans")
    assert text.returncode == 0, text.stderr
    assert f"unclaimed {theirs} (launch id gc-" in text.stdout and " so far" in text.stdout
    assert "1 unclaimed machine(s)" in text.stderr and "--orphans --delete" in text.stderr


def test_delete_under_json_needs_yes_and_does_nothing_without(homes):
    here, there, _, _, _ = homes
    theirs = create(there)
    refused = here("reconcile", "--orphans", "--delete", "--json")
    assert refused.returncode == 8 and refused.stderr == ""
    assert json.loads(refused.stdout)["error"]["code"] == "confirmation_required"
    assert theirs in alive(here)


def test_delete_without_orphans_is_a_usage_error(homes):
    here, _, _, _, _ = homes
    result = here("reconcile", "--delete")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == "error: --delete goes with --orphans"
    assert "Traceback" not in result.stderr


def test_delete_yes_ends_unclaimed_machines_and_never_a_foreign_one(homes):
    here, there, cloud, _, _ = homes
    theirs = create(there)
    ours = create(here)
    foreign = [labelled(cloud, None), labelled(cloud, ""), labelled(cloud, "gc-1"),
               labelled(cloud, "GC-0123456789")]
    result = here("reconcile", "--orphans", "--delete", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [i["ref"] for i in doc["terminated"]] == [theirs]
    assert {ours, *foreign} <= alive(here) and theirs not in alive(here)


def test_a_delete_that_fails_exits_10_and_names_the_machine(homes):
    here, there, _, _, extra = homes
    theirs = create(there)
    extra.update(GPUCLOUD_SANDBOX_FAIL_5XX="1", GPUCLOUD_SANDBOX_FAIL_ON="delete")
    result = here("reconcile", "--orphans", "--delete", "--yes", "--json")
    assert result.returncode == 10, result.stderr
    doc = json.loads(result.stdout)
    assert [i["ref"] for i in doc["not_deleted"]] == [theirs]
    assert any("still bills" in w for w in doc["warnings"])


def test_reap_watch_reports_unclaimed_machines_and_never_ends_them(homes):
    here, there, _, laptop, extra = homes
    theirs = create(there)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLOUD_")}
    env.update(extra, GPUCLOUD_HOME=str(laptop / "gpucloud"), HOME=str(laptop),
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring", PYTHONUNBUFFERED="1")
    reaper = subprocess.Popen([sys.executable, "-m", "gpucloud", "reap", "--watch", "1s",
                               "--json"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(reaper.stdout), daemon=True)
    reader.start()
    try:
        started = time.monotonic()
        while len(lines) < 2 and time.monotonic() - started < 60 and reaper.poll() is None:
            time.sleep(0.05)
    finally:
        reaper.send_signal(signal.SIGINT)
        try:
            reaper.wait(timeout=20)
        except subprocess.TimeoutExpired:
            reaper.kill()
        reader.join(timeout=5)
    passes = [json.loads(line) for line in lines[:2]]
    assert len(passes) == 2, reaper.stderr.read()
    for report in passes:
        assert [u["instance"]["ref"] for u in report["unclaimed"]] == [theirs]
        assert report["actions"] == []
    assert theirs in alive(here)
    once = here("reap", "--json")  # a single pass reports nothing of the kind
    assert once.returncode == 0 and json.loads(once.stdout)["unclaimed"] == []
