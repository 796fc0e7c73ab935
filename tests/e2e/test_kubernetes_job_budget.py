"""Kubernetes Jobs in the monthly budget and `gpucloud costs`, end to end
against the API server emulator (tests/k8s_emulator) over real loopback HTTP.

A Job has no machine: its pods are the Job's, and machine listings leave
them out. Each delivered Job is counted as itself, from its submission to its
deadline (max_runtime), until gpucloud sees it end: without that, every
submit was checked against a month that left out every Job before it."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
import yaml

pytest.importorskip("gpucloud.providers.kubernetes")

from typer.testing import CliRunner

from gpucloud import BudgetExceededError, Client
from gpucloud.config.settings import config_dir, state_db_path
from gpucloud.safety.costs import month_bounds
from gpucloud.safety.ledger import ENDED, RUNNING, Ledger
from gpucloud.safety.journal import Journal, utcnow

from .test_kubernetes_e2e import IMAGE, clock, emulator, kubeconfig  # noqa: F401 (fixtures)

# $2.50 per H100-hour (README, Kubernetes prices): a 1-GPU job of max_runtime
# 2h commits $5; the budget fits two, not three.
SETTINGS = '[kubernetes.prices]\nH100 = "2.50"\n[budget]\nmonthly = "12"\n'
PER_JOB = Decimal(5)


@pytest.fixture(autouse=True)
def not_at_the_month_end():
    if month_bounds(None, utcnow())[2] - utcnow() < timedelta(hours=3):
        pytest.skip("the month ends within 3 h: a job's month share is less than 2 h")


@pytest.fixture
def settings(kubeconfig):
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "config.toml").write_text(SETTINGS)


def job_file(tmp_path, name: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "image": IMAGE, "command": ["python", "train.py"],
        "resources": {"gpu": "h100", "gpu_count": 1}, "max_runtime": "2h"}))
    return str(path)


def cli(*args: str):
    from gpucloud.cli import app

    return CliRunner().invoke(app, [*args, "--json"])


def submit(tmp_path, name: str):
    return cli("submit", job_file(tmp_path, name), "--provider", "kubernetes", "--yes")


def costs() -> dict:
    result = cli("costs")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def ledger_state(ref: str) -> str:
    provider, job_id = ref.split("/", 1)
    rows = Ledger(Journal(state_db_path())).latest([(provider, job_id)])
    return rows[(provider, job_id)].state


def test_a_third_job_over_the_budget_is_refused_and_costs_lists_the_jobs(
        settings, emulator, tmp_path):
    first, second = submit(tmp_path, "one"), submit(tmp_path, "two")
    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    refs = [json.loads(r.stdout)["job"]["ref"] for r in (first, second)]

    third = submit(tmp_path, "three")
    assert third.exit_code == 7, third.output
    error = json.loads(third.stdout)["error"]
    assert "over the monthly budget $12.00" in error["message"]
    assert "this request $5.00" in error["message"]
    assert len([k for k in emulator.cluster.jobs]) == 2  # nothing more was sent

    report = costs()
    lines = {line["key"]: line for line in report["lines"]}
    assert set(lines) == set(refs)
    for ref in refs:
        assert lines[ref]["status"] == "running"
        assert Decimal(lines[ref]["price_per_hour"]) == Decimal("2.5")
        assert PER_JOB - Decimal("0.02") < Decimal(lines[ref]["total"]) <= PER_JOB

    # The SDK's own admission refuses it too.
    with Client(providers=["kubernetes"]) as client, pytest.raises(BudgetExceededError):
        client.submit(yaml.safe_load(open(job_file(tmp_path, "four"))))

    # A cancelled job stops counting: the third fits now.
    cancelled = cli("jobs", "cancel", refs[0], "--yes")
    assert cancelled.exit_code == 0, cancelled.output
    assert ledger_state(refs[0]) == ENDED
    again = submit(tmp_path, "three")
    assert again.exit_code == 0, again.output


def test_a_job_seen_finished_stops_counting_and_a_machine_listing_never_ends_one(
        settings, emulator, clock, tmp_path, monkeypatch):
    emulator.knobs.job_run_seconds = 60
    done = json.loads(submit(tmp_path, "short").stdout)["job"]["ref"]
    clock.advance(10)  # its pod starts: it runs 60 s from there
    emulator.cluster.tick()
    emulator.knobs.job_run_seconds = 10_000
    running = json.loads(submit(tmp_path, "long").stdout)["job"]["ref"]
    assert ledger_state(done) == RUNNING

    # A machine listing an hour on: Job pods are not machines, and a listing
    # that does not show a Job must not take it for a machine that has gone.
    later = utcnow() + timedelta(hours=1)
    with monkeypatch.context() as patched:
        patched.setattr("gpucloud.safety.ledger.utcnow", lambda: later)
        listed = cli("list")
    assert listed.exit_code == 0, listed.output
    assert ledger_state(done) == RUNNING and ledger_state(running) == RUNNING

    clock.advance(300)  # the short job has run its 60 s
    emulator.cluster.tick()
    report = costs()  # lists the jobs: the finished one ends there
    assert ledger_state(done) == ENDED and ledger_state(running) == RUNNING
    lines = {line["key"]: line for line in report["lines"]}
    assert lines[done]["status"] == "ended" and Decimal(lines[done]["projected"]) == 0
    assert lines[running]["status"] == "running"
