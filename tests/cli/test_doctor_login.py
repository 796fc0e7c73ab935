"""doctor and top over ssh: ssh failing to connect or log in (it exits 255 on
its own errors) is reported as such, never as "no GPU visible"; both take
--identity like `gpucloud ssh`. A Lambda machine (respx) and a fake ssh."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpucloud.cli import app
from gpucloud.machine.doctor import check_login
from gpucloud.models import Connection, ExecResult
from tests import _fake_ssh
from tests.cli.test_ssh_cli import REF
from tests.cli.test_ssh_cli import vm  # noqa: F401 - the fixture
from tests.unit.test_ssh import machine

REFUSED = "root@198.51.100.2: Permission denied (publickey)."


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_doctor_says_the_login_failed_and_how_to_fix_it(vm, monkeypatch):
    _, log = vm
    monkeypatch.setenv("FAKE_SSH_EXIT", "255")
    monkeypatch.setenv("FAKE_SSH_STDERR", REFUSED + "\n")
    result = invoke("doctor", REF, "--json")
    assert result.exit_code == 9, result.output
    [check] = json.loads(result.stdout)["checks"]  # nothing else was tried
    assert check["name"] == "login" and check["status"] == "fail"
    assert check["detail"] == f"ssh could not connect or log in: {REFUSED}"
    assert "--identity PATH" in check["fix"]
    # the failed `nvidia-smi -L`, then the login probe that tells ssh's 255 apart
    assert [args[-1] for args in _fake_ssh.calls(log)] == ["nvidia-smi -L", "true"]

    text = invoke("doctor", REF)
    assert text.exit_code == 9 and "no GPU visible" not in text.output
    assert "fix (login):" in text.output and "--identity" in text.output


def test_doctor_logs_in_with_the_identity_given(vm, tmp_path):
    _, log = vm
    key = tmp_path / "work"
    key.write_text("not a real key")
    invoke("doctor", REF, "--skip-burn", "--identity", str(key))
    calls = _fake_ssh.calls(log)
    assert calls and all(args[args.index("-i") + 1] == str(key) for args in calls)


def test_top_says_ssh_failed_exit_9(vm, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_EXIT", "255")
    monkeypatch.setenv("FAKE_SSH_STDERR", REFUSED + "\n")
    result = invoke("top", REF, "--count", "1", "--json")
    assert result.exit_code == 9, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "ssh_failed" and REFUSED in error["message"]
    assert "--identity PATH" in error["hint"]


def test_top_logs_in_with_the_identity_given(vm, tmp_path):
    _, log = vm
    key = tmp_path / "work"
    key.write_text("not a real key")
    invoke("top", REF, "--count", "1", "--identity", str(key))  # the fake's reply is no CSV
    [args] = _fake_ssh.calls(log)
    assert args[args.index("-i") + 1] == str(key)


def test_255_from_a_command_run_through_an_exec_api_is_the_commands_own():
    api = machine().model_copy(update={"connection": Connection(method="api")})
    assert check_login(api, ExecResult(command="nvidia-smi -L", exit_code=255)) is None
    ssh = machine()
    assert check_login(ssh, ExecResult(command="nvidia-smi -L", exit_code=255)) is not None
    assert check_login(ssh, ExecResult(command="nvidia-smi -L", exit_code=0)) is None


NVML = "Failed to initialize NVML: No supported GPUs were found"
ADDED = "Warning: Permanently added '198.51.100.2' (ED25519) to the list of known hosts.\n"


def test_nvidia_smis_own_255_is_no_gpu_in_doctor_not_a_login_failure(vm, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_RULES", json.dumps([["nvidia-smi", 255, NVML + "\n"]]))
    result = invoke("doctor", REF, "--json", "--skip-burn")
    assert result.exit_code == 9, result.output
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert "login" not in checks
    assert checks["gpus"]["status"] == "fail"
    assert checks["gpus"]["detail"] == f"no GPU visible: {NVML}"


def test_nvidia_smis_own_255_ends_top_as_no_gpu_not_ssh_failed(vm, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_RULES", json.dumps([["nvidia-smi", 255, NVML + "\n"]]))
    result = invoke("top", REF, "--count", "1", "--json")
    assert result.exit_code == 9, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "machine_failed" and error["code"] != "ssh_failed"
    assert error["message"].startswith("no GPU visible on ") and NVML in error["message"]


def test_ssh_notices_stay_out_of_doctors_explanation(vm, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_EXIT", "255")
    monkeypatch.setenv("FAKE_SSH_STDERR", ADDED + REFUSED + "\n")
    [check] = json.loads(invoke("doctor", REF, "--json").stdout)["checks"]
    assert check["detail"] == f"ssh could not connect or log in: {REFUSED}"
    assert "Permanently added" not in json.dumps(check)
