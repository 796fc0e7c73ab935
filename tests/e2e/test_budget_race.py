"""The monthly budget holds when creates race: processes of `gpucloud create`
started at once from one home, threads of a Client, tasks of an AsyncClient,
batches, and job submits, against a budget that fits exactly two machines.
Machines are counted in the simulated cloud itself, not taken from
gpucloud's own reports.

Each create answers a second late (HANG_AFTER_CREATE), as a real cloud's
create takes seconds: without admission serialised with the launch intent,
every racer checked the budget before any machine was recorded, and all of
them launched."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from gpucloud import AsyncClient, BudgetExceededError, Client
from gpucloud.config.settings import config_dir, sandbox_db_path

from .test_reconcile_sigkill import cloud_rows, environment, journal

PER_MACHINE = Decimal("9.96")  # sandbox 8x H100 at $19.92/h for 30 minutes
BUDGET = '[budget]\nmonthly = "25"\n'  # fits two ($19.92), not three ($29.88)
RACERS = 10
SLOW = {"GPUCLOUD_SANDBOX_HANG_AFTER_CREATE": "1", "GPUCLOUD_SANDBOX_CAPACITY": "50"}
CREATE = ["create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
          "--auto-shutdown", "30m", "--yes", "--json"]


def write_budget(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(BUDGET)


def start_all(env: dict[str, str], argv: list[str],
              n: int) -> list[subprocess.CompletedProcess[str]]:
    """n processes started together (released at once by a barrier of threads)."""
    gate = threading.Barrier(n)
    results: list[subprocess.CompletedProcess[str] | None] = [None] * n

    def one(i: int) -> None:
        gate.wait()
        results[i] = subprocess.run([sys.executable, "-m", "gpucloud", *argv], env=env,
                                    capture_output=True, text=True, timeout=120)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def figure(message: str, name: str) -> Decimal:
    """The `<name> $X` a refusal quotes."""
    start = message.index(f"{name} $") + len(name) + 2
    end = start
    while end < len(message) and (message[end].isdigit() or message[end] == "."):
        end += 1
    return Decimal(message[start:end])


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
def test_ten_create_processes_at_once_make_exactly_the_two_the_budget_fits(tmp_path):
    env = environment(tmp_path) | SLOW
    write_budget(Path(env["GPUCLOUD_HOME"]))
    began = time.monotonic()
    results = start_all(env, CREATE, RACERS)
    codes = sorted(r.returncode for r in results)
    made = cloud_rows(env)
    refusals = [json.loads(r.stdout)["error"]["message"] for r in results if r.returncode == 7]
    quoted = sorted({figure(m, "committed") for m in refusals})
    # spent + committed: what the month holds before this request.
    held = [figure(m, "spent") + figure(m, "committed") for m in refusals]
    print(f"\n{RACERS} processes: machines created {len(made)}, exit codes {codes}, committed "
          f"${PER_MACHINE * len(made)} vs budget $25, refusals quote committed "
          f"{[str(q) for q in quoted]} "
          f"({time.monotonic() - began:.1f} s)")
    assert len(made) == 2, [r.stderr for r in results]
    assert codes == [0] * 2 + [7] * (RACERS - 2), [(r.stdout, r.stderr) for r in results
                                                   if r.returncode not in (0, 7)]
    # A refused create journals nothing: the two launches are all there is.
    assert sorted(status for status, _ in journal(env).values()) == ["delivered"] * 2
    # Every refusal counts the two launches admitted, delivered or still in flight:
    # $19.92, less the seconds between a plan's deadline and its machine's delivery
    # (a few cents under load); one of them missing would leave $9.96 at most.
    assert all(PER_MACHINE * 2 - 1 <= h <= PER_MACHINE * 2 for h in held), refusals


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
def test_instances_batches_in_processes_never_pass_the_budget_together(tmp_path):
    env = environment(tmp_path) | SLOW
    write_budget(Path(env["GPUCLOUD_HOME"]))
    # Each batch of two fits the budget alone, so each passes its plan.
    results = start_all(env, [*CREATE, "--instances", "2", "--concurrency", "2"], 4)
    made = cloud_rows(env)
    print(f"\n4 processes of --instances 2: machines created {len(made)}, exit codes "
          f"{sorted(r.returncode for r in results)}, committed ${PER_MACHINE * len(made)} "
          "vs budget $25")
    assert len(made) == 2, [r.stdout + r.stderr for r in results]
    assert any(r.returncode != 0 for r in results)


def _sandbox_rows() -> list[dict[str, str]]:
    return cloud_rows({"GPUCLOUD_SANDBOX_DB": str(sandbox_db_path())})


@pytest.fixture
def budgeted(monkeypatch):
    for name, value in SLOW.items():
        monkeypatch.setenv(name, value)
    write_budget(config_dir())


def in_threads(n: int, call: Callable[[], object]) -> list[object]:
    """`call` in n threads released at once: what each returned, or its
    BudgetExceededError."""
    outcomes: list[object] = []
    gate = threading.Barrier(n)

    def one() -> None:
        gate.wait()
        try:
            outcomes.append(call())
        except BudgetExceededError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_threads_of_a_client_make_exactly_two(budgeted):
    with Client(providers=["sandbox"]) as client:
        outcomes = in_threads(RACERS, lambda: client.create(
            gpu="h100", count=8, provider="sandbox", auto_shutdown="30m"))
    refused = [o for o in outcomes if isinstance(o, BudgetExceededError)]
    print(f"\n{RACERS} threads: machines created {len(_sandbox_rows())}, refused {len(refused)}")
    assert len(_sandbox_rows()) == 2 and len(refused) == RACERS - 2, outcomes


def test_async_client_gather_makes_exactly_two(budgeted):
    async def main() -> list[object]:
        async with AsyncClient(providers=["sandbox"]) as client:
            return await asyncio.gather(
                *(client.create(gpu="h100", count=8, provider="sandbox", auto_shutdown="30m")
                  for _ in range(RACERS)), return_exceptions=True)

    outcomes = asyncio.run(main())
    refused = [o for o in outcomes if isinstance(o, BudgetExceededError)]
    print(f"\nasyncio gather of {RACERS}: machines created {len(_sandbox_rows())}, "
          f"refused {len(refused)}")
    assert len(_sandbox_rows()) == 2 and len(refused) == RACERS - 2, outcomes


def test_a_batch_of_different_requests_is_admitted_machine_by_machine(budgeted):
    # Three kinds of request, each planned on its own: each fits alone, all three do not.
    requests = [dict(gpu="h100", count=8, provider="sandbox", auto_shutdown=window)
                for window in ("30m", "29m", "28m")]
    with Client(providers=["sandbox"]) as client:
        result = client.create_many(requests=requests, concurrency=3)
    failed = [item for item in result.items if item.error is not None]
    print(f"\nbatch of 3 kinds: machines created {len(_sandbox_rows())}, failed {len(failed)}")
    assert len(_sandbox_rows()) == 2
    assert len(failed) == 1 and "monthly budget" in str(failed[0].error)


def test_job_submits_in_threads_never_pass_the_budget(monkeypatch):
    for name, value in SLOW.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "30")
    spec = {"name": "race", "image": "python:3.12", "command": ["true"],
            "resources": {"gpu": "h100", "gpu_count": 8}, "max_runtime": "30m"}
    with Client(providers=["sandbox"]) as client:
        one_job = client.plan_job(spec, provider="sandbox").total
    assert one_job is not None
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "config.toml").write_text(
        f'[budget]\nmonthly = "{one_job * 2 + one_job / 2}"\n')  # fits two jobs, not three
    with Client(providers=["sandbox"]) as client:
        outcomes = in_threads(6, lambda: client.submit(spec, provider="sandbox"))
    refused = [o for o in outcomes if isinstance(o, BudgetExceededError)]
    print(f"\n6 job submits: jobs made {6 - len(refused)}, refused {len(refused)}")
    assert len(refused) == 4, outcomes

