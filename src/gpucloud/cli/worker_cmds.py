"""`gpucloud worker`: run a queue's tasks on this machine until it is idle."""

from __future__ import annotations

from typing import Any, Optional

import typer

from . import output, params
from .app import app

REDIS_ENV = "GPUCLOUD_REDIS_URL"  # how a provisioned worker receives the URL (a job secret)


def shown_url(url: Optional[str]) -> str:
    """A Redis URL fit to print: its password (and user) replaced."""
    if not url:
        return "embedded Redis"
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password is None and parts.username is None:
            return url
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = "***@" + host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    except ValueError:
        return "<redis url>"


def redis_url(given: Optional[str]) -> Optional[str]:
    import os

    return given or os.environ.get(REDIS_ENV) or None


def open_queue(url: Optional[str], name: str) -> Any:
    from ..queue import Queue  # type: ignore[attr-defined]

    return Queue(url, name)


@app.command()
def worker(
    queue: str = typer.Option("default", "--queue", "-q", metavar="NAME", help="The queue."),
    redis: Optional[str] = typer.Option(
        None, "--redis", metavar="URL",
        help=f"redis:// or rediss:// URL of a shared server (default: ${REDIS_ENV}, "
             "else the embedded Redis under GPUCLOUD_HOME)."),
    idle: str = typer.Option("10m", "--idle", metavar="DURATION",
                             help="Exit after this long with no task (e.g. 10m, 1h)."),
    worker_id: Optional[str] = typer.Option(None, "--worker-id", metavar="ID",
                                            help="Name in `queue status` (default: host-pid)."),
    json_output: bool = params.JSON,
) -> None:
    """Run the queue's tasks here, one at a time, until none comes for --idle.

    A task runs in its container (docker run --gpus all) where docker exists,
    else its command runs directly; CHECKPOINT_DIR is the same directory for
    every attempt of a task. SIGTERM stops the running task and leaves it to be
    re-delivered.
    """
    from ..pricing import parse_duration
    from ..queue.worker import run_worker

    idle_seconds = parse_duration(idle).total_seconds()
    url = redis_url(redis)
    q = open_queue(url, queue)
    where = shown_url(url)

    def show(kind: str, data: dict[str, Any]) -> None:
        if kind == "retry":
            output.warn(f"queue unreachable, retrying: {data['error']}")
        elif kind == "start":
            output.err(f"task {data['task_id']} (attempt {data['attempt']}) started")
        else:
            ended = "succeeded" if data["exit_code"] == 0 else f"failed: {data['error']}"
            output.err(f"task {data['task_id']} {ended}")

    if not json_output:
        output.err(f"worker on queue {queue} ({where}); exits after {idle} idle")
    try:
        summary = run_worker(q, worker_id=worker_id, idle=idle_seconds,
                             on_event=None if json_output else show)
    finally:
        q.close()
    if json_output:
        output.emit_json({"worker": summary.model_dump(mode="json"), "queue": queue,
                          "redis": where})
        return
    output.out(f"worker {summary.worker_id}: {summary.succeeded} succeeded, "
               f"{summary.failed} failed; stopped "
               + ("by a signal (the running task is left for re-delivery)"
                  if summary.reason == "signal" else f"after {idle} idle"))
    if summary.reason == "signal":
        raise typer.Exit(130)
