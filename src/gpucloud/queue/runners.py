"""How a task's process starts: its argv and its complete environment.

A runner turns a claimed task into a ``Launch``: ``docker run --gpus all`` of
the task's image where docker exists (``docker_runner``), the task's command
run here as a child process elsewhere (``direct_runner``); tests plug their
own. The task's secrets travel in the environment only, never on a command
line, so none shows in the process list.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gpucloud.config.settings import TASK_ID_ENV
from gpucloud.queue.params import env_name

# Anything but letters, digits and _: replaced where a name becomes an
# environment variable, a container name or a directory.
_PARAM = re.compile(r"[^A-Za-z0-9_]")
_WORKER_ONLY = {"GPUCLOUD_REDIS_URL"}


@dataclass
class Launch:
    """How one task's process starts: argv and its complete environment."""

    argv: list[str]
    env: dict[str, str]
    cleanup: list[str] = field(default_factory=list)  # run after a forced stop
    container: str = ""  # the container's name, stopped through the daemon on a forced stop


class Runner(Protocol):
    def __call__(self, claim: Any, checkpoint_dir: Path) -> Launch: ...


def param_env(params: dict[str, Any]) -> dict[str, str]:
    return {env_name(_PARAM.sub("_", str(k))): str(v) for k, v in (params or {}).items()}


def task_env(claim: Any, checkpoint_dir: str) -> dict[str, str]:
    """What gpucloud adds to a task's env (secrets excluded)."""
    spec = claim.spec
    env = dict(spec.env)
    env.update(param_env(claim.params))
    # Its own id, whatever the worker's environment held: a client the task
    # makes records its launches and costs under it (config.settings.queue_task_id).
    env[TASK_ID_ENV] = str(claim.task_id)
    env["GPUCLOUD_ATTEMPT"] = str(claim.attempt)
    env["CHECKPOINT_DIR"] = checkpoint_dir
    return env


def _secrets(spec: Any) -> dict[str, str]:
    """The task's secrets, read from the worker's own environment or keyring (a
    worker machine gets them as its own job's secrets)."""
    if not spec.secrets:
        return {}
    from gpucloud.jobs.ops import resolve_secrets

    return {k: v.get_secret_value() for k, v in resolve_secrets(spec).items()}


def _inherited() -> dict[str, str]:
    """The worker's environment minus what only the worker may see (the queue's
    URL carries its password)."""
    return {k: v for k, v in os.environ.items() if k not in _WORKER_ONLY}


def direct_runner(claim: Any, checkpoint_dir: Path) -> Launch:
    """The task's command run here, as a child process (no container runtime)."""
    spec = claim.spec
    argv = [*spec.command, *spec.args]  # params were applied at submit (Claim.spec)
    if not spec.command:  # args alone are for the image's entrypoint, not a program here
        from gpucloud.errors import SpecError

        raise SpecError(f"task {claim.task_id}: without docker a task needs a command",
                        hint="set command in the job file, or run the worker where docker is")
    env = _inherited()
    env.update(task_env(claim, str(checkpoint_dir)))
    env.update(_secrets(spec))
    return Launch(argv, env)


def docker_runner(claim: Any, checkpoint_dir: Path) -> Launch:
    """``docker run --rm --gpus all`` of the task's image; values travel in the
    docker client's env and are named on its command line only (-e NAME), so
    none shows in the process list."""
    spec = claim.spec
    inside = spec.checkpoint.dir if spec.checkpoint else "/checkpoints"
    plain = task_env(claim, inside)
    secrets = _secrets(spec)
    name = "gq-" + _PARAM.sub("-", str(claim.task_id))[:40] + f"-{claim.attempt}"
    argv = ["docker", "run", "--rm", "--name", name, "--gpus", "all"]
    for key in [*plain, *secrets]:
        argv += ["-e", key]
    argv += ["-v", f"{checkpoint_dir}:{inside}"]
    if spec.command:
        argv += ["--entrypoint", spec.command[0], spec.image, *spec.command[1:], *spec.args]
    else:
        argv += [spec.image, *spec.args]
    env = _inherited()
    env.update(plain)
    env.update(secrets)
    return Launch(argv, env, cleanup=["docker", "rm", "-f", name], container=name)


def default_runner() -> Runner:
    return docker_runner if shutil.which("docker") else direct_runner


def checkpoint_dir(work_dir: Path, task_id: str) -> Path:
    """The same directory for every attempt of one task on this machine."""
    path = work_dir / "tasks" / _PARAM.sub("_", str(task_id)) / "checkpoint"
    path.mkdir(parents=True, exist_ok=True)
    return path
