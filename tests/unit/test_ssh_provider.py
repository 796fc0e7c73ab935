"""The ssh provider's parts that need no server: config.toml's hosts, the
ssh command line, the host-side scripts (run by a local POSIX sh on a
directory, as the host's shell would), ssh's failures as errors, the
nvidia-smi check and where a job's secrets travel. The whole provider
against a real sshd: tests/e2e/test_ssh_provider_real_sshd.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from gpucloud.catalog.bundled import load_catalogs
from gpucloud.errors import ConfigurationError
from gpucloud.models import (
    Connection, Instance, InstanceSpec, InstanceStatus, JobRun, Offer,
)
from gpucloud.providers.ssh import SshProvider, _remote, _settings
from gpucloud.providers.ssh._settings import Host
from gpucloud.providers.ssh._transport import SshTransport, ssh_argv, ssh_failure

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / "real"
HOST = Host(name="box1", host="10.0.0.5", port=2222, user="ml", gpu="B200", gpu_count=2,
            identity="/keys/id_ed25519", cost_per_hour=Decimal("3.50"))
KEYLESS = Host(name="box1", host="10.0.0.5", port=2222, user="ml", gpu="B200", gpu_count=2,
               cost_per_hour=Decimal("3.50"))  # ssh's own choice of key: no file to check


def hosts_of(text: str):
    import tomllib

    return _settings.load(tomllib.loads(text))


# -- config.toml ---------------------------------------------------------------------

GOOD = '''
[[providers.ssh.hosts]]
name = "box1"
host = "10.0.0.5"
user = "ml"
identity = "~/.ssh/id_ed25519"
gpu = "h100"
gpu_count = 8
cost_per_hour = "12.40"

[[providers.ssh.hosts]]
host = "gpu2.lab.example"
port = 2200
user = "ml"
gpu = "B200"
gpu_count = 2
'''


def test_hosts_are_read_from_config_with_their_cost_as_decimal():
    first, second = hosts_of(GOOD)
    assert (first.name, first.gpu, first.gpu_count, first.port) == ("box1", "H100", 8, 22)
    assert first.cost_per_hour == Decimal("12.40") and isinstance(first.cost_per_hour, Decimal)
    assert first.identity == str(Path("~/.ssh/id_ed25519").expanduser())
    assert (second.name, second.port, second.cost_per_hour) == ("gpu2.lab.example", 2200, None)
    assert second.dir == "~/.gpucloud"


@pytest.mark.parametrize("change, words", [
    (("gpu_count = 8", "gpu_count = 0"), "gpu_count must be a whole number"),
    (('gpu = "h100"', 'gpu = "h1000"'), "h1000"),
    (('cost_per_hour = "12.40"', 'cost_per_hour = "cheap"'), "cost_per_hour must be"),
    (('user = "ml"\nidentity', 'user = "-oProxyCommand=x"\nidentity'), "not a usable ssh"),
    (('name = "box1"', 'name = "box 1"'), "cannot name a machine"),
    (('name = "box1"', 'name = "box1"\ndir = "~/../etc"'), "not a usable directory"),
    (('name = "box1"', 'name = "box1"\npasword = "x"'), "unknown key 'pasword'"),
    (('host = "gpu2.lab.example"', 'host = "gpu2.lab.example"\nname = "box1"'),
     "two hosts are named 'box1'"),
])
def test_a_bad_host_entry_is_a_configuration_error_naming_it(change, words):
    with pytest.raises(ConfigurationError) as caught:
        hosts_of(GOOD.replace(*change))
    assert words in str(caught.value) and caught.value.hint


def test_no_hosts_means_no_offers_and_no_machines_without_any_request():
    provider = SshProvider(load_catalogs()["ssh"], hosts=())
    from gpucloud.core.flow import OfferQuery

    for flow in (provider.offers(OfferQuery(gpu="H100", count=8)), provider.list_instances()):
        with pytest.raises(StopIteration) as done:
            next(flow)
        assert done.value.value == []


def test_the_cli_says_a_bad_config_in_one_line_with_exit_3(tmp_path):
    home = Path(os.environ["GPUCLOUD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(GOOD.replace("gpu_count = 8", "gpu_count = 0"))
    done = subprocess.run([sys.executable, "-m", "gpucloud", "list", "--provider", "ssh"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and "gpu_count must be" in done.stderr


# -- ssh's command line and its failures --------------------------------------------------

def test_the_command_line_is_machine_ssh_s_with_the_configured_key():
    """The provider builds its own argv (a provider may not import machine/):
    it must stay what `gpucloud ssh ssh/box1` runs, known_hosts alias included."""
    from gpucloud.machine.ssh import ssh_args

    instance = Instance(provider="ssh", id="box1", status=InstanceStatus.RUNNING,
                        connection=Connection(method="ssh", host="10.0.0.5", port=2222,
                                              user="ml"))
    assert ssh_argv(HOST, "true") == ssh_args(instance, identity="/keys/id_ed25519",
                                               command=["true"])


@pytest.mark.parametrize("stderr, status, code", [
    ("ml@10.0.0.5: Permission denied (publickey).\r\n", 401, "auth_failed"),
    ("@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n", 403,
     "host_key"),
    ("ssh: connect to host 10.0.0.5 port 2222: Connection refused\r\n", 503, "unreachable"),
    ("ssh: Could not resolve hostname nowhere: Name or service not known\r\n", 503,
     "unreachable"),
])
def test_ssh_s_own_failures_become_error_replies_in_its_words(stderr, status, code):
    reply = ssh_failure(HOST, stderr)
    error = reply.json()["error"]
    assert (reply.status_code, error["code"]) == (status, code)
    assert error["message"].startswith("box1 (ml@10.0.0.5:2222): ")
    assert "@@@" not in error["message"] and error["hint"]


def test_a_job_script_travels_on_stdin_never_on_the_command_line(monkeypatch):
    """A job's secret values are in its runner: ssh's argv (seen by every user
    of both computers in the process list) never holds them."""
    seen = []

    def run(argv, stdin, timeout):
        seen.append((argv, stdin))
        return subprocess.CompletedProcess(argv, 0, "state=started\n", "")

    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/ssh")
    job = JobRun(name="j", image="busybox", command=("true",),
                 secret_env={"HF_TOKEN": "hf_secretvalue123"})
    spec = InstanceSpec(offer=Offer(provider="ssh", instance_type="box1", region="owned",
                                    gpu="B200", gpu_count=2, price_per_hour=Decimal("3.5")),
                        launch_id="gc-0123456789", name="j", job=job)
    provider = SshProvider(load_catalogs()["ssh"], hosts=(KEYLESS,))
    flow = provider._start_job(KEYLESS, spec)
    request = next(flow)
    transport = SshTransport([KEYLESS], run=run)
    reply = transport.handle_request(request)
    with pytest.raises(StopIteration):
        flow.send(reply)
    ((argv, stdin),) = seen
    assert "hf_secretvalue123" not in " ".join(argv)
    assert "hf_secretvalue123" in stdin and "docker run" in stdin
    assert "hf_secretvalue123" in request.extensions["gpucloud_secrets"]  # redacted in logs


# -- the scripts on the host --------------------------------------------------------------

def sh(script: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], input=stdin, capture_output=True, text=True,
                          timeout=60)


def info(launch_id, deadline="2026-12-01T12:00:00Z"):
    return {"launch_id": launch_id, "deadline": deadline, "owner": "alice@laptop",
            "name": "x\nlaunch_id=forged"}


def test_the_lock_admits_one_allocation_and_records_it(tmp_path):
    where = str(tmp_path / "host")
    first = sh(_remote.allocate(where, info("gc-aaaaaaaaaa")))
    second = sh(_remote.allocate(where, info("gc-bbbbbbbbbb")))
    assert first.returncode == 0 and second.returncode == _remote.HELD
    state, held = _remote.parse_info(second.stdout)
    assert state == "held" and held["launch_id"] == "gc-aaaaaaaaaa"
    # A newline in a name cannot forge a line of its own.
    assert held["name"] == "xlaunch_id=forged"
    assert _remote.parse_info(sh(_remote.read(where)).stdout)[0] == "locked"


def test_a_guarded_release_leaves_another_launch_or_a_moved_deadline(tmp_path):
    where = str(tmp_path / "host")
    sh(_remote.allocate(where, info("gc-aaaaaaaaaa")))
    assert sh(_remote.release(where, "gc-bbbbbbbbbb")).returncode == _remote.OTHER
    assert sh(_remote.release(where, "gc-aaaaaaaaaa", "2026-12-01T11:00:00Z")).returncode \
        == _remote.MOVED
    assert (tmp_path / "host" / "lock").is_dir()
    moved = sh(_remote.set_deadline(where, "gc-aaaaaaaaaa", "2026-12-01T15:00:00Z"))
    assert _remote.parse_info(moved.stdout)[1]["deadline"] == "2026-12-01T15:00:00Z"
    assert sh(_remote.release(where, "gc-aaaaaaaaaa", "2026-12-01T15:00:00Z")).returncode == 0
    assert not (tmp_path / "host" / "lock").exists()
    assert _remote.parse_info(sh(_remote.read(where)).stdout)[0] == "free"


def test_release_ends_the_whole_session_a_job_started(tmp_path):
    where = str(tmp_path / "host")
    sh(_remote.allocate(where, info("gc-aaaaaaaaaa")))
    pidfile = tmp_path / "pid"
    # The runner starts a child in a process group of its own, as `timeout` does
    # (set -m: job control gives each background job its own group).
    started = sh(_remote.start_job(where, "gc-aaaaaaaaaa"),
                 stdin=f"set -m\nsh -c 'echo $$ >{pidfile}; exec sleep 300' &\nwait\n")
    assert started.returncode == 0, started.stderr
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    assert Path(f"/proc/{pid}").exists()
    assert sh(_remote.release(where)).returncode == 0
    status = Path(f"/proc/{pid}/status")
    assert not status.exists() or "\nState:\tZ" in status.read_text()
    assert (tmp_path / "host" / "jobs" / "gc-aaaaaaaaaa" / "run.sh").exists()


# -- nvidia-smi -L against config.toml ------------------------------------------------------

@pytest.mark.parametrize("listing, gpu, count, problem", [
    ("list_b200.txt", "B200", 2, None),
    ("list_b200.txt", "B200", 1, None),  # more GPUs than configured is no contradiction
    ("list_h100_80gb_hbm3.txt", "H100", 8, "lists 1 GPU(s), config.toml says 8x H100"),
    ("list_l40s.txt", "H100", 1, "lists NVIDIA L40S, config.toml says H100"),
    ("nvml_no_supported_gpus_stderr.txt", "H100", 1, "lists 0 GPU(s)"),
])
def test_nvidia_smi_is_held_against_what_config_says(listing, gpu, count, problem):
    host = Host(name="box1", host="h", port=22, user="u", gpu=gpu, gpu_count=count)
    provider = SshProvider(load_catalogs()["ssh"], hosts=(host,))
    found = provider._gpu_problem(host, (REAL / listing).read_text(), 0)
    assert (found is None) if problem is None else (problem in found)


def test_an_offer_without_a_configured_cost_says_its_cost_is_unknown():
    host = Host(name="box1", host="h", port=22, user="u", gpu="B200", gpu_count=2)
    provider = SshProvider(load_catalogs()["ssh"], hosts=(host,))
    from gpucloud.core.flow import OfferQuery

    flow = provider.offers(OfferQuery(gpu="B200", count=2))
    request = next(flow)
    assert request.url.path == "/hosts"
    with pytest.raises(StopIteration) as done:
        flow.send(httpx.Response(200, json={"hosts": [{"name": "box1", "state": "free"}]},
                                 request=request))
    (offer,) = done.value.value
    assert offer.price_per_hour == 0 and offer.available and "unknown" in offer.notes[0]


# -- in scope once configured ---------------------------------------------------------------

def test_ssh_is_in_the_default_scope_only_once_config_lists_a_host():
    from gpucloud.core.context import ClientContext

    assert "ssh" not in ClientContext(None, None, None, False).scope(None)
    home = Path(os.environ["GPUCLOUD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(GOOD)
    ctx = ClientContext(None, None, None, False)
    assert "ssh" in ctx.scope(None) and ctx.credential("ssh").source == "config.toml"
    assert "secret" not in repr(ctx.credential("ssh")).replace("secret=[secure]", "")


def test_auth_login_ssh_says_where_the_hosts_go():
    done = subprocess.run([sys.executable, "-m", "gpucloud", "auth", "login", "ssh"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "[[providers.ssh.hosts]]" in done.stderr


def test_the_reaper_s_release_loses_to_a_deadline_moved_on_the_host(monkeypatch):
    """delete_expired asks the host to release only at the deadline the reaper
    read; the host's MOVED answer (the script's own exit status) is "not
    terminated", never an error and never a release."""
    from datetime import datetime, timezone

    seen = []

    def run(argv, stdin, timeout):
        seen.append(argv[-1])
        return subprocess.CompletedProcess(argv, _remote.MOVED, "state=moved\n", "")

    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/ssh")
    provider = SshProvider(load_catalogs()["ssh"], hosts=(KEYLESS,))
    read = Instance(provider="ssh", id="box1", status=InstanceStatus.RUNNING,
                    launch_id="gc-0123456789",
                    shutdown_at=datetime(2026, 12, 1, 12, tzinfo=timezone.utc))
    flow = provider.delete_expired(read)
    request = next(flow)
    with pytest.raises(StopIteration) as done:
        flow.send(SshTransport([KEYLESS], run=run).handle_request(request))
    assert done.value.value is False
    assert "deadline=2026-12-01T12:00:00Z" in seen[0] and "launch_id=gc-0123456789" in seen[0]


def test_a_missing_identity_file_is_named_before_ssh_runs(monkeypatch, tmp_path):
    ran = []
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/ssh")
    host = Host(name="box1", host="h", port=22, user="u", gpu="B200", gpu_count=2,
                identity=str(tmp_path / "gone"))
    transport = SshTransport([host], run=lambda *a: ran.append(a))
    with pytest.raises(ConfigurationError) as caught:
        transport.handle_request(httpx.Request("GET", "https://ssh.gpucloud.invalid/hosts/box1"))
    assert "identity file not found" in str(caught.value) and str(tmp_path / "gone") in str(
        caught.value)
    assert ran == []


def test_the_lock_record_is_readable_by_the_other_accounts_that_share_the_directory(tmp_path):
    where = str(tmp_path / "host")
    sh("umask 077\n" + _remote.allocate(where, info("gc-aaaaaaaaaa")))
    assert (tmp_path / "host" / "lock" / "info").stat().st_mode & 0o044 == 0o044
    sh("umask 077\n" + _remote.set_deadline(where, "gc-aaaaaaaaaa", "2026-12-01T15:00:00Z"))
    assert (tmp_path / "host" / "lock" / "info").stat().st_mode & 0o044 == 0o044
