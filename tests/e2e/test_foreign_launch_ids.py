"""Machines whose launch-id label is blank or not of gpucloud's form ("gc-1",
"gc-<html>", upper-case hex, the wrong length) are foreign, whatever the
journal holds: `gpucloud reconcile` (even --terminate-orphans) neither adopts
nor terminates them and `gpucloud reap` never touches them, overdue or not.
The CLI runs in a process of its own; the machines are made through the
simulated cloud's HTTP API with the label given verbatim, as anyone with the
account could label a machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from gpucloud.providers.sandbox.server import SandboxCloud
from gpucloud.providers.sandbox.adapter import LAUNCH_LABEL
from gpucloud.providers.sandbox.server import SandboxTransport
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.settings import sandbox_db_path, state_db_path
from gpucloud.safety.journal import Journal

# Blank, cut short, an error page's word, upper-case hex, an upper-case prefix,
# one digit too many or too few, padded.
LOOK_ALIKES = ["", "gc-1", "gc-<html>", "gc-ABCDEF0123", "GC-0123456789",
               "gc-0123456789a", "gc-012345678", " gc-0123456789", "gc-0123456789\n"]


@pytest.fixture(autouse=True)
def no_native_timer(monkeypatch):
    # Only gpucloud ends machines here: an overdue machine stays until the reaper acts.
    monkeypatch.setenv("GPUCLOUD_SANDBOX_NATIVE_TIMER", "0")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", "20")


def gpucloud(*args: str) -> subprocess.CompletedProcess[str]:
    src = Path(__file__).resolve().parents[2] / "src"
    return subprocess.run([sys.executable, "-m", "gpucloud", *args], capture_output=True,
                          text=True, env=os.environ | {"PYTHONPATH": str(src)}, timeout=120)


def labelled_machine(label: str, shutdown_at: datetime) -> str:
    """POST /v1/instances to the simulated cloud with this launch-id label; its id."""
    cloud = SandboxCloud(sandbox_db_path(), {},  # knobs from the environment above
                         catalog=load_catalogs()["sandbox"])
    with httpx.Client(transport=SandboxTransport(cloud),
                      base_url="https://sandbox.gpucloud.invalid") as http:
        response = http.post("/v1/instances", json={
            "instance_type": "sim.8xH100", "region": "sim-east-1", "name": "someone-else",
            "labels": {LAUNCH_LABEL: label},
            "shutdown_at": shutdown_at.isoformat().replace("+00:00", "Z")})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def journal_launch(launch_id: str, status: str) -> None:
    """A journal that knows the launch id: an unresolved intent would be
    adopted, a failed one terminated as an orphan, were the id well-formed."""
    journal = Journal(state_db_path())
    journal.record_intent(launch_id=launch_id, provider="sandbox", instance_type="sim.8xH100",
                          region="sim-east-1", name="someone-else", price_per_hour="1",
                          shutdown_at=None, ssh_key_path=None)
    if status != "intent":
        journal.mark(launch_id, status)


def alive(idents) -> set[str]:
    """Those of these machines still running (not ending, not ended)."""
    doc = json.loads(gpucloud("list", "--provider", "sandbox", "--json").stdout)
    return {i["id"] for i in doc["instances"] if i["id"] in set(idents)
            and i["status"] not in ("terminating", "terminated")}


@pytest.mark.parametrize("status", ["intent", "failed"])
def test_reconcile_neither_adopts_nor_terminates_a_look_alike(status):
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    made = {label: labelled_machine(label, past) for label in LOOK_ALIKES}
    for label in LOOK_ALIKES:
        journal_launch(label, status)
    result = gpucloud("reconcile", "--terminate-orphans", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["adopted"] == [] and report["terminated"] == [] and report["orphans"] == []
    # Reported as someone else's (a blank label may count as no launch id at all).
    foreign = {m["id"] for m in report["foreign"]}
    assert {ident for label, ident in made.items() if label} <= foreign <= set(made.values())
    journal = Journal(state_db_path())
    for label in LOOK_ALIKES:
        record = journal.get(label)
        assert record is not None and record.instance_id is None, label
    assert alive(made.values()) == set(made.values())


def test_reap_never_touches_an_overdue_look_alike():
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    made = {label: labelled_machine(label, past) for label in LOOK_ALIKES}
    for label in LOOK_ALIKES:
        journal_launch(label, "failed")
    ours = labelled_machine("gc-0123456789", past)  # well-formed and overdue: reaped
    result = gpucloud("reap", "--json")
    assert result.returncode == 0, result.stderr
    assert [a["instance"]["id"] for a in json.loads(result.stdout)["actions"]] == [ours]
    assert alive([*made.values(), ours]) == set(made.values())
