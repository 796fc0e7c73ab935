"""The simulated cloud runs jobs: queued while the machine boots, running for
JOB_SECONDS, then succeeded, failed (JOB_FAIL) or preempted (JOB_PREEMPT),
retried up to `retries` and resumed from the checkpoint; cancel; logs. The
clock is injected, so every timeline is exact."""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from gpucloud.errors import BadRequestError, ConfigurationError, NotFoundError
from gpucloud.models import InstanceSpec, InstanceStatus, JobRun, JobStatus
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    Env, _no_sandbox_env, catalog, clock,
)

SECRET = "pw-s3cr3t-db-0123"


def make(tmp_path, catalog, clock, **knobs):
    knobs = {"boot_seconds": 5, "terminate_seconds": 3, "job_seconds": 100, "seed": 7, **knobs}
    return Env(tmp_path / "cloud.sqlite", catalog, clock, **knobs)


def submit(env, retries=0, checkpoint="/ckpt", max_runtime=None, launch_id="gj-1", **kw):
    run = JobRun(name="train", image="pytorch/pytorch:2.4.0", command=("python", "train.py"),
                 env={"EPOCHS": "3"}, secret_env={"DATABASE_URL": SecretStr(SECRET)},
                 retries=retries, checkpoint_dir=checkpoint, max_runtime_seconds=max_runtime)
    spec = InstanceSpec(offer=env.offer(), launch_id=launch_id, name="train", job=run, **kw)
    return env.run(env.provider.submit_job(spec))


def status(env, job):
    return env.run(env.provider.get_job(job.id))


def logs(env, job, tail=None):
    return env.run(env.provider.job_logs(job.id, tail))


def test_a_job_runs_then_succeeds_and_its_machine_ends_with_it(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    job = submit(env)
    assert job.status == JobStatus.QUEUED and job.launch_id == "gj-1" and job.simulated
    assert job.instance is not None and job.instance.launch_id == "gj-1"
    clock.advance(6)
    running = status(env, job)
    assert running.status == JobStatus.RUNNING and running.started_at == clock.dt(-1)
    assert running.instance.status == InstanceStatus.RUNNING
    clock.advance(100)
    done = status(env, job)
    assert done.status == JobStatus.SUCCEEDED and done.exit_code == 0
    assert done.finished_at == clock.dt(-1)
    assert done.instance.status == InstanceStatus.TERMINATED  # billing stopped with the job
    text = logs(env, job)
    assert "CHECKPOINT_DIR=/ckpt" in text and "EPOCHS=3" in text
    assert "secrets set: DATABASE_URL (values not shown)" in text
    assert "saved /ckpt/step-010" in text and text.endswith("exited with code 0\n")
    assert logs(env, job, tail=1).count("\n") == 1
    assert [j.id for j in env.run(env.provider.list_jobs())] == [job.id]


def test_the_cloud_never_keeps_a_secret_value(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    job = submit(env)
    clock.advance(200)
    assert SECRET not in logs(env, job)
    assert SECRET.encode() not in (tmp_path / "cloud.sqlite").read_bytes()


def test_failure_is_failed_with_the_exit_code(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock, job_fail=1)
    job = submit(env)
    clock.advance(5 + 50)
    failed = status(env, job)
    assert failed.status == JobStatus.FAILED and failed.exit_code == 1
    assert failed.message == "exited with code 1"


def test_preemption_without_retries_fails_with_a_message(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock, job_preempt=1)
    job = submit(env)
    clock.advance(5 + 100)
    failed = status(env, job)
    assert failed.status == JobStatus.FAILED and failed.exit_code is None
    assert "preempted" in failed.message
    assert "preempted: the machine was reclaimed" in logs(env, job)


def test_a_preempted_run_is_retried_and_resumes_from_its_checkpoint(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock, job_preempt=0.5)
    rolls = iter([0.0, 0.5, 0.99, 0.5])  # preempted at 50%, then a clean run
    env.cloud.rng.random = lambda: next(rolls)
    job = submit(env, retries=2)
    clock.advance(5 + 50)
    between = status(env, job)
    assert between.status == JobStatus.QUEUED and "retrying" in between.message
    clock.advance(5 + 50)  # a fresh machine boots, then the other half is left
    done = status(env, job)
    assert done.status == JobStatus.SUCCEEDED
    text = logs(env, job)
    assert "[run 2/3]" in text and "resuming from /ckpt/step-005" in text
    assert text.count("step 6/10") == 1  # steps done before are not run again


def test_without_a_checkpoint_a_rerun_starts_over(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock, job_preempt=0.5)
    rolls = iter([0.0, 0.5, 0.99, 0.5])
    env.cloud.rng.random = lambda: next(rolls)
    job = submit(env, retries=1, checkpoint=None)
    clock.advance(5 + 50 + 5 + 99)
    assert status(env, job).status == JobStatus.RUNNING  # the whole run again
    clock.advance(1)
    assert status(env, job).status == JobStatus.SUCCEEDED


def test_max_runtime_ends_the_job(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    job = submit(env, max_runtime=60)
    clock.advance(61)
    ended = status(env, job)
    assert ended.status == JobStatus.FAILED and "max_runtime exceeded" in ended.message
    assert ended.instance.status == InstanceStatus.TERMINATED


def test_cancel_stops_the_job_and_its_machine(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    job = submit(env)
    clock.advance(20)
    env.run(env.provider.cancel_job(job.id))
    env.run(env.provider.cancel_job(job.id))  # idempotent
    clock.advance(3)
    cancelled = status(env, job)
    assert cancelled.status == JobStatus.CANCELLED
    assert cancelled.instance.status == InstanceStatus.TERMINATED
    assert logs(env, job).endswith("cancelled: cancelled by the user\n")
    clock.advance(1000)
    assert status(env, job).status == JobStatus.CANCELLED  # never "succeeded" later


def test_unknown_job_and_bad_body(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    with pytest.raises(NotFoundError):
        env.run(env.provider.get_job("sbj-nope"))
    bad = env.raw("POST", "/v1/jobs", json={"instance_type": "sim.1xH100",
                                             "region": "sim-east-1", "name": "x"})
    assert bad.status_code == 422 and "image" in bad.json()["error"]["message"]
    with pytest.raises(BadRequestError):  # a 422 maps like any invalid request
        env.run(env.provider.submit_job(InstanceSpec(
            offer=env.offer(), launch_id="gj-3", name="t",
            job=JobRun(name="t", image="img", max_runtime_seconds=-1))))


def test_create_with_a_job_runs_the_job(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    run = JobRun(name="t", image="img")
    machine = env.create(launch_id="gj-2", job=run)
    jobs = env.run(env.provider.list_jobs())
    assert [j.instance.id for j in jobs] == [machine.id]


def test_job_knobs_are_probabilities(tmp_path, catalog, clock):
    with pytest.raises(ConfigurationError, match="probability"):
        make(tmp_path, catalog, clock, job_fail=2)


def test_the_job_request_carries_the_secret_only_to_the_cloud(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    seen = []
    handle = env.cloud.handle
    env.cloud.handle = lambda request: (seen.append(request), handle(request))[1]
    submit(env)
    post = next(r for r in seen if r.url.path == "/v1/jobs")
    assert json.loads(post.content)["secret_env"] == {"DATABASE_URL": SECRET}


def test_jobs_are_the_clouds_collaborator_with_typed_access(tmp_path, catalog):
    """The cloud holds its job simulation (composition, not a mixin), and the
    simulation reaches the cloud through a typed interface mypy checks: no
    `type: ignore` stands in for what it needs."""
    import subprocess
    import sys
    from pathlib import Path

    from gpucloud.providers.sandbox import job_sim
    from gpucloud.providers.sandbox.server import SandboxCloud

    cloud = SandboxCloud(tmp_path / "cloud.sqlite", catalog=catalog)
    assert not issubclass(SandboxCloud, job_sim.JobSimulation)
    assert isinstance(cloud.jobs, job_sim.JobSimulation) and cloud.jobs.cloud is cloud
    source = Path(job_sim.__file__)
    assert "type: ignore" not in source.read_text()
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental",
         str(source), str(source.with_name("server.py"))],
        capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stdout + result.stderr
