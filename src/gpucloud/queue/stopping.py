"""Stopping a task before it ends: its whole process group, SIGTERM, then
SIGKILL after a grace period.

The task runs as the leader of its own process group (a new session), so its
children (data-loader workers, the commands of a shell script) are signalled
with it and none of them keeps the GPU. A container the docker runner started
is stopped through the daemon (``docker stop --time GRACE NAME``: SIGTERM to
the container's main process, SIGKILL after GRACE, as `docker stop` is
documented at https://docs.docker.com/reference/cli/docker/container/stop/):
the `docker run` client holds no GPU, and killing it alone would leave the
container running.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from typing import Any, Optional, Sequence

POLL = 0.05  # seconds between checks that the group is gone
KILL_SETTLE = 1.0  # seconds to wait for the group to vanish after SIGKILL


def popen_options() -> dict[str, Any]:
    """What Popen needs for the task to lead its own process group."""
    return {"start_new_session": True} if os.name == "posix" else {}


def stop(proc: subprocess.Popen[Any], grace: float, container: str = "",
         cleanup: Optional[Sequence[str]] = None) -> None:
    """Stop the task within about ``grace`` seconds (twice that for a container
    whose daemon does not answer), and wait for its process."""
    grace = max(0.0, float(grace))
    if container:
        _run(["docker", "stop", "--time", str(math.ceil(grace)), container], grace + 30)
    _signal(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _alive(proc) and time.monotonic() < deadline:
        time.sleep(POLL)
    # Whatever is left of the group, the leader's exit notwithstanding: a child
    # that ignored SIGTERM would keep the GPU.
    _signal(proc, getattr(signal, "SIGKILL", signal.SIGTERM))
    proc.wait()
    # The kernel tears the others down in a moment; wait for it, a little (a
    # zombie whose parent never reaps it still counts as one, and holds nothing).
    settle = time.monotonic() + KILL_SETTLE
    while _alive(proc) and time.monotonic() < settle:
        time.sleep(POLL)
    if cleanup:
        _run(list(cleanup), 60)


def _signal(proc: subprocess.Popen[Any], sig: int) -> None:
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is not None and os.name == "posix":
            killpg(proc.pid, sig)  # the group keeps the leader's pid as its id
        elif proc.poll() is None:
            proc.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass  # the whole group is gone already


def _alive(proc: subprocess.Popen[Any]) -> bool:
    """Is any process of the task's group left (the leader reaped once it exits)?"""
    leader_running = proc.poll() is None
    if os.name != "posix":
        return leader_running
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run(argv: list[str], timeout: float) -> None:
    try:
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       stdin=subprocess.DEVNULL, check=False, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        pass  # the signals to the docker client and `docker rm -f` still follow
