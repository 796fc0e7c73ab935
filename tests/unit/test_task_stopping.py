"""Stopping a task early: its whole process group gets SIGTERM, then SIGKILL
after the grace; a container the docker runner started is stopped by name
through the docker CLI (a stand-in `docker` on PATH records the calls)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpucloud.queue import stopping
from gpucloud.queue import worker as W
from tests.unit.test_worker import claim

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")

# A task that ignores SIGTERM and whose child does too: only SIGKILL of the
# group ends both. It writes "leader child" pids, then sleeps.
STUBBORN = r"""
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"])
open(sys.argv[1], "w").write(f"{os.getpid()} {child.pid}")
time.sleep(120)
"""


def gone(pid: int) -> bool:
    """No such process, or a zombie (it holds nothing; its parent reaps it later)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_for(path: Path, timeout: float = 20.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never written")


def test_the_whole_group_is_killed_after_the_grace(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    proc = subprocess.Popen([sys.executable, "-c", STUBBORN, str(pids_file)],
                            **stopping.popen_options())
    pids = [int(p) for p in wait_for(pids_file).split()]
    started = time.monotonic()
    stopping.stop(proc, 0.4)
    took = time.monotonic() - started
    assert 0.4 <= took < 3.0  # SIGTERM was ignored: SIGKILL came after the grace
    assert proc.returncode == -9
    assert_gone(pids, within=1.0)


def assert_gone(pids: list[int], within: float) -> None:
    end = time.monotonic() + within
    while not all(gone(pid) for pid in pids):
        assert time.monotonic() < end, [p for p in pids if not gone(p)]
        time.sleep(0.02)


def test_a_task_that_obeys_sigterm_stops_without_waiting_the_grace(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            **stopping.popen_options())
    time.sleep(0.3)
    started = time.monotonic()
    stopping.stop(proc, 30)
    assert time.monotonic() - started < 5 and proc.returncode == -15


def test_a_container_is_stopped_by_its_name_then_removed(tmp_path: Path,
                                                         monkeypatch: Any) -> None:
    calls = tmp_path / "docker-calls"
    docker = tmp_path / "bin" / "docker"
    docker.parent.mkdir()
    docker.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n")
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{docker.parent}{os.pathsep}{os.environ['PATH']}")
    task = claim("sweep-1a2b3c4d", "pass", attempt=2)
    launch = W.docker_runner(task, tmp_path)
    name = launch.argv[launch.argv.index("--name") + 1]
    assert launch.container == name == "gq-sweep-1a2b3c4d-2"
    # the docker client's stand-in: a process that outlives nothing it is not told to
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            **stopping.popen_options())
    stopping.stop(proc, 1.5, container=launch.container, cleanup=launch.cleanup)
    assert calls.read_text().splitlines() == [f"stop --time 2 {name}", f"rm -f {name}"]
    assert proc.returncode is not None
