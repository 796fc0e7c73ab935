"""The simulated cloud places a multi-node job itself: N machines, all or
nothing, each with its own private address and the rendezvous env (one
MASTER_ADDR, its own NODE_RANK); a lost node (JOB_NODE_FAIL) fails or retries
the whole job; cancel and max_runtime end every node. The clock is injected."""

from __future__ import annotations

import re

import pytest
from pydantic import SecretStr

from gpucloud.errors import InsufficientCapacityError
from gpucloud.models import InstanceSpec, InstanceStatus, JobRun, JobStatus
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    Env, _no_sandbox_env, catalog, clock,
)

SECRET = "pw-s3cr3t-node-0123"


def make(tmp_path, catalog, clock, **knobs):
    knobs = {"boot_seconds": 5, "terminate_seconds": 3, "job_seconds": 100, "seed": 7, **knobs}
    return Env(tmp_path / "cloud.sqlite", catalog, clock, **knobs)


def submit(env, nodes=2, retries=0, max_runtime=None):
    run = JobRun(name="train", image="pytorch/pytorch:2.4.0",
                 command=("sh", "-c", "torchrun --node_rank=$NODE_RANK train.py"),
                 env={"EPOCHS": "3"}, secret_env={"HF_TOKEN": SecretStr(SECRET)},
                 retries=retries, checkpoint_dir="/ckpt", max_runtime_seconds=max_runtime,
                 gpu_count=8, nodes=nodes)
    spec = InstanceSpec(offer=env.offer("sim.8xH100"), launch_id="gj-1", name="train", job=run)
    return env.run(env.provider.submit_job(spec))


def status(env, job):
    return env.run(env.provider.get_job(job.id))


def logs(env, job):
    return env.run(env.provider.job_logs(job.id))


def node_envs(text):
    """{rank: {NAME: value}} from each node's env line."""
    out = {}
    for rank, rest in re.findall(r"\[node (\d)/2 [0-9.]+\] env: (.*)", text):
        out.setdefault(int(rank), []).append(dict(p.split("=", 1) for p in rest.split("; ")[0]
                                                  .split()))
    return out


def test_two_nodes_each_with_its_address_rank_and_the_one_master(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    job = submit(env)
    assert job.nodes == 2 and len(job.instances) == 2
    first, second = job.instances
    assert job.instance == first and first.id != second.id
    assert first.private_ip and second.private_ip and first.private_ip != second.private_ip
    assert first.launch_id == second.launch_id == "gj-1"
    clock.advance(6)
    text = logs(env, job)
    envs = node_envs(text)
    assert sorted(envs) == [0, 1]
    zero, one = envs[0][0], envs[1][0]
    assert zero["MASTER_ADDR"] == one["MASTER_ADDR"] == first.private_ip
    assert (zero["NODE_RANK"], one["NODE_RANK"]) == ("0", "1")
    for node in (zero, one):
        assert node["NNODES"] == "2" and node["WORLD_SIZE"] == "16"
        assert node["GPUS_PER_NODE"] == "8" and node["MASTER_PORT"] == "29500"
        assert node["GPUCLOUD_NODE_ADDRS"] == f"{first.private_ip},{second.private_ip}"
        assert node["EPOCHS"] == "3" and node["CHECKPOINT_DIR"] == "/ckpt"
    assert "on 2 nodes" in text and "secrets set: HF_TOKEN (values not shown)" in text
    assert SECRET not in text
    listed = env.run(env.provider.list_instances())
    assert sorted(i.id for i in listed) == sorted([first.id, second.id])


def test_a_one_node_job_has_no_node_list(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    job = submit(env, nodes=1)
    assert job.nodes == 1 and job.instances == () and job.instance is not None
    clock.advance(6)
    text = logs(env, job)
    assert "env: CHECKPOINT_DIR=/ckpt EPOCHS=3" in text and "[node" not in text


def test_the_nodes_are_placed_all_or_nothing(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock, capacity=1)
    with pytest.raises(InsufficientCapacityError):
        submit(env)
    assert env.run(env.provider.list_instances()) == []  # not one node left alone


def test_a_lost_node_fails_the_whole_job_and_ends_every_node(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock, job_node_fail=1)
    job = submit(env)
    clock.advance(5 + 100)
    failed = status(env, job)
    assert failed.status == JobStatus.FAILED and failed.exit_code is None
    assert re.fullmatch(r"node [01] of 2 was lost \(simulated\): the whole job was stopped "
                        r"on every node", failed.message)
    assert failed.message in logs(env, job)
    clock.advance(1)
    assert [i.status for i in status(env, job).instances] == [InstanceStatus.TERMINATED] * 2


def test_a_lost_node_retries_the_whole_job_from_its_checkpoint(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock, job_node_fail=0.5)
    # run 1: the job's die says success, the node die loses a node at 50%;
    # run 2: both dice clean.
    rolls = iter([0.99, 0.5, 0.0, 0.99, 0.5, 0.99])
    env.cloud.rng.random = lambda: next(rolls)
    job = submit(env, retries=1)
    clock.advance(5 + 50)
    between = status(env, job)
    assert between.status == JobStatus.QUEUED
    assert between.message == "run 1 lost a node; retrying all 2 nodes on new machines"
    clock.advance(5 + 50)
    assert status(env, job).status == JobStatus.SUCCEEDED
    text = logs(env, job)
    assert "[run 2/2] pulled pytorch/pytorch:2.4.0 on 2 nodes" in text
    assert "resuming from /ckpt/step-005" in text
    envs = node_envs(text)
    assert len(envs[0]) == len(envs[1]) == 2  # every node started again, not one
    assert text.count("step 6/10") == 1


def test_cancel_ends_every_node(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    job = submit(env)
    clock.advance(20)
    env.run(env.provider.cancel_job(job.id))
    clock.advance(3)
    cancelled = status(env, job)
    assert cancelled.status == JobStatus.CANCELLED
    assert [i.status for i in cancelled.instances] == [InstanceStatus.TERMINATED] * 2
    listed = env.run(env.provider.list_instances())
    assert {i.id: i.status for i in listed} == {
        i.id: InstanceStatus.TERMINATED for i in job.instances}


def test_max_runtime_ends_every_node(tmp_path, catalog, clock):
    env = make(tmp_path, catalog, clock)
    job = submit(env, max_runtime=60)
    clock.advance(61)
    ended = status(env, job)
    assert ended.status == JobStatus.FAILED and "max_runtime exceeded" in ended.message
    assert [i.status for i in ended.instances] == [InstanceStatus.TERMINATED] * 2
