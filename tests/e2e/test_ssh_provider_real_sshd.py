"""The ssh provider against a real OpenSSH server on 127.0.0.1 (the shared
fixture of tests/_real_sshd.py): what config.toml lists is allocated,
locked on the host itself, run on, released and reaped, and counted in
`gpucloud costs`, with nothing of the provider faked but the GPUs.

Two stand-ins sit first on the remote PATH, as no GPU and no Docker daemon
exist here: `nvidia-smi` prints a REAL recorded `nvidia-smi -L` output
(tests/fixtures/nvidia-smi/real/, sources in its SOURCE.txt), and `docker`
runs a job's `--entrypoint` command directly (CONSTRUCTED: it reads the
`docker run` line the VM clouds' runner writes and runs the command as a
container would, without one).

Each configured host is a directory of its own on the same server (the
`dir` setting), so one server is as many hosts as a test needs.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from gpucloud import Client
from gpucloud.errors import AuthenticationError, InsufficientCapacityError, InternalServerError
from gpucloud.providers.ssh import _settings
from gpucloud.providers.ssh._transport import SshTransport
from tests._real_sshd import keygen, needs_openssh, sshd  # noqa: F401 - a fixture

pytestmark = needs_openssh

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / "real"
REPO = Path(__file__).resolve().parents[2]

DOCKER = r"""#!/bin/sh
# CONSTRUCTED stand-in for `docker` (no daemon here): `docker run ...
# --entrypoint CMD IMAGE ARGS` runs CMD ARGS in place; `docker rm` does nothing.
echo "$*" >>"$DOCKER_CALLS"
case "$1" in
  rm) exit 0 ;;
  run) shift ;;
  *) exit 1 ;;
esac
entry=
while [ $# -gt 0 ]; do
  case "$1" in
    --rm) shift ;;
    --name|--gpus|-e|-v) shift 2 ;;
    --entrypoint) entry=$2; shift 2 ;;
    *) break ;;
  esac
done
shift
exec "$entry" "$@"
"""


@pytest.fixture
def hosts(sshd, tmp_path):
    """config.toml with host box1 (2x B200, $3.50/h) and a remote bin whose
    nvidia-smi prints the real B200 listing. Yields a function that adds a host."""
    port, key, remote_bin = sshd
    smi = remote_bin / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] && exec cat {REAL / 'list_b200.txt'}\nexit 6\n")
    smi.chmod(0o755)
    docker = remote_bin / "docker"
    docker.write_text(DOCKER.replace('"$DOCKER_CALLS"', str(tmp_path / "docker-calls")))
    docker.chmod(0o755)
    config = Path(os.environ["GPUCLOUD_HOME"]) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("")

    def add(name: str, *, gpu: str = "B200", count: int = 2, cost: str | None = "3.50",
            identity: Path = key) -> Path:
        where = tmp_path / "hosts" / name
        with config.open("a") as f:
            f.write("\n".join([
                "[[providers.ssh.hosts]]", f'name = "{name}"', 'host = "127.0.0.1"',
                f"port = {port}", f'user = "{getpass.getuser()}"', f'identity = "{identity}"',
                f'gpu = "{gpu}"', f"gpu_count = {count}",
                *([f'cost_per_hour = "{cost}"'] if cost else []), f'dir = "{where}"', "", ""]))
        return where

    return add


def client() -> Client:
    return Client(providers=["ssh"], sleep=lambda _s: None)


def info_of(where: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in
                (where / "lock" / "info").read_text().splitlines())


def test_create_takes_the_lock_on_the_host_and_delete_gives_it_back(hosts):
    box = hosts("box1")
    c = client()
    (offer,) = c.offers(gpu="b200", count=2)
    assert (offer.provider, offer.instance_type, offer.available) == ("ssh", "box1", True)
    assert offer.price_per_hour == Decimal("3.50") and offer.source == "live"

    machine = c.create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h", name="mine")

    assert machine.ref == "ssh/box1" and machine.price_per_hour == Decimal("3.50")
    info = info_of(box)  # the lock is on the host, not on this computer
    assert info["launch_id"] == machine.launch_id and info["name"] == "mine"
    assert info["owner"].startswith(getpass.getuser() + "@")
    assert info["deadline"] == machine.shutdown_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert c.get("ssh/box1").launch_id == machine.launch_id
    assert [o.available for o in c.offers(gpu="b200", count=2)] == [False]
    assert machine.connection.port == int(
        next(line for line in (Path(os.environ["GPUCLOUD_HOME"]) / "config.toml")
             .read_text().splitlines() if line.startswith("port")).split("=")[1])

    c.delete(machine)
    assert not (box / "lock").exists()
    assert box.exists() and c.list() == []
    assert [o.available for o in c.offers(gpu="b200", count=2)] == [True]


def test_a_host_whose_nvidia_smi_contradicts_the_config_is_given_back(hosts):
    box = hosts("box1", gpu="H100", count=8)  # the server's nvidia-smi lists 2 B200
    with pytest.raises(InsufficientCapacityError) as caught:
        client().create(gpu="h100", count=8, provider="ssh", auto_shutdown="1h")
    assert "nvidia-smi -L lists 2 GPU(s), config.toml says 8x H100" in str(caught.value)
    assert not (box / "lock").exists()


def test_create_moves_on_to_another_free_host_of_the_same_kind(hosts):
    first, second = hosts("box1"), hosts("box2")
    c = client()
    a = c.create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h")
    b = c.create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h")
    assert {a.id, b.id} == {"box1", "box2"}
    assert {info_of(first)["launch_id"], info_of(second)["launch_id"]} == {
        a.launch_id, b.launch_id}
    with pytest.raises(InsufficientCapacityError) as caught:
        c.create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h")
    assert caught.value.hint


def test_simultaneous_allocations_of_one_host_never_both_win(hosts):
    """Eight allocations sent at the same instant, each over its own ssh
    connection as eight users' computers would: the host's mkdir lets one in."""
    box = hosts("box1")
    (host,) = _settings.load(_config())
    barrier = threading.Barrier(8)
    answers: list[int] = []

    def allocate(i: int) -> None:
        request = httpx.Request("POST", "https://ssh.gpucloud.invalid/hosts/box1/allocate",
                                json={"launch_id": f"gc-race{i:05d}", "owner": f"user{i}"})
        barrier.wait()
        answers.append(SshTransport([host]).handle_request(request).status_code)

    threads = [threading.Thread(target=allocate, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(answers) == [200] + [409] * 7
    assert info_of(box)["launch_id"].startswith("gc-race")


def test_two_users_creating_at_once_one_gets_the_host_the_other_a_capacity_error(
        hosts, tmp_path):
    """Two `gpucloud create` processes, each with its own GPUCLOUD_HOME (two
    computers' journals): nothing but the lock on the host stands between them."""
    box = hosts("box1")
    config = (Path(os.environ["GPUCLOUD_HOME"]) / "config.toml").read_text()
    procs = []
    for who in ("alice", "bob"):
        home = tmp_path / who
        home.mkdir()
        (home / "config.toml").write_text(config)
        env = {**os.environ, "GPUCLOUD_HOME": str(home),
               "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get(
                   "PYTHONPATH", "")])}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gpucloud", "create", "--gpu", "b200", "--count", "2",
             "--provider", "ssh", "--auto-shutdown", "1h", "--yes", "--json"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outcomes = [(p.wait(120), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 6], outcomes
    won = next(out for code, out, _ in outcomes if code == 0)
    lost = next(out + err for code, out, err in outcomes if code == 6)
    assert "Traceback" not in lost and "B200" in lost
    assert info_of(box)["launch_id"] in won


def test_a_job_runs_on_the_host_and_delete_ends_it(hosts, tmp_path):
    box = hosts("box1")
    pidfile = tmp_path / "job.pid"
    c = client()
    job = c.submit({
        "name": "on-prem", "image": "busybox",
        "command": ["sh", "-c", 'echo $$ >"$PIDFILE"; echo "hello from $WHERE"; exec sleep 600'],
        "env": {"PIDFILE": str(pidfile), "WHERE": "box1"},
        "resources": {"gpu": "b200", "gpu_count": 2}, "max_runtime": "1h"}, provider="ssh")
    assert job.ref == "ssh/box1"
    log = box / "jobs" / job.launch_id / "job.log"
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and log.exists() and "hello from box1" in log.read_text()):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.2)
    pid = int(pidfile.read_text())
    assert _alive(pid)
    assert "--gpus all" in (tmp_path / "docker-calls").read_text()  # the VM clouds' runner
    assert c.job(job.ref).status.value == "running"

    c.delete("ssh/box1")
    assert not (box / "lock").exists()
    assert not _alive(pid)
    assert "hello from box1" in log.read_text()  # the log outlives the allocation


def test_the_reaper_releases_a_past_deadline_allocation(hosts, monkeypatch):
    box = hosts("box1")
    c = client()
    machine = c.create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h")
    later = machine.shutdown_at + timedelta(minutes=5)
    monkeypatch.setattr("gpucloud.safety.reap.utcnow", lambda: later)

    report = c.reap()

    assert [(a.instance.ref, a.action) for a in report.actions] == [("ssh/box1", "terminated")]
    assert not (box / "lock").exists()


def test_the_reaper_leaves_an_allocation_extended_on_the_host(hosts, monkeypatch):
    box = hosts("box1")
    c = client()
    machine = c.create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h")
    c.extend(machine, by="2h")
    assert info_of(box)["deadline"] == (machine.shutdown_at + timedelta(hours=2)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    monkeypatch.setattr("gpucloud.safety.reap.utcnow",
                        lambda: machine.shutdown_at + timedelta(minutes=5))
    assert c.reap().actions == ()
    assert info_of(box)["launch_id"] == machine.launch_id


def test_costs_shows_the_owned_host_at_its_configured_cost(hosts):
    hosts("box1", cost="3.50")
    c = client()
    machine = c.create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h", name="owned")
    report = c.costs()
    (line,) = [x for x in report.lines if x.key == "ssh/box1"]
    assert line.price_per_hour == Decimal("3.50") and line.status == "running"
    assert line.name == "owned" and line.projected > 0
    done = subprocess.run([sys.executable, "-m", "gpucloud", "costs", "--json"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr
    assert "ssh/box1" in done.stdout and "3.50" in done.stdout
    c.delete(machine)


def test_a_refused_key_is_an_authentication_error_in_ssh_s_words(hosts, tmp_path):
    stranger = tmp_path / "stranger"
    keygen(stranger)
    hosts("box1", identity=stranger)
    with pytest.raises(AuthenticationError) as caught:
        client().create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h")
    assert "Permission denied" in str(caught.value)
    assert "identity" in caught.value.hint
    assert stranger.read_text() not in str(caught.value) + caught.value.hint


def test_an_unreachable_host_is_named_with_ssh_s_reason(hosts, tmp_path):
    from tests._real_sshd import free_port

    hosts("box1")
    config = Path(os.environ["GPUCLOUD_HOME"]) / "config.toml"
    text = config.read_text()
    port = next(line for line in text.splitlines() if line.startswith("port"))
    config.write_text(text.replace(port, f"port = {free_port()}"))  # nobody listens there
    with pytest.raises(InternalServerError) as caught:
        client().get("ssh/box1")
    assert "Connection refused" in str(caught.value) and "box1" in str(caught.value)
    assert "HTTP" not in str(caught.value)  # no HTTP ever reached the host
    assert "sshd listening" in caught.value.hint
    done = subprocess.run([sys.executable, "-m", "gpucloud", "create", "--gpu", "b200",
                           "--count", "2", "--provider", "ssh", "--auto-shutdown", "1h",
                           "--yes"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 10 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ssh: box1 (") and "Connection refused" in done.stderr


def _config() -> dict:
    import tomllib

    return tomllib.loads((Path(os.environ["GPUCLOUD_HOME"]) / "config.toml").read_text())


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


def test_the_json_of_a_listing_carries_the_lock(hosts):
    hosts("box1")
    c = client()
    machine = c.create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h")
    done = subprocess.run([sys.executable, "-m", "gpucloud", "list", "--json"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    rows = listed if isinstance(listed, list) else listed.get("instances", listed)
    assert machine.launch_id in json.dumps(rows)


def test_the_async_client_allocates_and_releases_through_the_same_transport(hosts):
    import asyncio

    from gpucloud import AsyncClient

    box = hosts("box1")

    async def scenario():
        async with AsyncClient(providers=["ssh"]) as c:
            machine = await c.create(gpu="b200", count=2, provider="ssh", auto_shutdown="1h")
            listed = [m.launch_id for m in await c.list()]
            locked = info_of(box)["launch_id"]
            await c.delete(machine)
            return machine, listed, locked

    machine, listed, locked = asyncio.run(scenario())
    assert listed == [machine.launch_id] == [locked]
    assert not (box / "lock").exists()


def test_a_job_that_ends_gives_the_host_back_and_leaves_its_exit_status(hosts):
    box = hosts("box1")
    c = client()
    job = c.submit({"name": "short", "image": "busybox", "command": ["sh", "-c", "exit 3"],
                    "resources": {"gpu": "b200", "gpu_count": 2}, "max_runtime": "1h"},
                   provider="ssh")
    status = box / "jobs" / job.launch_id / "exit-status"
    deadline = time.monotonic() + 30
    while (box / "lock").exists() or not status.exists():
        assert time.monotonic() < deadline, "the job's end never released the host"
        time.sleep(0.2)
    assert status.read_text().strip() == "3"
    assert c.list() == [] and [o.available for o in c.offers(gpu="b200", count=2)] == [True]
