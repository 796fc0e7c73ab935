"""gpucloud's ssh paths against a real OpenSSH server (Debian's
`openssh-server`, installed by .ci/run), not the fake `ssh` of the unit tests:
what sshd and ssh really print is what doctor and `client.exec` must read.

The server listens on 127.0.0.1 only, with a host key and an authorized key
made for the test. The remote `nvidia-smi` is a stand-in script (no GPU here)
that answers as a driver without a usable GPU does: the NVML line and exit 255
("Failed to initialize NVML: No supported GPUs were found"), the case that
looks like ssh's own exit 255.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from gpucloud.machine import doctor
from gpucloud.models import Connection, Instance, InstanceStatus
from gpucloud.machine.ssh import host_key_alias, run_ssh, ssh_args

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)
pytestmark = pytest.mark.skipif(SSHD is None or shutil.which("ssh") is None
                                or shutil.which("ssh-keygen") is None,
                                reason="needs OpenSSH (server and client); .ci/run installs it")

NVML_LINE = "Failed to initialize NVML: No supported GPUs were found"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, capture_output=True)


@pytest.fixture
def sshd(tmp_path, monkeypatch):
    """A real sshd on 127.0.0.1 that lets the current user in with a fresh key.
    Yields (port, private key path, the remote bin directory on PATH)."""
    root = tmp_path / "sshd"
    root.mkdir()
    _keygen(root / "host_key")
    _keygen(root / "client_key")
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    remote_bin = root / "bin"
    remote_bin.mkdir()
    # ssh reads ~/.ssh from the password database, not $HOME: a wrapper first on
    # PATH points the real client at this test's known_hosts, so no test touches
    # the account's own (ssh takes the first value given for an option).
    client_bin = root / "client-bin"
    client_bin.mkdir()
    known_hosts = Path(os.environ["HOME"]) / ".ssh" / "known_hosts"
    known_hosts.parent.mkdir(mode=0o700, exist_ok=True)
    wrapper = client_bin / "ssh"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("ssh")} '
                       f'-o UserKnownHostsFile={known_hosts} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{client_bin}{os.pathsep}{os.environ['PATH']}")
    port = _free_port()
    config = root / "sshd_config"
    config.write_text("\n".join([
        "ListenAddress 127.0.0.1",
        f"Port {port}",
        f"HostKey {root / 'host_key'}",
        f"AuthorizedKeysFile {root / 'authorized_keys'}",
        f"PidFile {root / 'sshd.pid'}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes no",  # pytest's tmp directories are not root-owned 0755 all the way
        # The remote shell finds the stand-in nvidia-smi first.
        f"SetEnv PATH={remote_bin}:/usr/local/bin:/usr/bin:/bin",
        "",
    ]))
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
    server = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                err = server.stderr.read().decode(errors="replace") if server.stderr else ""
                pytest.skip(f"sshd did not start here: {err.strip()[:300]}")
            time.sleep(0.05)
    try:
        yield port, root / "client_key", remote_bin
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()


def _machine(port: int) -> Instance:
    return Instance(provider="lambda", id="0920582c7ff041399e34823a0be62549",
                    status=InstanceStatus.RUNNING, gpu="H100", gpu_count=1,
                    connection=Connection(method="ssh", host="127.0.0.1", port=port,
                                          user=getpass.getuser()))


def test_a_real_first_login_prints_a_notice_that_exec_keeps_out_of_stderr(sshd, tmp_path):
    port, key, _ = sshd
    machine = _machine(port)
    # The same command line without LogLevel=ERROR: the real client announces the
    # host key it added, on stderr, which is what must not reach ExecResult.
    raw = subprocess.run([shutil.which("ssh"), *_without_loglevel(ssh_args(
        machine, identity=str(key), command=["true"]))[1:]],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert raw.returncode == 0, raw.stderr
    assert "Permanently added" in raw.stderr  # the notice is real, and comes on a first login
    (Path(os.environ["HOME"]) / ".ssh" / "known_hosts").unlink()  # first login again

    result = run_ssh(machine, "echo out; echo err >&2; exit 3", 30, identity=str(key))
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")


def _without_loglevel(args: list[str]) -> list[str]:
    at = args.index("LogLevel=ERROR")
    return args[:at - 1] + args[at + 1:]


def test_a_real_login_refusal_is_still_in_stderr_with_exit_255(sshd, tmp_path):
    port, _, _ = sshd
    stranger = tmp_path / "stranger"
    _keygen(stranger)
    result = run_ssh(_machine(port), "true", 30, identity=str(stranger))
    assert result.exit_code == 255
    assert "Permission denied" in result.stderr


def test_doctor_tells_nvmls_255_from_a_failed_login_on_a_real_server(sshd):
    port, key, remote_bin = sshd
    smi = remote_bin / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{NVML_LINE}'\nexit 255\n")
    smi.chmod(0o755)
    machine = _machine(port)

    def execute(command: str, timeout: float):
        return run_ssh(machine, command, timeout, identity=str(key))

    report = doctor.run(machine, execute, burn_seconds=None)
    names = [c.name for c in report.checks]
    assert "login" not in names
    gpus = report.checks[0]
    assert (gpus.name, gpus.status) == ("gpus", "fail")
    assert "no GPU visible" in gpus.detail and NVML_LINE in gpus.detail
    assert all("Permanently added" not in (c.detail + (c.fix or "")) for c in report.checks)


def test_doctor_reports_a_refused_login_as_the_login_check_on_a_real_server(sshd, tmp_path):
    port, _, _ = sshd
    stranger = tmp_path / "stranger"
    _keygen(stranger)
    machine = _machine(port)

    def execute(command: str, timeout: float):
        return run_ssh(machine, command, timeout, identity=str(stranger))

    report = doctor.run(machine, execute, burn_seconds=None)
    assert [(c.name, c.status) for c in report.checks] == [("login", "fail")]
    assert "Permission denied" in report.checks[0].detail


def test_a_changed_host_key_is_explained_by_its_words_not_ssh_s_frame(sshd):
    """OpenSSH's changed-host-key error opens with a line of `@`s."""
    port, key, _ = sshd
    machine = _machine(port)
    assert run_ssh(machine, "true", 30, identity=str(key)).exit_code == 0  # key recorded
    known_hosts = Path(os.environ["HOME"]) / ".ssh" / "known_hosts"
    other = known_hosts.parent / "other_host_key"
    _keygen(other)
    known_hosts.write_text(f"{host_key_alias(machine)} {other.with_suffix('.pub').read_text()}")

    def execute(command: str, timeout: float):
        return run_ssh(machine, command, timeout, identity=str(key))

    report = doctor.run(machine, execute, burn_seconds=None)
    assert [(c.name, c.status) for c in report.checks] == [("login", "fail")]
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in report.checks[0].detail
