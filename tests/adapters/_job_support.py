"""Shared by the job-create tests of the VM and container clouds
(test_*_job.py): one job, and golden request bodies kept as JSON files in
tests/fixtures/<provider>/job_create_request_golden*.json.

A golden file is the EXACT body the adapter sends; a change to it shows in
review as a diff of the request. To rewrite them after an intended change:
UPDATE_JOB_GOLDEN=1 pytest tests/adapters -k job (then read the diff)."""

from __future__ import annotations

import copy
import json
import os
from datetime import datetime, timezone
from typing import Any

import httpx
from pydantic import SecretStr

from gpucloud.providers.base import SECRETS_EXTENSION
from gpucloud.models import JobRun
from tests.adapters.support import FIXTURES
SECRET = "hf_s3cr3t-job-token"
DEADLINE = datetime(2026, 12, 1, 18, 0, tzinfo=timezone.utc)  # the job's max_runtime from now


def make_job(**changes: Any) -> JobRun:
    fields: dict[str, Any] = dict(
        name="train-resnet", image="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        command=("python", "train.py"), args=("--epochs", "3", "--resume"),
        env={"WANDB_PROJECT": "resnet"}, secret_env={"HF_TOKEN": SecretStr(SECRET)},
        max_runtime_seconds=7200, retries=1, checkpoint_dir="/checkpoints", gpu_count=8)
    fields.update(changes)
    return JobRun(**fields)


def assert_golden(provider: str, sent: Any, script_at: tuple[str, ...] = ()) -> None:
    """``sent`` equals the golden body. The shell script at ``script_at`` (a path of
    keys in the body) is kept beside it as a .sh file, so that it reads as a script."""
    path = FIXTURES / provider / "job_create_request_golden.json"
    sh_path = path.with_suffix(".sh")
    body = copy.deepcopy(sent)
    holder = body
    for key in script_at[:-1]:
        holder = holder[key]
    if script_at:
        script, holder[script_at[-1]] = holder[script_at[-1]], f"@{sh_path.name}"
    if os.environ.get("UPDATE_JOB_GOLDEN"):
        path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
        if script_at:
            sh_path.write_text(script)
    assert body == json.loads(path.read_text()), f"the request differs from {path.name}"
    if script_at:
        assert script == sh_path.read_text(), f"the script differs from {sh_path.name}"


def assert_marked_and_keyless(request: httpx.Request, account_key: str) -> None:
    """The job's secret values are marked for redaction; no account key is in the
    request other than its Authorization header (so none reaches the machine)."""
    assert request.extensions[SECRETS_EXTENSION] == (SECRET,)
    assert account_key.encode() not in request.content
    assert account_key not in str(request.url)
