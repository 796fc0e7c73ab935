"""`gpucloud doctor REF --nccl` end to end: the CLI, the client's exec and the
sandbox's exec API, whose simulated machine is taught the NCCL commands from
recorded outputs (tests/fixtures/nccl, sources in its SOURCE.txt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.cli import app
from gpucloud.machine import nccl
from gpucloud.models import Job, JobStatus
from gpucloud.providers.sandbox import exec_sim

NCCL = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
A3MEGA = (NCCL / "real" / "allreduce_h100x16_2nodes_a3mega.txt").read_text()


@pytest.fixture
def cli():
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


@pytest.fixture
def machine():
    return Client().create(gpu="h100", count=8, provider="sandbox", name="doc",
                           auto_shutdown="2h")


def teach(monkeypatch, probe: str, bench: str, code: int = 0, stderr: str = "",
          tools: tuple[str, ...] = ()) -> list[str]:
    """The simulated machine answers the probe (with `tools` added to its tools
    section, the last one) and the benchmark; the rest as before."""
    ran: list[str] = []
    original = exec_sim.Box.run
    answer = (NCCL / probe).read_text().rstrip("\n") + "".join(f"\n{t}" for t in tools) + "\n"

    def run(self, command):
        if command == nccl.PROBE_COMMAND:
            return 0, answer, ""
        if "all_reduce_perf" in command or "torch.distributed.run" in command:
            ran.append(command)
            return code, bench, stderr
        return original(self, command)

    monkeypatch.setattr(exec_sim.Box, "run", run)
    return ran


def test_doctor_nccl_runs_nccl_tests_and_reports_the_verdict(cli, machine, monkeypatch):
    ran = teach(monkeypatch, "probe_ib_8x400.txt", A3MEGA)
    result = cli("doctor", "doc", "--nccl")
    assert result.exit_code == 0, result.output
    assert ran == ["env NCCL_DEBUG=INFO /opt/nccl-tests/build/all_reduce_perf "
                   "-b 8 -e 1G -f 2 -g 8"]
    assert "peak bus bandwidth 338.8 GB/s" in " ".join(result.stdout.split())
    assert f"{machine.ref}: ready" in result.stdout and "burn" not in result.stdout


def test_doctor_nccl_json_shape(cli, machine, monkeypatch):
    teach(monkeypatch, "probe_ib_8x400.txt", A3MEGA)
    result = cli("doctor", "doc", "--nccl", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    data = json.loads(result.stdout)
    assert set(data) == {"instance", "job", "nodes", "checks", "nccl", "ok"}
    assert data["instance"] == machine.ref and data["job"] is None and data["ok"] is True
    assert set(data["nodes"][0]) == {"rank", "instance", "address", "gpus"}
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in data["checks"])
    assert set(data["nccl"]) == {"tool", "command", "ranks", "network", "rows",
                                 "avg_busbw_gbps", "peak_busbw_gbps", "expected_busbw_gbps",
                                 "expected_basis", "ratio", "ok_fraction", "fail_fraction"}
    row = data["nccl"]["rows"][-1]
    assert set(row) == {"size", "count", "type", "redop", "out_of_place", "in_place"}
    assert set(row["in_place"]) == {"time_us", "algbw_gbps", "busbw_gbps", "wrong"}
    assert data["nccl"]["expected_busbw_gbps"] == 360.0 and data["nccl"]["ratio"] == 0.941


def test_a_fault_exits_9_with_its_one_line_fix(cli, machine, monkeypatch):
    teach(monkeypatch, "probe_ifname_missing.txt", "", code=1,
          stderr="NCCL WARN Bootstrap : no socket interface found\n")
    result = cli("doctor", "doc", "--nccl")
    assert result.exit_code == 9
    assert "fix (socket-ifname): set NCCL_SOCKET_IFNAME=eth0" in result.stdout
    assert "NOT ready" in result.stdout
    data = json.loads(cli("doctor", "doc", "--nccl", "--json").stdout)
    assert data["ok"] is False and {"socket-ifname", "nccl"} <= {c["name"] for c in
                                                                 data["checks"]}


def test_a_plain_sandbox_machine_has_no_benchmark_and_says_so(cli, machine):
    result = cli("doctor", "doc", "--nccl", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    last = data["checks"][-1]
    assert last["name"] == "nccl" and last["status"] == "warn" and "nccl-tests" in last["fix"]


def test_doctor_nccl_on_a_job_runs_across_its_nodes_in_rank_order(cli, monkeypatch):
    client = Client()
    nodes = [client.create(gpu="h100", count=8, provider="sandbox", name=f"node{i}",
                           auto_shutdown="2h") for i in range(2)]
    nodes = [n.model_copy(update={"private_ip": f"10.0.0.{11 + i}"})
             for i, n in enumerate(nodes)]
    job = Job(provider="sandbox", id="job-2n", name="train", status=JobStatus.RUNNING,
              instance=nodes[0], nodes=2, instances=tuple(nodes), simulated=True)
    monkeypatch.setattr(Client, "job", lambda self, ref: job)
    ran = teach(monkeypatch, "probe_ib_8x400.txt", A3MEGA)
    result = cli("doctor", "train", "--nccl", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["job"] == "sandbox/job-2n" and data["instance"] == nodes[0].ref
    assert [(n["rank"], n["instance"], n["address"]) for n in data["nodes"]] == [
        (0, nodes[0].ref, "10.0.0.11"), (1, nodes[1].ref, "10.0.0.12")]
    assert ran == ["mpirun --allow-run-as-root -np 16 -H 10.0.0.11:8,10.0.0.12:8 -x "
                   "NCCL_DEBUG=INFO /opt/nccl-tests/build/all_reduce_perf -b 8 -e 1G -f 2 -g 1"]
    assert data["nccl"]["ranks"] == 16


def test_an_unknown_ref_is_still_a_clear_error(cli):
    result = cli("doctor", "nothing-here", "--nccl", "--json")
    assert result.exit_code not in (0, 1) and "error" in json.loads(result.stdout)


def test_a_multi_node_jobs_name_checks_every_node_not_the_machine_of_that_name(
        cli, monkeypatch):
    """A sandbox multi-node job's node 0 carries the job's name; `doctor NAME
    --nccl` (as the docs write it) runs across the job's nodes, not on that
    one machine."""
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "3600")
    job = Client().submit({"name": "train2", "image": "busybox", "command": ["true"],
                           "resources": {"gpu": "h100", "gpu_count": 8}, "nodes": 2,
                           "max_runtime": "2h"}, provider="sandbox")
    assert [m.name for m in job.instances][0] == "train2"  # what made the name ambiguous
    ran = teach(monkeypatch, "probe_ib_8x400.txt", A3MEGA)
    result = cli("doctor", "train2", "--nccl", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["job"] == job.ref and len(data["nodes"]) == 2
    assert len(ran) == 1 and "-np 16" in ran[0]


IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"


def _two_node_job(monkeypatch, name: str):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "3600")
    return Client().submit({"name": name, "image": IMAGE, "command": ["true"],
                            "resources": {"gpu": "h100", "gpu_count": 8}, "nodes": 2,
                            "max_runtime": "2h"}, provider="sandbox")


def test_image_runs_the_all_reduce_inside_it_on_every_node(cli, monkeypatch):
    """--image: torch.distributed's all-reduce in the job's image (its PyTorch and
    NCCL), one docker run per node with the rendezvous env, IB devices passed in
    where the probe saw InfiniBand; nccl-tests on the machine is passed over."""
    job = _two_node_job(monkeypatch, "imgjob")
    ran = teach(monkeypatch, "probe_ib_8x400.txt", A3MEGA, tools=("/usr/bin/docker",))
    result = cli("doctor", "imgjob", "--nccl", "--image", IMAGE, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["job"] == job.ref and data["nccl"]["tool"] == "torch"
    assert len(ran) == 2
    for rank, command in enumerate(sorted(ran, key=lambda c: "NODE_RANK=1" in c)):
        assert "$gc_docker run --rm --gpus all --network host --ipc host" in command
        assert "--device /dev/infiniband --cap-add IPC_LOCK --ulimit memlock=-1" in command
        assert f"-e NODE_RANK={rank}" in command and "-e NCCL_DEBUG=INFO" in command
        assert f" {IMAGE} python3 -m torch.distributed.run --nproc_per_node=8" in command
        assert "all_reduce_perf" not in command
    assert data["nccl"]["ranks"] == 16


def test_image_without_docker_on_the_machine_warns_and_runs_nothing(cli, monkeypatch):
    _two_node_job(monkeypatch, "nodocker")
    ran = teach(monkeypatch, "probe_ib_8x400.txt", A3MEGA)
    result = cli("doctor", "nodocker", "--nccl", "--image", IMAGE, "--json")
    assert result.exit_code == 0, result.output  # a warning, not a failed check
    last = json.loads(result.stdout)["checks"][-1]
    assert last["status"] == "warn" and "docker is not on the machine" in last["detail"]
    assert ran == []


@pytest.mark.parametrize("args", [["--image", IMAGE], ["--nccl", "--image", "--rm"]])
def test_image_is_a_usage_error_without_nccl_or_as_an_option(cli, machine, args):
    result = cli("doctor", "doc", *args, "--json")
    assert result.exit_code == 2, result.output
    assert "error" in json.loads(result.stdout)
