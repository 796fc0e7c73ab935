"""`gpucloud create --instances N`: progress while a batch launches, and its report.

A progress bar (rich) on a terminal, one plain line per machine otherwise,
both on stderr and neither under --json. Exit code: 0 when every machine was
made; otherwise that of the first failure (e.g. 6 no capacity, 10 a provider
error), after the report of what was made.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer

from gpucloud.cli import output, placement
from gpucloud.cli.app import fail
from gpucloud.cli.create_text import _interrupted, wait_all


def create_batch(client: Any, plan: Any, request: dict[str, Any], concurrency: int | None,
                  all_or_nothing: bool, batch: str | None, wait: bool, timeout: int,
                  json_output: bool) -> None:
    from gpucloud.batch.models import BatchIncompleteError
    from gpucloud.errors import GpuCloudError

    made: list[Any] = []
    try:
        with progress(plan.instances, json_output) as on_item:
            result = client.create_many(**request, plan=plan, concurrency=concurrency,
                                        all_or_nothing=all_or_nothing, batch=batch,
                                        on_item=on_item)
        made = result.instances
        wait_all(client, made, wait, timeout, json_output)
    except BatchIncompleteError as exc:
        incomplete(exc, json_output)
    except GpuCloudError as exc:
        raise exc.with_details(instances=made or client.last_created) from exc
    except KeyboardInterrupt:
        _interrupted(made or client.last_created, client.in_flight, json_output)
    report(result, plan, client, made, json_output)


@contextmanager
def progress(total: int, as_json: bool) -> Iterator[Callable[[Any], None] | None]:
    """The `on_item` hook of create_many for this terminal (None under --json)."""
    if as_json:
        yield None
        return
    if not sys.stderr.isatty():
        lock = threading.Lock()
        done = [0]

        def line(item: Any) -> None:
            with lock:  # items settle in worker threads
                done[0] += 1
                output.err(f"[{done[0]}/{total}] machine {item.index + 1}: {_outcome(item)}")
        yield line
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, \
        TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=False)
    failed = [0]
    with bar:
        task = bar.add_task("creating", total=total)

        def tick(item: Any) -> None:
            if not item.ok:
                failed[0] += 1
            # Each machine as it lands (where, and why there), each failure as it fails.
            bar.console.print(f"machine {item.index + 1}: {_outcome(item)}",
                              markup=False, highlight=False)
            bar.update(task, advance=1, description=(
                f"creating ({failed[0]} failed)" if failed[0] else "creating"))
        yield tick


def _outcome(item: Any) -> str:
    if item.ok:
        verb = "created" if item.status == "created" else "already made (earlier run)"
        return f"{verb} {placement.line(item)}" if item.instance is not None else verb
    if item.status == "not_launched":
        return "not launched (the batch stopped)"
    return f"failed: {output.clean(item.error or item.error_code or 'unknown error')}"


def report(result: Any, plan: Any, client: Any, made: list[Any], as_json: bool) -> None:
    """The batch's document (--json) or text; exit with the first failure's code."""
    failures = result.failures
    if as_json:
        output.emit_json({"instance": None, "instances": [output.dump(i) for i in made],
                          "plan": output.dump(plan),
                          "attempts": [output.dump(a) for a in client.last_attempts],
                          "warnings": client.warnings, "batch": result.batch,
                          "failures": [output.dump(f) for f in failures]})
    else:
        for instance in made:
            output.out(f"created {placement.landed(instance, instance.status.value)}")
        if made:
            output.out(f"delete with: gpucloud delete {' '.join(i.ref for i in made)}")
        for warning in client.warnings:
            output.err(f"warning: {warning}")
        if failures:
            first = failures[0]
            output.err(f"error: {len(failures)} of {len(result.items)} machines were not made; "
                       f"first: machine {first.index + 1}: {output.clean(first.error or '')}")
            output.err(f"hint: run the same command with --batch {result.batch} to make only "
                       "the missing ones" + (f" ({first.hint})" if first.hint else ""))
    if failures:
        raise typer.Exit(failures[0].exit_code or 1)


def incomplete(exc: Any, as_json: bool) -> None:
    """An --all-or-nothing batch that failed: what was terminated, and why."""
    result = exc.result
    terminated = [i.instance for i in result.items if i.status == "terminated" and i.instance]
    if not as_json:
        for instance in terminated:
            output.err(f"terminated {instance.ref}")
    fail(exc.exit_code, exc.code, exc.message, exc.hint, as_json,
         {"instances": [output.dump(i) for i in result.instances],
          "terminated": [output.dump(i) for i in terminated], "batch": result.batch,
          "failures": [output.dump(f) for f in result.failures]})
