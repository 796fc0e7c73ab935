"""Can this machine run a task's container? One ``docker info`` when a worker
starts, so that a daemon that is not running is said once, plainly, instead
of failing every task it takes.

``docker info --format '{{json .Runtimes}}'`` answers both questions at once:
it fails like any docker command when the daemon is unreachable, and lists
the daemon's runtimes. Where the machine has NVIDIA GPUs, ``docker run --gpus
all`` needs the NVIDIA Container Toolkit; its documentation has
``nvidia-ctk runtime configure --runtime=docker`` register a runtime named
``nvidia`` with docker, and CDI specifications it generates live in
``/etc/cdi`` or ``/var/run/cdi``. Neither present is worth a warning (the
toolkit's hook alone may still serve ``--gpus``), not a refusal.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

INFO = ["docker", "info", "--format", "{{json .Runtimes}}"]
TIMEOUT = 30.0
CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))


@dataclass
class DockerCheck:
    problem: Optional[str] = None  # None: the daemon answered
    hint: str = ""
    warnings: list[str] = field(default_factory=list)


def gpus_here() -> bool:
    """NVIDIA GPUs on this machine, as far as their driver shows."""
    return shutil.which("nvidia-smi") is not None or Path("/dev/nvidiactl").exists()


def check_docker(gpus: Optional[bool] = None) -> DockerCheck:
    from gpucloud.queue.failures import key_line

    try:
        done = subprocess.run(INFO, capture_output=True, text=True, errors="replace",
                              stdin=subprocess.DEVNULL, timeout=TIMEOUT, check=False)
    except FileNotFoundError:
        return DockerCheck("docker is not installed (no docker on the PATH)",
                           "install it, or run the worker with --runner direct")
    except subprocess.TimeoutExpired:
        return DockerCheck(f"`docker info` did not answer in {TIMEOUT:.0f} s",
                           "check the docker daemon, or run the worker with --runner direct")
    text = done.stdout + "\n" + done.stderr
    if done.returncode != 0:
        said = key_line([ln for ln in text.splitlines()
                         if ln.strip() != "errors pretty printing info"], docker=True)
        low = text.lower()
        if "cannot connect to the docker daemon" in low or "is the docker daemon running" in low:
            return DockerCheck(f"docker is installed but its daemon is not running ({said})",
                               "start it (`sudo systemctl start docker`), or run the worker "
                               "with --runner direct")
        if "permission denied" in low:
            return DockerCheck(f"docker is installed but this user may not use its daemon "
                               f"({said})", "add the user to the docker group (`sudo usermod "
                               "-aG docker $USER`, then log in again), or run the worker with "
                               "--runner direct")
        return DockerCheck(f"`docker info` failed: {said or f'exit code {done.returncode}'}",
                           "check docker, or run the worker with --runner direct")
    check = DockerCheck()
    if (gpus_here() if gpus is None else gpus) and not _nvidia_runtime(done.stdout) \
            and not _nvidia_cdi():
        check.warnings.append(
            "this machine has NVIDIA GPUs but docker lists no nvidia runtime and there is no "
            "NVIDIA CDI specification: `docker run --gpus all` may fail; install the NVIDIA "
            "Container Toolkit, run `sudo nvidia-ctk runtime configure --runtime=docker` and "
            "restart docker")
    return check


def _nvidia_runtime(output: str) -> bool:
    try:
        runtimes = json.loads(output.strip() or "null")
    except ValueError:
        return "nvidia" in output
    return isinstance(runtimes, dict) and any("nvidia" in str(name) for name in runtimes)


def _nvidia_cdi() -> bool:
    for folder in CDI_DIRS:
        try:
            if any("nvidia" in p.name for p in folder.iterdir()):
                return True
        except OSError:
            continue
    return False
