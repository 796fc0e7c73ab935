"""`gpucloud ssh` and `client.exec` against a Lambda VM answered by respx with
the spec's Instance example, and a fake `ssh` on PATH: no network."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud import Client, Connection, ExecResult, Instance
from gpucloud.cli import app
from tests import _fake_ssh

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lambda"
ID = "0920582c7ff041399e34823a0be62549"
REF = f"lambda/{ID}"
URL = f"https://cloud.lambda.ai/api/v1/instances/{ID}"
ALIAS = f"HostKeyAlias=gpucloud-lambda-{ID}"


def lambda_instance(**changes):
    raw = copy.deepcopy(json.loads((FIXTURES / "get_instance_200.json").read_text()))
    raw["data"].update(changes)
    return raw


@pytest.fixture
def vm(monkeypatch, tmp_path):
    """A running Lambda machine; returns the fake ssh's call log."""
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "sk-ssh-test-0123456789")
    log = _fake_ssh.install(tmp_path / "bin", monkeypatch)
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        router.get(URL).mock(return_value=httpx.Response(200, json=lambda_instance(
            status="active")))
        router.get("https://cloud.lambda.ai/api/v1/instances").mock(
            return_value=httpx.Response(200, json={"data": [lambda_instance(
                status="active")["data"]]}))
        yield router, log


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_print_shows_the_exact_command_and_runs_nothing(vm):
    _, log = vm
    result = invoke("ssh", REF, "--print")
    assert result.exit_code == 0, result.output
    assert result.stdout == (f"ssh -o StrictHostKeyChecking=accept-new -o {ALIAS} "
                             "ubuntu@198.51.100.2\n")
    assert _fake_ssh.calls(log) == []


def test_print_by_name_with_a_key_and_a_command(vm, tmp_path):
    key = tmp_path / "home" / "work key"
    key.write_text("k")
    result = invoke("ssh", "My Instance", "--print", "-i", str(key), "--", "nvidia-smi", "-L")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith(
        f"-i '{key}' -o IdentitiesOnly=yes -o StrictHostKeyChecking=accept-new -o {ALIAS} "
        "ubuntu@198.51.100.2 -- nvidia-smi -L")


def test_print_json(vm):
    data = json.loads(invoke("ssh", REF, "--print", "--json").stdout)
    assert data["connection"] == {"method": "ssh", "host": "198.51.100.2", "port": 22,
                                  "user": "ubuntu"}
    assert data["argv"][-1] == "ubuntu@198.51.100.2" and data["ref"] == REF


def test_a_command_runs_through_ssh_and_passes_its_exit_code(vm, monkeypatch):
    _, log = vm
    monkeypatch.setenv("FAKE_SSH_EXIT", "4")
    result = invoke("ssh", REF, "--", "nvidia-smi", "-L")
    assert result.exit_code == 4
    [args] = _fake_ssh.calls(log)
    assert args[-4:] == ["ubuntu@198.51.100.2", "--", "nvidia-smi", "-L"]
    assert "BatchMode=yes" not in args  # the user's terminal: a passphrase may be asked


def test_a_command_under_json_is_captured(vm, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_EXIT", "1")
    monkeypatch.setenv("FAKE_SSH_STDERR", "no GPU\n")
    result = invoke("ssh", REF, "--json", "--", "nvidia-smi")
    assert result.exit_code == 1 and result.stderr == ""
    data = json.loads(result.stdout)
    assert (data["command"], data["exit_code"], data["stderr"]) == ("nvidia-smi", 1, "no GPU\n")


def test_interactive_replaces_the_process_with_ssh(vm, monkeypatch):
    seen = []

    def fake_execvp(binary, argv):
        seen.append((binary, argv))
        raise SystemExit(0)

    monkeypatch.setattr(os, "execvp", fake_execvp)
    result = invoke("ssh", REF)
    assert result.exit_code == 0
    [(binary, argv)] = seen
    assert binary.endswith("/ssh") and argv[-1] == "ubuntu@198.51.100.2"


def test_no_ssh_binary_exits_3(vm, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    result = invoke("ssh", REF, "--", "true")
    assert result.exit_code == 3 and "OpenSSH" in result.stderr


def test_a_booting_machine_without_address_exits_2_with_a_hint(vm):
    router, log = vm
    booting = lambda_instance(status="booting")
    del booting["data"]["ip"]
    router.get(URL).mock(return_value=httpx.Response(200, json=booting))
    result = invoke("ssh", REF)
    assert result.exit_code == 2
    assert "no address yet" in result.stderr and "hint:" in result.stderr
    assert _fake_ssh.calls(log) == []


def test_a_json_flag_after_the_dashes_belongs_to_the_remote_command(vm):
    router, log = vm
    booting = lambda_instance(status="booting")
    del booting["data"]["ip"]
    router.get(URL).mock(return_value=httpx.Response(200, json=booting))
    result = invoke("ssh", REF, "--", "tool", "--json")
    assert result.exit_code == 2
    assert result.stdout == "" and "no address yet" in result.stderr  # text, not a JSON error


def test_a_terminated_machine_is_not_connected_to(vm):
    router, log = vm
    router.get(URL).mock(return_value=httpx.Response(200, json=lambda_instance(
        status="terminated")))
    result = invoke("ssh", REF, "--", "true")
    assert result.exit_code == 2 and "terminated" in result.stderr
    assert _fake_ssh.calls(log) == []


def test_client_exec_over_ssh_for_scripts(vm, monkeypatch):
    _, log = vm
    monkeypatch.setenv("FAKE_SSH_EXIT", "0")
    result = Client().exec(REF, "nvidia-smi -L", timeout=30)
    assert result.ok and result.command == "nvidia-smi -L"
    [args] = _fake_ssh.calls(log)
    assert "BatchMode=yes" in args and args[-1] == "nvidia-smi -L"


# -- machines reached through an exec API (Kubernetes pods, the sandbox) --------------

POD = Instance(provider="kubernetes", id="gpucloud-abc", status="running",
               connection=Connection(method="api"))


@pytest.fixture
def pod(monkeypatch, tmp_path):
    log = _fake_ssh.install(tmp_path / "bin", monkeypatch)
    ran = []

    def fake_exec(self, ref, command, *, timeout=120.0, identity=None):
        ran.append((command, timeout))
        return ExecResult(command=command, exit_code=7, stdout="out\n", stderr="err\n")

    monkeypatch.setattr(Client, "get", lambda self, ref: POD)
    monkeypatch.setattr(Client, "exec", fake_exec)
    return ran, log


def test_an_api_machine_runs_the_command_through_exec(pod):
    ran, log = pod
    result = invoke("ssh", POD.ref, "--", "nvidia-smi", "-L")
    assert result.exit_code == 7
    assert (result.stdout, result.stderr) == ("out\n", "err\n")
    assert ran == [("nvidia-smi -L", 120.0)] and _fake_ssh.calls(log) == []


def test_an_api_machine_has_no_interactive_shell(pod):
    ran, _ = pod
    result = invoke("ssh", POD.ref)
    assert result.exit_code == 2
    assert "no interactive shell" in result.stderr and "-- CMD" in result.stderr
    assert ran == []
    data = json.loads(invoke("ssh", POD.ref, "--print", "--json").stdout)
    assert data["error"]["code"] == "no_ssh" and data["error"]["exit_code"] == 2


def test_get_shows_the_ssh_endpoint(vm):
    result = invoke("get", REF)
    assert f"ssh            ubuntu@198.51.100.2:22  (gpucloud ssh {REF})" in result.stdout
