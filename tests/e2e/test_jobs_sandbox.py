"""Jobs end to end against the simulated cloud: the example job file submitted,
listed, its logs read and followed until it succeeds; cancel; and what must
never happen (a secret that leaks, a job sent without its secrets)."""

from __future__ import annotations

import asyncio
import pickle
import time
from pathlib import Path

import pytest

from gpucloud import (
    AsyncClient, BudgetExceededError, Client, CredentialsError, InternalServerError, JobStatus,
)
from gpucloud.config.settings import sandbox_db_path, state_db_path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train-job.yaml"
HF = "hf_e2e_secret_value_0123"
WANDB = "wandb-e2e-secret-value-4567"


@pytest.fixture(autouse=True)
def secrets_and_speed(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", HF)
    monkeypatch.setenv("WANDB_API_KEY", WANDB)
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "0.3")


@pytest.fixture
def client():
    with Client(providers=["sandbox"], sleep=lambda s: time.sleep(min(s, 0.05))) as c:
        yield c


def until_ended(client, job, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        job = client.job(job.ref)
        if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED):
            return job
        time.sleep(0.05)
    raise AssertionError(f"{job.ref} still {job.status}")


def test_the_example_job_runs_to_success(client):
    plan = client.plan_job(EXAMPLE, provider="sandbox")
    assert plan.shutdown_at is not None and plan.hours_basis == "auto_shutdown"  # max_runtime
    job = client.submit(EXAMPLE, provider="sandbox")
    assert job.launch_id.startswith("gj-") and job.shutdown_at is not None
    assert job.instance is not None and job.instance.gpu_count == 8
    assert [j.ref for j in client.jobs()] == [job.ref]
    assert client.job("llama-finetune").ref == job.ref  # by name
    lines = list(client.logs(job, follow=True))
    assert any("CHECKPOINT_DIR=/checkpoints" in line for line in lines)
    assert lines[-1].endswith("exited with code 0")
    done = client.job(job)
    assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0
    assert "secrets set: HF_TOKEN, WANDB_API_KEY (values not shown)" in client.logs(job)
    machine = client.get(done.instance.ref)
    assert machine.launch_id == job.launch_id and machine.shutdown_at == job.shutdown_at


def test_cancel(client):
    job = client.submit(EXAMPLE, provider="sandbox")
    cancelled = client.cancel(job.ref)
    assert cancelled.status == JobStatus.CANCELLED
    assert client.cancel(job.ref).status == JobStatus.CANCELLED  # again: nothing to do
    assert until_ended(client, job).status == JobStatus.CANCELLED


def test_a_failing_job_reports_failed(client, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_FAIL", "1")
    with Client(providers=["sandbox"]) as fresh:
        job = fresh.submit(_spec(EXAMPLE, retries=0), provider="sandbox")
        ended = until_ended(fresh, job)
    assert ended.status == JobStatus.FAILED and ended.exit_code == 1


def _spec(path, **changes):
    from gpucloud.jobs.spec import load

    return load(path).model_copy(update=changes)


def test_a_missing_secret_stops_the_submit_before_anything_is_sent(client, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY")
    with pytest.raises(CredentialsError, match="secret WANDB_API_KEY .*env WANDB_API_KEY") as exc:
        client.submit(EXAMPLE, provider="sandbox")
    assert "nothing was sent" in exc.value.hint
    assert not sandbox_db_path().exists()  # not even the offers were asked


def test_a_keyring_secret_is_read_from_the_keyring(client, isolated):
    isolated.set_password("wandb", "training", WANDB)
    spec = _spec(EXAMPLE)
    spec = spec.model_copy(update={"secrets": {
        **spec.secrets, "WANDB_API_KEY": type(spec.secrets["HF_TOKEN"])(keyring="wandb/training")}})
    assert client.submit(spec, provider="sandbox").status == JobStatus.QUEUED


def test_max_cost_is_kept_before_anything_is_launched(client):
    with pytest.raises(BudgetExceededError):
        client.submit(_spec(EXAMPLE, max_cost=_money("1")), provider="sandbox")
    assert client.jobs(provider="sandbox") == []


def _money(text):
    from decimal import Decimal

    return Decimal(text)


def test_an_ambiguous_submit_is_adopted_not_sent_twice(client, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_AFTER_CREATE", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "create")
    with Client(providers=["sandbox"], sleep=lambda s: None) as fresh:
        job = fresh.submit(EXAMPLE, provider="sandbox")
        assert [a.outcome for a in fresh.last_attempts] == ["adopted"]
        assert [j.id for j in fresh.jobs()] == [job.id]


def test_no_secret_in_the_journal_the_ledger_or_an_error(client, monkeypatch):
    client.submit(EXAMPLE, provider="sandbox")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_5XX", "1")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_FAIL_ON", "create")
    with Client(providers=["sandbox"], sleep=lambda s: None) as fresh:
        with pytest.raises(InternalServerError) as caught:
            fresh.submit(EXAMPLE, provider="sandbox")
    error = caught.value
    assert error.launch_id.startswith("gj-") and error.request is not None
    for blob in (pickle.dumps(error), repr(error).encode(), str(error).encode(),
                 error.request.content, state_db_path().read_bytes(),
                 sandbox_db_path().read_bytes()):
        assert HF.encode() not in blob and WANDB.encode() not in blob


def test_async_client_submits_lists_and_reads_logs():
    async def main():
        async with AsyncClient(providers=["sandbox"]) as client:
            job = await client.submit(EXAMPLE, provider="sandbox")
            assert [j.ref for j in await client.jobs()] == [job.ref]
            # follow=True is an async iterator of lines, as Client's is an iterator.
            lines = [line async for line in client.logs(job, follow=True)]
            assert lines[-1].rstrip().endswith("exited with code 0")
            assert (await client.job(job.ref)).status == JobStatus.SUCCEEDED
            text = await client.logs(job)
            assert text.splitlines() == lines
            tail = [line async for line in client.follow_logs(job, tail=2)]
            assert tail == lines[-2:]
            return job

    asyncio.run(main())


def test_client_follow_logs_yields_what_logs_follow_does(client):
    job = client.submit(EXAMPLE, provider="sandbox")
    lines = list(client.follow_logs(job))
    assert lines == list(client.logs(job, follow=True)) == client.logs(job).splitlines()
    assert list(client.follow_logs(job, tail=1)) == lines[-1:]


def test_following_with_a_tail_shows_the_last_lines_then_every_new_one(client):
    job = client.submit(EXAMPLE, provider="sandbox")
    lines = list(client.logs(job, follow=True, tail=2))
    whole = client.logs(job).splitlines()
    assert lines[-1] == whole[-1] and len(lines) <= len(whole)
    assert set(lines) <= set(whole)
