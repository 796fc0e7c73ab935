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

from gpucloud.providers._jobscript import (
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
    vm_script(job(checkpoint_url="s3://b/p")),
    container_script(job(checkpoint_url="r2:b/p"), RUNPOD_STOP, "runpod"),
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



# Checkpoint sync: fake aws/gsutil/rclone record each call (restore or save by
# argument order) and what the directory held at that moment.

def fake_sync_tools(box: Path) -> None:
    log = box / "calls.log"
    for tool in ("aws", "gsutil", "rclone"):
        fake(box / "bin", tool, (
            f'echo "{tool} $* files=$(ls "$CHECKPOINT_DIR" | tr "\\n" " ")'
            f'key=$AWS_ACCESS_KEY_ID" >> {log}\n'))


def sync_calls(box: Path) -> list[str]:
    return [c.split(" files=")[0] for c in calls(box)
            if c.split(" ")[0] in ("aws", "gsutil", "rclone") or c.startswith("docker run")]


@pytest.mark.parametrize(("url", "restore", "save"), [
    ("s3://bkt/run1", "aws s3 sync --only-show-errors s3://bkt/run1 {d}",
     "aws s3 sync --only-show-errors {d} s3://bkt/run1"),
    ("gs://bkt/run1", "gsutil -m -q rsync -r gs://bkt/run1 {d}",
     "gsutil -m -q rsync -r {d} gs://bkt/run1"),
    ("r2:bkt/run1", "rclone copy r2:bkt/run1 {d}", "rclone copy {d} r2:bkt/run1"),
])
def test_checkpoints_are_restored_before_the_job_and_saved_after_it(box, url, restore, save):
    fake_sync_tools(box)
    ckpt = str(box / "ckpt")
    secrets = {"AWS_ACCESS_KEY_ID": SecretStr("AKIA-key")}
    result = run(vm_script(job(checkpoint_dir=ckpt, checkpoint_url=url, secret_env=secrets)), box)
    assert result.returncode == 0, result.stderr
    assert sync_calls(box) == [restore.format(d=ckpt), sync_calls(box)[1],
                               save.format(d=ckpt)]
    assert sync_calls(box)[1].startswith("docker run")
    # The tool gets the credentials the job references by name.
    assert sum(c.endswith("key=AKIA-key") for c in calls(box)) == 2
    assert "gpucloud: checkpoint save" in (box / "state" / "job.log").read_text()


def test_checkpoints_are_saved_periodically_while_the_job_runs(box):
    fake_sync_tools(box)
    ckpt = box / "ckpt"
    log = box / "calls.log"
    # The job writes one checkpoint, then keeps running past two sync intervals.
    the_job = job(command=("sh", "-c"), args=(
        f'touch "$CHECKPOINT_DIR/epoch1.pt"; echo job >> {log}; sleep 3',),
        checkpoint_dir=str(ckpt), checkpoint_url="s3://b/p", checkpoint_sync_seconds=1)
    script = container_script(the_job, RUNPOD_STOP, "runpod")
    fake(box / "bin", "runpodctl", "exit 0\n")
    env = container_env(the_job)
    # RUNPOD_STOP holds forever: stop the test at the end action.
    script = script.replace("while :; do sleep 3600; done\n", "")
    result = run(script, box, RUNPOD_POD_ID="p", **env)
    assert result.returncode == 0, result.stderr
    saves = [c for c in calls(box) if c.startswith("aws s3 sync") and c.endswith(
        "s3://b/p files=epoch1.pt key=")]
    assert calls(box)[0].startswith(f"aws s3 sync --only-show-errors s3://b/p {ckpt}")
    assert calls(box)[1] == "job"
    assert len(saves) >= 2  # at least one while it ran, and the final one
    assert calls(box)[-1] == saves[-1]


def test_checkpoints_are_saved_after_max_runtime_kills_the_job(box):
    fake_sync_tools(box)
    ckpt = str(box / "ckpt")
    result = run(vm_script(job(checkpoint_dir=ckpt, checkpoint_url="gs://b/p",
                               max_runtime_seconds=1)), box, FAKE_SLEEP="30")
    assert result.returncode == 0, result.stderr
    assert state(box, "exit-status") == "124"
    assert sync_calls(box)[-1] == f"gsutil -m -q rsync -r {ckpt} gs://b/p"
    assert calls(box)[-1] == "shutdown -h now"


def test_a_missing_sync_tool_is_a_line_in_the_job_log_and_the_job_still_runs(box):
    ckpt = str(box / "ckpt")
    result = run(vm_script(job(checkpoint_dir=ckpt, checkpoint_url="remote:bkt")), box,
                 PATH=f"{box / 'bin'}:/usr/bin:/bin")
    assert result.returncode == 0, result.stderr
    text = (box / "state" / "job.log").read_text()
    assert ("gpucloud: checkpoint restore skipped: rclone is not installed where the job runs "
            "(needed for remote:bkt)") in text
    assert "checkpoint save skipped: rclone" in text
    assert state(box, "exit-status") == "0"


def test_a_checkpoint_url_without_a_scheme_or_remote_is_refused():
    with pytest.raises(SpecError, match="names no object storage"):
        vm_script(job(checkpoint_url="/mnt/bucket"))
