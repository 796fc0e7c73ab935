"""Provisioned workers: N GPU machines, each a gpucloud job whose command
installs gpucloud from the install source (remote_install: config.toml's
[remote], by default this version from the package index) and runs
``gpucloud worker``; with ``[remote] image`` and no ``--image`` the job runs
that image, which already holds gpucloud, and installs nothing.

The job ends when its worker exits idle, and the machine ends with the job
(the runner's end action per provider: power off, stop the pod, destroy the
instance); max_runtime (``auto_shutdown``) is the deadline the reaper enforces
if anything else fails. The Redis URL reaches the machine only as the job's
secret GPUCLOUD_REDIS_URL, read from the submitting shell's environment; no
provider API key is ever part of the job.

On a VM cloud the job already runs in a container, without a docker daemon
inside: the worker there runs each task's command directly, inside the worker
image (``image``), so that image must hold what the tasks need.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from typing import Any, Optional

from gpucloud.errors import ConfigurationError, GpuCloudError, SpecError
from gpucloud.jobs.spec import JobSpec, from_any
from gpucloud.machine.remote_install import InstallSource

REDIS_ENV = "GPUCLOUD_REDIS_URL"
DEFAULT_IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
MAX_WORKERS = 64


def worker_spec(queue: str, *, gpu: str, count: int = 1, provider: Optional[str] = None,
                region: Optional[str] = None, auto_shutdown: str = "12h", idle: str = "10m",
                image: Optional[str] = None, spot: bool = False,
                secrets: tuple[str, ...] = (), source: Optional[InstallSource] = None
                ) -> JobSpec:
    """The job each worker machine runs; ``secrets``: names of variables of the
    submitting environment the tasks need (e.g. HF_TOKEN), passed as secrets;
    ``source``: where gpucloud comes from (default: config.toml's [remote])."""
    from gpucloud.machine import remote_install
    from gpucloud.config.settings import load_config

    source = source or remote_install.source(load_config())
    worker = ["gpucloud", "worker", "--queue", queue, "--idle", idle]
    image, holds_gpucloud = worker_image(image, source)
    command = worker if holds_gpucloud else [
        "sh", "-c", f"{source.pip_shell()} && exec {shlex.join(worker)}"]
    name = "gq-worker-" + (re.sub(r"[^a-z0-9]+", "-", queue.lower()).strip("-") or "queue")
    # from_any: a bad --gpu, --auto-shutdown or --secret is a SpecError (exit 2).
    return from_any({
        "name": name[:63].rstrip("-"), "image": image,
        "command": command,
        "secrets": {REDIS_ENV: {"env": REDIS_ENV}, **{s: {"env": s} for s in secrets}},
        "resources": {"gpu": gpu, "gpu_count": count},
        "provider": provider, "region": region, "max_runtime": auto_shutdown, "spot": spot})


def worker_image(image: Optional[str], source: InstallSource) -> tuple[str, bool]:
    """(the workers' image, whether it holds gpucloud already): ``--image`` when
    given (gpucloud is pip-installed into it), else ``[remote] image``, else the
    default CUDA image (pip-installed too)."""
    if image is None and source.image:
        return source.image, True
    return image or DEFAULT_IMAGE, False


def check_redis_url(url: Optional[str]) -> str:
    """A URL remote machines can reach: a shared server, not this machine's."""
    from urllib.parse import urlsplit

    if not url:
        raise ConfigurationError(
            "workers on other machines need a shared Redis; none is configured",
            hint=f"export {REDIS_ENV}=rediss://:PASSWORD@HOST:PORT (or pass --redis)")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        parts, host = None, ""
    if parts is None or parts.scheme not in ("redis", "rediss") or not host:
        raise SpecError("the Redis URL must be redis://HOST:PORT or rediss://HOST:PORT",
                        hint="rediss:// for TLS; the password goes after ':' before '@'")
    if host == "localhost" or _loopback(host):
        raise SpecError(f"Redis at {host} is this machine: a remote worker cannot reach it",
                        hint="use a Redis server the GPU machines can reach")
    return url


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plan_workers(client: Any, spec: JobSpec, n: int) -> tuple[Any, Any]:
    """(one machine's plan, the same with totals for ``n`` machines): the first
    is what each submit launches, the second what is shown and confirmed."""
    if not 1 <= n <= MAX_WORKERS:
        raise SpecError(f"{n} workers: give 1 to {MAX_WORKERS}", hint="e.g. queue workers add 4")
    one = client.plan_job(spec)

    def times(value: Any) -> Any:
        return None if value is None else value * n
    return one, one.model_copy(update={"instances": n,
                                       "total_per_hour": times(one.total_per_hour),
                                       "total": times(one.total)})


def add_workers(client: Any, spec: JobSpec, one: Any, n: int
                ) -> tuple[list[Any], Optional[GpuCloudError]]:
    """Submit ``n`` worker jobs, one at a time; stops at the first error (never
    re-tried: a repeated create may be a second billed machine) and returns the
    jobs submitted so far with that error."""
    jobs: list[Any] = []
    for _ in range(n):
        try:
            jobs.append(client.submit(spec, plan=one))
        except GpuCloudError as exc:
            return jobs, exc
    return jobs, None
