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
import subprocess
from pathlib import Path


from gpucloud.machine import doctor
from gpucloud.models import Connection, Instance, InstanceStatus
from gpucloud.machine.ssh import host_key_alias, run_ssh, ssh_args
from tests._real_sshd import keygen as _keygen, needs_openssh, sshd  # noqa: F401 - a fixture

pytestmark = needs_openssh

NVML_LINE = "Failed to initialize NVML: No supported GPUs were found"


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
