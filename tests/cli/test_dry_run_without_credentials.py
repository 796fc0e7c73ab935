"""`submit FILE --dry-run` and `create --dry-run` need neither the job's
secrets nor any provider's credentials: the file and the form of each secret
reference are checked (nothing is read), and with no credentials the plan is
made from the bundled catalog, labelled as `estimate` labels catalog prices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._subprocess import gpucloud

JOB = """\
name: finetune
image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
command: ["python", "train.py"]
secrets:
  HF_TOKEN: {env: GPUCLOUD_TEST_UNSET_HF_TOKEN}
  WANDB_API_KEY: {keyring: "wandb/training"}
resources:
  gpu: h100
  gpu_count: 8
max_runtime: 4h
"""
CATALOG_LABEL = "note: catalog price as of "  # what `estimate` prints for a catalog price


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "cli-home"
    path.mkdir()
    return path


def job_file(tmp_path: Path, text: str = JOB) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_estimate_labels_a_catalog_price_so(home):
    result = gpucloud("estimate", "--gpu", "h100", "--count", "8", home=home)
    assert result.returncode == 0, result.stderr
    assert CATALOG_LABEL in result.stdout


def test_submit_dry_run_reads_no_secret_and_plans_from_the_catalog(tmp_path, home):
    result = gpucloud("submit", job_file(tmp_path), "--dry-run", home=home)
    assert result.returncode == 0, result.stderr
    assert CATALOG_LABEL in result.stdout
    assert "planned from the bundled catalog" in result.stdout
    assert "HF_TOKEN from env GPUCLOUD_TEST_UNSET_HF_TOKEN" in result.stdout
    assert "WANDB_API_KEY from keyring wandb/training" in result.stdout
    assert result.stdout.rstrip().endswith("dry run: nothing was submitted")
    assert "error" not in result.stderr


def test_submit_dry_run_json_plans_a_catalog_offer(tmp_path, home):
    result = gpucloud("submit", job_file(tmp_path), "--dry-run", "--json", home=home)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    document = json.loads(result.stdout)
    assert document["dry_run"] is True
    assert document["plan"]["offer"]["source"] == "catalog"
    assert document["plan"]["offer"]["as_of"]


def test_a_real_submit_still_needs_the_secret(tmp_path, home):
    result = gpucloud("submit", job_file(tmp_path), "--yes", home=home)
    assert result.returncode == 3
    assert "secret HF_TOKEN" in result.stderr


@pytest.mark.parametrize("reference, says", [
    ('{env: "hf-not-a-name"}', "env must be the name of an environment variable"),
    ('{keyring: "wandb"}', 'keyring must be "<service>/<user>"'),
    ('{env: A, keyring: "b/c"}', "give exactly one of env or keyring"),
    ("hf_pastedvalue123", "write where the value is, not the value"),
])
def test_an_ill_formed_secret_reference_fails_the_dry_run(tmp_path, home, reference, says):
    text = JOB.replace("{env: GPUCLOUD_TEST_UNSET_HF_TOKEN}", reference)
    result = gpucloud("submit", job_file(tmp_path, text), "--dry-run", home=home)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr
    assert "secrets.HF_TOKEN" in result.stderr
    assert "hf_pastedvalue123" not in result.stderr + result.stdout  # never echoed


def test_create_dry_run_plans_from_the_catalog_without_credentials(home):
    result = gpucloud("create", "--gpu", "h100", "--count", "8", "--auto-shutdown", "4h",
                      "--dry-run", home=home)
    assert result.returncode == 0, result.stderr
    assert CATALOG_LABEL in result.stdout
    assert "planned from the bundled catalog" in result.stdout
    assert result.stdout.rstrip().endswith("dry run: nothing was created")


def test_create_dry_run_on_one_provider_without_its_credentials(home):
    result = gpucloud("create", "--gpu", "h100", "--count", "8", "--provider", "lambda",
                      "--dry-run", "--json", home=home)
    assert result.returncode == 0, result.stderr
    offer = json.loads(result.stdout)["plan"]["offer"]
    assert (offer["provider"], offer["source"]) == ("lambda", "catalog")


def test_a_real_create_still_needs_credentials(home):
    result = gpucloud("create", "--gpu", "h100", "--count", "8", "--auto-shutdown", "1h",
                      "--yes", home=home)
    assert result.returncode == 3
    assert "no credentials" in result.stderr
