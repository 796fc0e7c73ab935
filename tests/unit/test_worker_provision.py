"""Provisioned workers: the exact job each machine runs (golden), the Redis URL
only as a secret reference, no provider key, and `queue workers add` end to end
on the sandbox (plan, confirmation, N jobs)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from gpucloud import __version__
from gpucloud.cli import app
from gpucloud.errors import ConfigurationError, SpecError
from gpucloud.jobs.ops import job_run, resolve_secrets
from gpucloud.queue import provision

URL = "rediss://default:pw-9f8e7d-secret@redis.example.com:6380/0"
GOLDEN = {
    "name": "gq-worker-sweep-lr",
    "image": "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
    "command": ["sh", "-c", f"pip install --no-cache-dir --quiet gpucloud=={__version__} && "
                            "exec gpucloud worker --queue 'sweep lr' --idle 10m"],
    "args": [], "env": {},
    "secrets": {"GPUCLOUD_REDIS_URL": {"env": "GPUCLOUD_REDIS_URL", "keyring": None}},
    "resources": {"gpu": "H100", "gpu_count": 8, "cpu": None, "memory_gb": None,
                  "disk_gb": None},
    "provider": "lambda", "region": "us-east-1", "max_runtime": "12h", "max_cost": None,
    "retries": 0, "spot": False, "checkpoint": None,
    "nodes": 1, "placement": {"same_region": True, "interconnect": "any"}, "volumes": [],
}


def test_worker_job_spec_is_exactly_this() -> None:
    spec = provision.worker_spec("sweep lr", gpu="h100", count=8, provider="lambda",
                                 region="us-east-1", auto_shutdown="12h", idle="10m")
    assert spec.model_dump(mode="json") == GOLDEN


def test_only_the_redis_url_travels_to_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("LAMBDA_API_KEY", "RUNPOD_API_KEY", "VAST_API_KEY", "VERDA_CLIENT_SECRET"):
        monkeypatch.setenv(key, "provider-key-must-stay-here")
    monkeypatch.setenv("GPUCLOUD_REDIS_URL", URL)
    spec = provision.worker_spec("q", gpu="a100", provider="runpod")
    run = job_run(spec, resolve_secrets(spec))
    assert {k: v.get_secret_value() for k, v in run.secret_env.items()} == {
        "GPUCLOUD_REDIS_URL": URL}
    dumped = json.dumps(run.model_dump(mode="json"))
    assert URL not in dumped and "pw-9f8e7d" not in dumped  # never inlined
    assert "provider-key-must-stay-here" not in dumped and run.env == {}


@pytest.mark.parametrize("url,error", [
    (None, ConfigurationError), ("", ConfigurationError),
    ("redis://localhost:6379", SpecError), ("rediss://:p@127.0.0.1:6380", SpecError),
    ("redis://[::1]:6379", SpecError), ("http://redis.example.com", SpecError),
    ("redis://", SpecError),
])
def test_a_redis_the_machines_cannot_reach_is_refused(url: Any, error: type) -> None:
    with pytest.raises(error):
        provision.check_redis_url(url)


def test_a_shared_redis_is_accepted() -> None:
    assert provision.check_redis_url(URL) == URL


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`gpucloud queue workers ...`"""
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "30")
    monkeypatch.delenv("GPUCLOUD_REDIS_URL", raising=False)
    return lambda *args: CliRunner().invoke(app, list(args))


def test_workers_add_creates_n_jobs_with_plan_and_confirmation(cli: Any) -> None:
    args = ["queue", "workers", "add", "3", "--gpu", "h100", "--provider", "sandbox",
            "--auto-shutdown", "2h", "--queue", "sweep", "--redis", URL]
    unconfirmed = cli(*args, "--json")
    assert unconfirmed.exit_code == 8, unconfirmed.output
    dry = cli(*args, "--dry-run", "--json")
    assert dry.exit_code == 0 and dry.stderr == ""
    doc = json.loads(dry.stdout)
    assert doc["dry_run"] and doc["plan"]["instances"] == 3
    assert doc["job"]["secrets"] == {"GPUCLOUD_REDIS_URL": {"env": "GPUCLOUD_REDIS_URL",
                                                            "keyring": None}}
    per_hour = doc["plan"]["estimate"]["price_per_hour"]
    assert doc["plan"]["total_per_hour"] == str(3 * __import__("decimal").Decimal(per_hour))
    assert json.loads(cli("jobs", "list", "--json").stdout)["jobs"] == []

    made = cli(*args, "--yes", "--json")
    assert made.exit_code == 0, made.output
    assert made.stderr == "" and "pw-9f8e7d" not in made.stdout
    workers = json.loads(made.stdout)["workers"]
    assert len(workers) == 3 and len({w["ref"] for w in workers}) == 3
    assert json.loads(made.stdout)["redis"] == "rediss://default:***@redis.example.com:6380/0"
    listed = json.loads(cli("jobs", "list", "--json").stdout)["jobs"]
    assert sorted(j["ref"] for j in listed) == sorted(w["ref"] for w in workers)
    logs = json.loads(cli("jobs", "logs", workers[0]["ref"], "--json").stdout)["lines"]
    text = "\n".join(logs)
    assert "gpucloud worker --queue sweep --idle 10m" in text
    assert "secrets set: GPUCLOUD_REDIS_URL" in text and "pw-9f8e7d" not in text


def test_workers_add_text_warns_without_tls_and_hides_the_password(cli: Any) -> None:
    result = cli("queue", "workers", "add", "1", "--gpu", "h100", "--provider", "sandbox",
                 "--redis", "redis://:hunter2-pw@10.0.0.5:6379", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "no TLS" in result.stderr and "hunter2" not in result.output
    assert "1 worker(s) for queue default (redis://:***@10.0.0.5:6379)" in result.stdout
    assert "GPUCLOUD_REDIS_URL" not in __import__("os").environ  # set only while submitting


def test_workers_add_without_a_shared_redis_is_a_config_error(cli: Any) -> None:
    result = cli("queue", "workers", "add", "2", "--gpu", "h100", "--provider", "sandbox",
                 "--yes", "--json")
    assert result.exit_code == 3
    assert json.loads(result.stdout)["error"]["code"] == "configuration"


def test_the_sweep_example_is_a_valid_job_file() -> None:
    from pathlib import Path

    from gpucloud.jobs.spec import load

    spec = load(Path(__file__).resolve().parents[2] / "examples" / "sweep.yaml")
    assert spec.name == "lr-sweep" and "--lr={lr}" in spec.args and spec.retries == 2
    assert set(spec.secrets) == {"HF_TOKEN"}


def test_task_secrets_are_passed_by_name_too(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = provision.worker_spec("q", gpu="h100", secrets=("HF_TOKEN",))
    assert spec.model_dump(mode="json")["secrets"] == {
        "GPUCLOUD_REDIS_URL": {"env": "GPUCLOUD_REDIS_URL", "keyring": None},
        "HF_TOKEN": {"env": "HF_TOKEN", "keyring": None}}
    with pytest.raises(SpecError):  # a value where a name belongs is refused
        provision.worker_spec("q", gpu="h100", secrets=("hf_abc-123 value",))


def test_workers_add_secret_option(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf-value-xyz")
    result = cli("queue", "workers", "add", "1", "--gpu", "h100", "--provider", "sandbox",
                 "--redis", URL, "--secret", "HF_TOKEN", "--yes", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc["job"]["secrets"]) == {"GPUCLOUD_REDIS_URL", "HF_TOKEN"}
    assert "hf-value-xyz" not in result.stdout


@pytest.mark.parametrize("extra", [["--gpu", "h1000"], ["--auto-shutdown", "soon"],
                                   ["--secret", "not a name"], ["--idle", "x"]])
def test_workers_add_bad_input_is_exit_2(cli: Any, extra: list[str]) -> None:
    args = ["queue", "workers", "add", "1", "--gpu", "h100", "--provider", "sandbox",
            "--redis", URL, "--yes", "--json"]
    result = cli(*args, *extra)
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["error"] and "pw-9f8e7d" not in result.stdout
