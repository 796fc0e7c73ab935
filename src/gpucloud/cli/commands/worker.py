"""`gpucloud worker`: run a queue's tasks on this machine until it is idle."""

from __future__ import annotations

from typing import Any, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import app
from gpucloud.cli.commands.queue import queue_app

REDIS_ENV = "GPUCLOUD_REDIS_URL"  # how a provisioned worker receives the URL (a job secret)


def shown_url(url: Optional[str]) -> str:
    """A Redis URL fit to print: its password replaced (the one rule, redaction.py)."""
    if not url:
        return "embedded Redis"
    from gpucloud.queue import redact_url

    return redact_url(url) or ""


def redis_url(given: Optional[str]) -> Optional[str]:
    import os

    return given or os.environ.get(REDIS_ENV) or None


def open_queue(url: Optional[str], name: str, **options: Any) -> Any:
    from gpucloud.queue import Queue  # type: ignore[attr-defined]

    return Queue(url, name, **options)


@app.command()
def worker(
    queue: str = typer.Option("default", "--queue", "-q", metavar="NAME", help="The queue."),
    redis: Optional[str] = typer.Option(
        None, "--redis", metavar="URL",
        help=f"redis:// or rediss:// URL of a shared server (default: ${REDIS_ENV}, "
             "else the embedded Redis under GPUCLOUD_HOME)."),
    idle: str = typer.Option("10m", "--idle", metavar="DURATION",
                             help="Exit after this long with no task (e.g. 10m, 1h); a lost "
                                  "Redis connection is waited out this long too."),
    worker_id: Optional[str] = typer.Option(None, "--worker-id", metavar="ID",
                                            help="Name in `queue status` (default: host-pid)."),
    runner: str = typer.Option("auto", "--runner", metavar="auto|docker|direct",
                               help="docker: each task in its container (docker run --gpus "
                                    "all), exit 3 if the docker daemon does not answer; direct: "
                                    "its command here; auto: docker if installed and its "
                                    "daemon answers, else direct (with a warning)."),
    visibility_timeout: str = typer.Option(
        "60s", "--visibility-timeout", metavar="DURATION",
        help="A task whose worker stops heart-beating this long goes to another worker "
             "(give every worker of a queue the same)."),
    kill_grace: str = typer.Option(
        "10s", "--kill-grace", metavar="DURATION",
        help="A task cancelled (or stopped by SIGTERM) gets SIGTERM, then SIGKILL after this "
             "long (its whole process group, or its container)."),
    json_output: bool = params.JSON,
) -> None:
    """Run the queue's tasks here, one at a time, until none comes for --idle.

    A task runs in its container (docker run --gpus all) where docker exists
    and its daemon answers (checked once at start), else its command runs
    directly; a failure no retry can heal (missing secret, executable or image)
    goes to the dead letters at once. CHECKPOINT_DIR is the same directory for
    every attempt of a task. SIGTERM stops the running task and leaves it to be
    re-delivered. A task cancelled with `gpucloud queue cancel` is stopped at the
    next heartbeat (SIGTERM, then SIGKILL after --kill-grace).
    """
    from gpucloud.errors import SpecError
    from gpucloud.catalog.pricing import parse_duration
    from gpucloud.queue import worker as w

    idle_seconds = parse_duration(idle).total_seconds()
    timeout = parse_duration(visibility_timeout).total_seconds()
    grace = parse_duration(kill_grace).total_seconds()
    if runner not in ("auto", "docker", "direct"):
        raise SpecError(f"--runner {runner!r}: use auto, docker or direct",
                        hint="e.g. --runner direct")
    warnings: list[str] = []
    chosen = _runner(runner, warnings)
    url = redis_url(redis)
    q = open_queue(url, queue, visibility_timeout=timeout)
    where = shown_url(url)

    def show(kind: str, data: dict[str, Any]) -> None:
        if kind == "retry":
            output.warn(f"queue unreachable, retrying: {data['error']}")
        elif kind == "start":
            output.err(f"task {data['task_id']} (attempt {data['attempt']}) started")
        elif kind == "cancelled":
            output.err(f"task {data['task_id']} cancelled: stopped")
        elif kind == "lost" and data.get("stopped"):
            output.warn(f"task {data['task_id']}: stopped, no longer this worker's (requeued "
                        "or re-delivered past the visibility timeout; its next run takes over)")
        elif kind == "lost":
            output.warn(f"task {data['task_id']}: its result was ignored (exit code "
                        f"{data['exit_code']}): this worker lost it past the visibility "
                        "timeout and it was re-delivered or cancelled")
        else:
            ended = "succeeded" if data["exit_code"] == 0 else f"failed: {data['error']}"
            output.err(f"task {data['task_id']} {ended}")

    if not json_output:
        for warning in warnings:
            output.warn(warning)
        output.err(f"worker on queue {queue} ({where}); exits after {idle} idle")
    try:
        summary = w.run_worker(q, worker_id=worker_id, idle=idle_seconds, runner=chosen,
                               on_event=None if json_output else show, kill_grace=grace)
    finally:
        q.close()
    if json_output:
        output.emit_json({"worker": summary.model_dump(mode="json"), "queue": queue,
                          "redis": where, "warnings": warnings})
        return
    output.out(f"worker {summary.worker_id}: {summary.succeeded} succeeded, "
               f"{summary.failed} failed"
               + (f", {summary.cancelled} cancelled" if summary.cancelled else "")
               + (f", {summary.lost} lost (re-delivered; results ignored)" if summary.lost
                  else "") + "; stopped "
               + ("by a signal (the running task is left for re-delivery)"
                  if summary.reason == "signal" else f"after {idle} idle"))
    if summary.reason == "signal":
        raise typer.Exit(130)


def _runner(name: str, warnings: list[str]) -> Any:
    """The runner for --runner NAME, docker checked once first: `docker` with
    a daemon that does not answer is exit 3; `auto` then runs tasks directly,
    saying so in ``warnings``."""
    import shutil

    from gpucloud.errors import ConfigurationError
    from gpucloud.queue import worker as w

    if name == "direct" or (name == "auto" and shutil.which("docker") is None):
        return w.direct_runner
    from gpucloud.queue.docker_check import check_docker

    check = check_docker()
    if check.problem is not None:
        if name == "docker":
            raise ConfigurationError(check.problem, hint=check.hint)
        warnings.append(f"{check.problem}: tasks run directly here, without containers "
                        "(--runner docker refuses instead)")
        return w.direct_runner
    warnings.extend(check.warnings)
    return w.docker_runner


# `gpucloud queue workers add`: a `workers` group under the queue commands.
workers_app = typer.Typer(help="Worker machines for a queue.", no_args_is_help=True)
queue_app.add_typer(workers_app, name="workers")


@workers_app.command("add")
def add_workers(
    n: int = typer.Argument(..., min=1, max=64, metavar="N", help="How many worker machines."),
    gpu: str = params.GPU,
    count: int = params.COUNT,
    provider: Optional[str] = params.PROVIDER,
    region: Optional[str] = params.REGION,
    auto_shutdown: str = typer.Option(
        "12h", "--auto-shutdown", metavar="DURATION",
        help="Each machine's deadline (the job's max_runtime), however busy it is."),
    queue: str = typer.Option("default", "--queue", "-q", metavar="NAME", help="The queue."),
    redis: Optional[str] = typer.Option(
        None, "--redis", metavar="URL",
        help=f"Shared Redis the machines reach (default: ${REDIS_ENV}; prefer the variable: "
             "a password on the command line stays in your shell history)."),
    idle: str = typer.Option("10m", "--idle", metavar="DURATION",
                             help="A worker exits, and its machine ends, after this long idle."),
    image: Optional[str] = typer.Option(
        None, "--image", metavar="IMAGE",
        help="The workers' image; tasks' commands run inside it (default: [remote] image of "
             "config.toml, else a PyTorch CUDA image; gpucloud is then pip-installed)."),
    secret: list[str] = typer.Option(
        [], "--secret", metavar="NAME",
        help="An environment variable the tasks need (e.g. HF_TOKEN), sent to the machines "
             "as a secret; repeatable."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan; create nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Create N GPU machines that each run `gpucloud worker` for the queue.

    Each is a job: plan and estimate first, then confirmation. A machine ends when
    its worker has been idle for --idle, or at --auto-shutdown at the latest. The
    Redis URL reaches the machines only as the job secret GPUCLOUD_REDIS_URL; no
    provider API key goes to them.
    """
    import os

    from gpucloud.catalog.pricing import parse_duration
    from gpucloud.queue import provision

    parse_duration(idle)
    url = provision.check_redis_url(redis_url(redis))
    before = os.environ.get(REDIS_ENV)
    # The job's secret is read from this process's environment while it is submitted.
    os.environ[REDIS_ENV] = url
    try:
        _add(n, url, gpu, count, provider, region, auto_shutdown, queue, idle, image,
             tuple(secret), dry_run, yes, json_output)
    finally:
        if before is None:
            os.environ.pop(REDIS_ENV, None)
        else:
            os.environ[REDIS_ENV] = before


def _add(n: int, url: str, gpu: str, count: int, provider: Optional[str],
         region: Optional[str], auto_shutdown: str, queue: str, idle: str,
         image: Optional[str], secrets: tuple[str, ...], dry_run: bool, yes: bool,
         json_output: bool) -> None:
    from gpucloud.client import Client
    from gpucloud.queue import provision
    from gpucloud.machine import remote_install
    from gpucloud.config.settings import load_config
    from gpucloud.cli.app import fail
    from gpucloud.cli.commands.instance import _confirm, _hourly, _interrupted, plan_text

    source = remote_install.source(load_config())
    spec = provision.worker_spec(queue, gpu=gpu, count=count, provider=provider, region=region,
                                 auto_shutdown=auto_shutdown, idle=idle, image=image,
                                 secrets=secrets, source=source)
    from_image = provision.worker_image(image, source)[1]
    warnings = [] if url.startswith("rediss://") else [
        "the Redis URL is redis:// (no TLS): the password crosses the network in clear; "
        "use rediss:// for workers outside your network"]
    caveat = None if from_image else source.caveat()
    warnings += [caveat] if caveat else []
    client = Client()
    one, shown = provision.plan_workers(client, spec, n)
    where = shown_url(url)
    if not json_output:
        for warning in [*warnings, *client.warnings]:
            output.warn(warning)
        output.out(f"{n} worker(s) for queue {queue} ({where}): gpucloud worker on "
                   f"{count} x {spec.resources.gpu} each, image {spec.image}; each ends after "
                   f"{idle} idle, at {auto_shutdown} at the latest")
        output.out(f"gpucloud will run on the machine from the image {source.image} "
                   "([remote] image in config.toml)" if from_image else
                   f"gpucloud will be installed on the machine from: {source.describe()}")
        output.out(plan_text(shown))
    base = {"queue": queue, "redis": where, "job": spec.model_dump(mode="json"),
            "plan": output.dump(shown), "warnings": [*warnings, *client.warnings],
            "install_source": {**source.as_json(), "image_used": from_image}}
    if dry_run:
        if json_output:
            output.emit_json({**base, "dry_run": True})
        else:
            output.out("dry run: nothing was created")
        return
    _confirm(f"Create {n} worker machine(s) {_hourly(shown)}?", yes, json_output,
             "creating worker machines")
    try:
        jobs, error = provision.add_workers(client, spec, one, n)
    except KeyboardInterrupt:
        _interrupted(client.last_created, client.in_flight, json_output)
        raise
    if error is not None:
        from gpucloud.errors import exit_code_for

        made = " ".join(j.ref for j in jobs)
        fail(exit_code_for(error), error.code,
             error.message + (f" ({len(jobs)} of {n} workers were created: {made})" if jobs
                              else " (no worker was created)"),
             error.hint, json_output, {"workers": [output.dump(j) for j in jobs]})
    if json_output:
        output.emit_json({**base, "workers": [output.dump(j) for j in jobs]})
        return
    for job in jobs:
        output.out(f"worker {job.ref} ({job.status.value})")
    output.out(f"watch with: gpucloud queue status --queue {queue}")
