"""`gpucloud submit`, `jobs list|get|cancel|logs`, `schema job`: exit codes,
one JSON document under --json, and no secret on any output, --debug included."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud.cli import app

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "train-job.yaml")
HF = "hf_cli_secret_value_0123"
WANDB = "wandb-cli-secret-value-4567"


@pytest.fixture(autouse=True)
def secrets_and_speed(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", HF)
    monkeypatch.setenv("WANDB_API_KEY", WANDB)
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "0.3")


def run(*args):
    return CliRunner().invoke(app, list(args))


def test_submit_list_logs_cancel(monkeypatch):
    result = run("submit", EXAMPLE, "--provider", "sandbox", "--yes", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    job = json.loads(result.stdout)["job"]
    assert job["status"] == "queued" and job["launch_id"].startswith("gj-")
    listed = json.loads(run("jobs", "list", "--json").stdout)["jobs"]
    assert [j["ref"] for j in listed] == [job["ref"]]
    text = run("jobs", "list")
    assert "llama-finetune" in text.stdout and "(simulated)" in text.stdout
    followed = run("jobs", "logs", "-f", "llama-finetune")
    assert followed.exit_code == 0, followed.output
    assert "CHECKPOINT_DIR=/checkpoints" in followed.stdout
    assert "succeeded" in followed.stderr
    got = json.loads(run("jobs", "get", job["ref"], "--json").stdout)
    assert got["status"] == "succeeded" and got["exit_code"] == 0
    logs = json.loads(run("jobs", "logs", job["ref"], "--json", "--tail", "1").stdout)
    assert logs["lines"] == [logs["lines"][-1]] and "exited with code 0" in logs["lines"][0]

    # Long enough to be cancelled while it runs, however slow the machine (0.3 s
    # finished before the cancel on a loaded CI box).
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "60")
    second = json.loads(run("submit", EXAMPLE, "--provider", "sandbox", "--yes",
                            "--json").stdout)["job"]
    unconfirmed = run("jobs", "cancel", second["ref"], "--json")
    assert unconfirmed.exit_code == 8
    assert json.loads(unconfirmed.stdout)["error"]["code"] == "confirmation_required"
    cancelled = run("jobs", "cancel", second["ref"], "--yes", "--json")
    assert cancelled.exit_code == 0
    assert json.loads(cancelled.stdout)["job"]["status"] == "cancelled"


def test_submit_needs_confirmation_under_json_and_dry_run_sends_nothing():
    result = run("submit", EXAMPLE, "--provider", "sandbox", "--json")
    assert result.exit_code == 8
    dry = run("submit", EXAMPLE, "--provider", "sandbox", "--dry-run")
    assert dry.exit_code == 0 and "dry run: nothing was submitted" in dry.stdout
    assert "deadline:" in dry.stdout and "SANDBOX" in dry.stdout
    assert json.loads(run("jobs", "list", "--json").stdout)["jobs"] == []


def test_an_invalid_job_file_is_exit_2_naming_line_and_field(tmp_path):
    bad = tmp_path / "job.yaml"
    bad.write_text("name: t\nimage: img\nresources:\n  gpu: h1000\n")
    result = run("submit", str(bad), "--provider", "sandbox", "--yes")
    assert result.exit_code == 2
    assert f"error: {bad}:4: resources.gpu: unknown GPU 'h1000'" in result.stderr
    assert "Traceback" not in result.output
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: t\nimage: [img\n")
    result = run("submit", str(broken), "--json")
    assert result.exit_code == 2 and "not valid YAML" in json.loads(result.stdout)["error"][
        "message"]


def test_a_missing_secret_is_exit_3_naming_it(monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    result = run("submit", EXAMPLE, "--provider", "sandbox", "--yes")
    assert result.exit_code == 3 and "secret HF_TOKEN" in result.stderr


def test_no_secret_in_any_output_even_with_debug(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_5XX", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "create")
    failed = run("submit", EXAMPLE, "--provider", "sandbox", "--yes", "--debug")
    assert failed.exit_code == 10
    monkeypatch.delenv("GPUCLOUD_SANDBOX_FAIL_5XX")
    ok = run("--debug", "submit", EXAMPLE, "--provider", "sandbox", "--yes")
    assert ok.exit_code == 0 and "POST /v1/jobs" in ok.stderr
    time.sleep(0.4)
    logs = run("jobs", "logs", "llama-finetune", "--debug")
    for result in (failed, ok, logs):
        assert HF not in result.output and WANDB not in result.output


def test_schema_job_prints_the_json_schema():
    raw = run("schema", "job")
    schema = json.loads(raw.stdout)
    assert schema["title"] == "gpucloud job" and "resources" in schema["properties"]
    assert json.loads(run("schema", "job", "--json").stdout) == {"schema": schema}


def test_unknown_job_is_exit_5():
    assert run("jobs", "get", "nothing-like-this").exit_code == 5
