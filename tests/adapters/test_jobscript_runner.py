"""The job runner every VM and container cloud uses (_jobscript.py), executed
here with fake ``docker``, ``shutdown``, ``runpodctl`` and ``curl`` on PATH:
the job runs with CHECKPOINT_DIR, a non-zero exit is recorded, max_runtime
kills it, the end action runs, and a job is never run twice."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from pydantic import SecretStr

from gpucloud.adapters._jobscript import (
    RUNPOD_STOP,
    VAST_DESTROY,
    compressed,
    container_env,
    container_script,
    vm_script,
)
from gpucloud.errors import SpecError
from gpucloud.models import JobRun

pytestmark = pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils timeout")

SECRET = "hf_s3cr3t-value"


def fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture
def box(tmp_path):
    """A state dir, a bin dir of fakes (first on PATH) and a log of their calls."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "state").mkdir()
    log = tmp_path / "calls.log"
    fake(tmp_path / "bin", "shutdown", f'echo "shutdown $*" >> {log}\n')
    fake(tmp_path / "bin", "poweroff", f'echo "poweroff" >> {log}\n')
    fake(tmp_path / "bin", "sync", "exit 0\n")
    # docker: records its args and what the container would see, exits $FAKE_EXIT
    # (or sleeps $FAKE_SLEEP first, to be killed by max_runtime).
    fake(tmp_path / "bin", "docker", (
        f'[ "$1" = rm ] && {{ echo "docker $*" >> {log}; exit 0; }}\n'
        f'echo "docker $*" >> {log}\n'
        f'echo "env CHECKPOINT_DIR=$CHECKPOINT_DIR HF_TOKEN=$HF_TOKEN MODE=$MODE" >> {log}\n'
        '[ -n "$FAKE_SLEEP" ] && exec sleep "$FAKE_SLEEP"\n'
        'exit "${FAKE_EXIT:-0}"\n'))
    return tmp_path


def job(**changes) -> JobRun:
    fields = dict(name="train", image="pytorch/pytorch:2.4", command=("python", "train.py"),
                  args=("--epochs", "3"), env={"MODE": "it's fast"},
                  secret_env={"HF_TOKEN": SecretStr(SECRET)}, max_runtime_seconds=60,
                  checkpoint_dir="/ckpt")
    fields.update(changes)
    return JobRun(**fields)


def run(script: str, box: Path, timeout: float = 20, **env: str) -> subprocess.CompletedProcess:
    environ = {"PATH": f"{box / 'bin'}:{os.environ['PATH']}",
               "GPUCLOUD_STATE_DIR": str(box / "state"), **env}
    return subprocess.run(["sh", "-c", script], env=environ, capture_output=True, text=True,
                          timeout=timeout, check=False)


def calls(box: Path) -> list[str]:
    path = box / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def state(box: Path, name: str) -> str:
    return (box / "state" / name).read_text().strip()


@pytest.mark.parametrize("script", [
    vm_script(job()), vm_script(job(command=(), retries=2, max_runtime_seconds=None)),
    container_script(job(), RUNPOD_STOP, "runpod"), container_script(job(), VAST_DESTROY, "v"),
])
def test_every_script_is_valid_posix_shell(script):
    for shell in ("sh", "dash", "bash"):
        if shutil.which(shell):
            result = subprocess.run([shell, "-n"], input=script, text=True, capture_output=True,
                                    check=False)
            assert result.returncode == 0, (shell, result.stderr)


def test_vm_runs_the_container_with_all_gpus_and_checkpoint_dir_then_powers_off(box):
    ckpt = str(box / "ckpt")
    result = run(vm_script(job(checkpoint_dir=ckpt)), box)
    assert result.returncode == 0, result.stderr
    log = calls(box)
    assert log[0] == (f"docker run --rm --name gpucloud-job --gpus all -e MODE -e CHECKPOINT_DIR "
                      f"-e HF_TOKEN -v {ckpt}:{ckpt} --entrypoint python pytorch/pytorch:2.4 "
                      "train.py --epochs 3")
    # docker gets the values through its environment, never on its command line.
    assert log[1] == f"env CHECKPOINT_DIR={ckpt} HF_TOKEN={SECRET} MODE=it's fast"
    assert SECRET not in log[0]
    assert Path(ckpt).is_dir()  # the host side of the mount exists
    assert state(box, "exit-status") == "0" and state(box, "status") == "ended"
    assert log[-1] == "shutdown -h now"


def test_a_failing_job_is_recorded_and_retried_then_the_machine_still_ends(box):
    result = run(vm_script(job(retries=1)), box, FAKE_EXIT="3")
    assert result.returncode == 0, result.stderr
    runs = [c for c in calls(box) if c.startswith("docker run")]
    assert len(runs) == 2  # one retry
    assert state(box, "exit-status") == "3"
    assert "the job ended with status 3" in (box / "state" / "job.log").read_text()
    assert calls(box)[-1] == "shutdown -h now"


def test_max_runtime_kills_the_job_and_records_124(box):
    started = time.monotonic()
    result = run(vm_script(job(max_runtime_seconds=1, retries=3)), box, FAKE_SLEEP="30")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 15
    assert state(box, "exit-status") == "124"
    assert len([c for c in calls(box) if c.startswith("docker run")]) == 1  # no retry after it
    assert "docker rm -f gpucloud-job" in calls(box)  # the container is not left behind
    assert calls(box)[-1] == "shutdown -h now"


def test_a_machine_started_again_never_runs_the_job_twice(box):
    (box / "state" / "exit-status").write_text("0\n")
    run(vm_script(job()), box)
    assert calls(box) == ["shutdown -h now"]


def test_runpod_wrapper_runs_the_command_then_stops_its_own_pod_and_holds(box):
    log = box / "calls.log"
    fake(box / "bin", "runpodctl", f'echo "runpodctl $*" >> {log}\n')
    # The hold loop's sleep: record it and end the test's wrapper.
    fake(box / "bin", "sleep", f'echo "hold" >> {log}\nkill -TERM $PPID\n')
    ckpt = box / "ckpt"
    script = container_script(job(command=("sh", "-c"), args=(
        f'echo "cmd $CHECKPOINT_DIR $HF_TOKEN $MODE" >> {log}; exit 5',)), RUNPOD_STOP, "runpod")
    env = {k: v for k, v in container_env(job(checkpoint_dir=str(ckpt))).items()}
    result = run(script, box, RUNPOD_POD_ID="pod123", RUNPOD_API_KEY="pod-scoped", **env)
    assert result.returncode != 0  # ended by the fake sleep's kill, as RunPod would
    assert calls(box) == [f"cmd {ckpt} {SECRET} it's fast", "runpodctl stop pod pod123", "hold"]
    assert state(box, "exit-status") == "5" and ckpt.is_dir()


def test_vast_runner_destroys_its_instance_with_the_instance_key(box):
    log = box / "calls.log"
    fake(box / "bin", "curl", f'echo "curl $*" >> {log}\n')
    script = container_script(job(command=("true",), args=()), VAST_DESTROY, "vastai")
    run(compressed(script), box, CONTAINER_ID="4242", CONTAINER_API_KEY="per-instance",
        **container_env(job()))
    assert calls(box) == ["curl -fsS -X DELETE -H Authorization: Bearer per-instance "
                          "https://console.vast.ai/api/v0/instances/4242/"]
    assert state(box, "exit-status") == "0"


def test_container_clouds_need_a_command():
    with pytest.raises(SpecError, match="give the job a command"):
        container_script(job(command=()), RUNPOD_STOP, "runpod")


@pytest.mark.parametrize("name", ["1BAD", "A-B", "GC_STATE", "PATH", "X Y"])
def test_env_names_the_shell_cannot_hold_are_refused(name):
    with pytest.raises(SpecError, match="environment variable name"):
        vm_script(job(env={name: "v"}))


def test_no_secret_value_in_a_container_script():
    assert SECRET not in container_script(job(), RUNPOD_STOP, "runpod")
    assert container_env(job())["HF_TOKEN"] == SECRET

