"""A multi-node job on the ssh provider against a real OpenSSH server on
127.0.0.1 (tests/_real_sshd.py): two configured hosts are two nodes. Both
are allocated as one batch, the job is started on each over ssh only once
both are held, with the same MASTER_ADDR and ranks 0 and 1 (read from the
env the job itself recorded on each host), its secret reaches the nodes and
no log; cancel ends both.

Two stand-ins sit first on the remote PATH, as no GPU and no Docker daemon
exist here: `nvidia-smi` prints a REAL recorded `nvidia-smi -L` output
(tests/fixtures/nvidia-smi/real/, sources in its SOURCE.txt), and `docker`
runs a job's `--entrypoint` command directly (CONSTRUCTED, as in
test_ssh_provider_real_sshd.py, here also skipping `--network host`, which a
multi-node job's container is given).
"""

from __future__ import annotations

import getpass
import logging
import os
import time
from pathlib import Path

import pytest

from gpucloud import Client
from gpucloud.errors import InsufficientCapacityError
from tests._real_sshd import needs_openssh, sshd  # noqa: F401 - a fixture

pytestmark = needs_openssh

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / "real"
SECRET = "s3cr3t-multinode-token-5b1f"

DOCKER = r"""#!/bin/sh
# CONSTRUCTED stand-in for `docker` (no daemon here): `docker run ...
# --entrypoint CMD IMAGE ARGS` runs CMD ARGS in place; `docker rm` does nothing.
case "$1" in
  rm) exit 0 ;;
  run) shift ;;
  *) exit 1 ;;
esac
entry=
while [ $# -gt 0 ]; do
  case "$1" in
    --rm) shift ;;
    --name|--gpus|-e|-v|--network) shift 2 ;;
    --entrypoint) entry=$2; shift 2 ;;
    *) break ;;
  esac
done
shift
exec "$entry" "$@"
"""


@pytest.fixture
def two_hosts(sshd, tmp_path):
    """config.toml with hosts box1 and box2 (each 2x B200) on the one server."""
    port, key, remote_bin = sshd
    smi = remote_bin / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] && exec cat {REAL / 'list_b200.txt'}\nexit 6\n")
    smi.chmod(0o755)
    docker = remote_bin / "docker"
    docker.write_text(DOCKER)
    docker.chmod(0o755)
    config = Path(os.environ["GPUCLOUD_HOME"]) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    dirs = {}
    lines = []
    for name in ("box1", "box2"):
        dirs[name] = tmp_path / "hosts" / name
        lines += ["[[providers.ssh.hosts]]", f'name = "{name}"', 'host = "127.0.0.1"',
                  f"port = {port}", f'user = "{getpass.getuser()}"', f'identity = "{key}"',
                  'gpu = "B200"', "gpu_count = 2", 'cost_per_hour = "3.50"',
                  f'dir = "{dirs[name]}"', ""]
    config.write_text("\n".join(lines))
    return dirs


def _spec(nodes: int = 2) -> dict:
    return {
        "name": "pair", "image": "busybox", "nodes": nodes,
        # Each node records the env it was started with, where its runner keeps
        # its files on that host, then stays up until cancelled.
        "command": ["sh", "-c", 'env >"$GPUCLOUD_STATE_DIR/env.txt"; exec sleep 600'],
        "secrets": {"TOKEN": {"env": "MN_TEST_TOKEN"}},
        "resources": {"gpu": "b200", "gpu_count": 2}, "max_runtime": "1h"}


def _env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_a_two_node_job_starts_on_both_hosts_with_one_master(two_hosts, monkeypatch, caplog):
    monkeypatch.setenv("MN_TEST_TOKEN", SECRET)
    caplog.set_level(logging.DEBUG, logger="gpucloud")
    c = Client(providers=["ssh"], sleep=lambda _s: None)

    job = c.submit(_spec(), provider="ssh")

    assert job.nodes == 2 and len(job.instances) == 2
    assert {m.id for m in job.instances} == {"box1", "box2"}
    assert job.id == job.instances[0].id
    envs: dict[str, dict[str, str]] = {}
    deadline = time.monotonic() + 30
    for machine in job.instances:
        recorded = two_hosts[machine.id] / "jobs" / str(machine.launch_id) / "env.txt"
        while not (recorded.exists() and "NODE_RANK" in recorded.read_text()):
            assert time.monotonic() < deadline, f"the job never started on {machine.id}"
            time.sleep(0.2)
        envs[machine.id] = _env(recorded)
    rank0, rank1 = (envs[m.id] for m in job.instances)
    assert (rank0["NODE_RANK"], rank1["NODE_RANK"]) == ("0", "1")
    assert rank0["MASTER_ADDR"] == rank1["MASTER_ADDR"] == "127.0.0.1"
    assert rank0["NNODES"] == rank1["NNODES"] == "2"
    assert rank0["WORLD_SIZE"] == "4" and rank0["GPUS_PER_NODE"] == "2"
    assert rank0["GPUCLOUD_NODE_ADDRS"] == "127.0.0.1,127.0.0.1"
    assert rank0["TOKEN"] == rank1["TOKEN"] == SECRET  # the secret reached both nodes
    # ... and no log: gpucloud's own, nor the job's logs on the hosts.
    assert SECRET not in caplog.text
    for where in two_hosts.values():
        for log in where.glob("jobs/*/job.log"):
            assert SECRET not in log.read_text()
        assert SECRET not in (where / "lock" / "info").read_text()

    listed = c.jobs(provider="ssh")  # one job of two nodes, not two jobs
    assert [(j.id, j.nodes, j.status.value) for j in listed] == [(job.id, 2, "running")]
    assert [m.id for m in listed[0].instances] == [m.id for m in job.instances]
    assert c.job(job.ref).nodes == 2

    c.cancel(job.ref)
    assert not (two_hosts["box1"] / "lock").exists()
    assert not (two_hosts["box2"] / "lock").exists()


def test_a_node_that_cannot_be_had_leaves_no_host_held(two_hosts, monkeypatch):
    """Three nodes asked of two hosts: the third cannot be had, so the two
    allocated are released again and the submit fails with no capacity (6)."""
    monkeypatch.setenv("MN_TEST_TOKEN", SECRET)
    c = Client(providers=["ssh"], sleep=lambda _s: None)

    with pytest.raises(InsufficientCapacityError) as caught:
        c.submit(_spec(nodes=3), provider="ssh")

    assert "job pair: node" in str(caught.value) and "ended" in caught.value.hint
    assert not (two_hosts["box1"] / "lock").exists()
    assert not (two_hosts["box2"] / "lock").exists()
    assert not list(two_hosts["box1"].glob("jobs/*/run.sh"))  # no job was started
