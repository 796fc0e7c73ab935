"""Type-checked (mypy --strict) by tests/unit/test_typing.py, never run: the
public API as a user's script writes it, with the types a user relies on."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import assert_type

from gpucloud.jobs.spec import Resources
from gpucloud import (
    APIError, AsyncClient, Attempt, BatchItem, BatchResult, Client, CreateRequest, CostEstimate,
    CostReport, GpuCloudError, Instance,
    InsufficientCapacityError, Job, JobSpec, JobStatus, Offer, Plan, ReapReport, SpendLine,
    parse_gpu,
)


def sync_usage() -> None:
    client = Client(providers=["sandbox"], credentials={"lambda": "key"})
    offers = client.offers(gpu="h100", count=8, max_price=Decimal("30"))
    assert_type(offers, list[Offer])
    assert_type(offers[0].price_per_hour, Decimal)
    estimate = client.estimate(gpu="h100", count=8, hours=72)
    assert_type(estimate, CostEstimate)
    client.estimate(gpu="h100", hours=timedelta(hours=3))
    plan = client.plan(gpu="h100", count=8, auto_shutdown="4h", max_cost="100", n=2)
    assert_type(plan, Plan)
    machine = client.create(gpu="h100", count=8, auto_shutdown=timedelta(hours=4), max_cost=100)
    assert_type(machine, Instance)
    batch = client.create_many(gpu="h100", count=8, n=3, max_cost=Decimal("500"))
    assert_type(batch, BatchResult)
    assert_type(batch.instances, list[Instance])
    assert_type(batch.failures, list[BatchItem])
    assert_type(client.create_many(requests=[CreateRequest(gpu="h100"), {"gpu": "a100"}],
                                   concurrency=4, all_or_nothing=True, batch="b1"), BatchResult)
    assert_type(client.wait(machine, until="running", timeout=600), Instance)
    assert_type(client.get(machine.ref), Instance)
    assert_type(client.list(), list[Instance])
    assert_type(client.list(all=True, status=["running", "stopped"]), list[Instance])
    assert_type(client.list(status="running,stopped")[0].final_cost, Decimal | None)
    assert_type(client.delete_all(provider="sandbox", name_prefix="exp-", dry_run=True),
                list[Instance])
    assert_type(client.verify("lambda"), datetime | None)
    assert_type(client.warnings, list[str])
    assert_type(client.last_attempts, list[Attempt])
    assert_type(client.last_created, list[Instance])
    assert_type(client.extend(machine, by="2h"), Instance)
    assert_type(client.extend(machine.ref, until="2026-12-01T18:00Z"), Instance)
    report = client.reap(dry_run=True)
    assert_type(report, ReapReport)
    assert_type(report.actions[0].instance, Instance)
    client.create(gpu="h100", until=datetime(2026, 12, 1, 18, tzinfo=timezone.utc))
    spend = client.costs(month="2026-11", by="provider")
    assert_type(spend, CostReport)
    assert_type(spend.lines[0], SpendLine)
    assert_type(spend.total, Decimal | None)
    client.delete(machine)
    assert_type(parse_gpu("H100 80GB"), str)
    try:
        client.create(gpu="h100")
    except InsufficientCapacityError as exc:
        assert_type(exc.attempts, list[Attempt])
        assert_type(exc.status_code, int)
    except APIError as exc:
        assert_type(exc.provider, str)
        assert_type(exc.launch_id, str | None)
    except GpuCloudError as exc:
        assert_type(exc.hint, str | None)
        assert_type(exc.instances, list[Instance])
    with Client() as scoped:
        scoped.list()


def job_usage() -> None:
    client = Client(providers=["sandbox"])
    spec = JobSpec(name="train", image="pytorch/pytorch:2.4.0",
                   resources=Resources(gpu="h100", gpu_count=8),
                   max_runtime="6h", max_cost=Decimal("200"))
    assert_type(client.plan_job(spec), Plan)
    job = client.submit(spec)
    assert_type(job, Job)
    assert_type(client.submit("examples/train-job.yaml", provider="sandbox"), Job)
    assert_type(client.jobs(), list[Job])
    assert_type(client.job(job.ref).status, JobStatus)
    assert_type(client.job("train").exit_code, int | None)
    assert_type(client.logs(job), str)
    for line in client.logs(job, follow=True):
        assert_type(line, str)
    assert_type(client.cancel(job), Job)


async def async_usage() -> None:
    async with AsyncClient(providers=["sandbox"]) as client:
        machine = await client.create(gpu="h100", count=8, auto_shutdown="1h")
        assert_type(machine, Instance)
        many = await client.create_many(gpu="h100", count=1, n=2)
        assert_type(many, BatchResult)
        assert_type(await client.offers(gpu="a100-80gb"), list[Offer])
        assert_type(await client.extend(machine, by=timedelta(hours=1)), Instance)
        assert_type(await client.reap(), ReapReport)
        await client.delete(machine.ref)
        assert_type(await client.list(all=True, status="terminated"), list[Instance])
        assert_type(await client.delete_all(name_prefix="exp-"), list[Instance])
        assert_type(await client.costs(), CostReport)
        job = await client.submit("examples/train-job.yaml")
        assert_type(job, Job)
        assert_type(await client.jobs(), list[Job])
        assert_type(await client.logs(job), str)
        async for line in client.follow_logs(job):
            assert_type(line, str)
        assert_type(await client.cancel(job.ref), Job)
