"""doctor and top end to end: the CLI, the client's exec, the sandbox's exec API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.providers.sandbox import exec_sim
from gpucloud.cli import app

XID = (Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" /
       "dmesg_xid79.txt").read_text()


@pytest.fixture
def cli():
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args))


@pytest.fixture
def machine():
    return Client().create(gpu="h100", count=8, provider="sandbox", name="doc",
                           auto_shutdown="2h")


def test_doctor_passes_on_a_healthy_simulated_machine(cli, machine):
    result = cli("doctor", "doc")
    assert result.exit_code == 0, result.output
    for name in ("gpus", "driver", "container", "ecc", "xid", "topology", "disk", "burn"):
        assert f"\n{name} " in "\n" + result.stdout
    assert f"{machine.ref}: ready" in result.stdout and "simulated" in result.stdout


def test_doctor_json_shape(cli, machine):
    result = cli("doctor", "doc", "--json", "--skip-burn")
    assert result.exit_code == 0 and result.stderr == ""
    data = json.loads(result.stdout)
    assert set(data) == {"instance", "checks", "ok"} and data["ok"] is True
    assert data["instance"] == machine.ref
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in data["checks"])
    assert "burn" not in {c["name"] for c in data["checks"]}


def test_a_failed_check_exits_9_with_the_fix(cli, machine, monkeypatch):
    monkeypatch.setattr(exec_sim.Box, "dmesg", lambda self: XID)
    result = cli("doctor", "doc", "--skip-burn")
    assert result.exit_code == 9
    assert "xid        FAIL" in result.stdout and "fix (xid):" in result.stdout
    assert "NOT ready" in result.stdout
    data = json.loads(cli("doctor", "doc", "--skip-burn", "--json").stdout)
    assert data["ok"] is False


def test_doctor_on_a_stopped_machine_is_a_clear_error(cli, machine):
    Client().stop(machine)
    result = cli("doctor", "doc", "--json")
    assert result.exit_code != 0 and result.exit_code != 1
    assert "error" in json.loads(result.stdout)


def test_top_json_streams_one_object_per_sample(cli, machine, monkeypatch):
    monkeypatch.setattr("gpucloud.cli.commands.doctor.time.sleep", lambda s: None)
    result = cli("top", "doc", "--count", "3", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    samples = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(samples) == 3
    first = samples[0]
    assert set(first) == {"at", "instance", "gpus", "mean_utilization_pct", "cost_so_far",
                          "shutdown_at", "time_left_seconds", "hint", "simulated"}
    assert len(first["gpus"]) == 8 and first["gpus"][0]["memory_total_mib"] == 81559
    assert isinstance(first["cost_so_far"], str) and 0 < first["time_left_seconds"] <= 7200


def test_top_hints_at_a_data_bottleneck_when_gpus_wait(cli, machine, monkeypatch):
    monkeypatch.setattr("gpucloud.cli.commands.doctor.time.sleep", lambda s: None)
    original = exec_sim.Box.__init__

    def starved(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.busy = False

    monkeypatch.setattr(exec_sim.Box, "__init__", starved)
    result = cli("top", "doc", "--count", "3", "--interval", "1s")
    assert result.exit_code == 0
    assert result.stdout.count("hint:") == 1  # from the third sample on
    assert "data loading, CPU preprocessing or network" in " ".join(result.stdout.split())
    assert "cost so far $" in result.stdout and "left 1h" in result.stdout


def test_ctrl_c_ends_top_cleanly(cli, machine, monkeypatch):
    def interrupt(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr("gpucloud.cli.commands.doctor.time.sleep", interrupt)
    result = cli("top", "doc", "--json")
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 1


def test_top_refuses_a_sub_second_interval(cli, machine):
    result = cli("top", "doc", "--interval", "0.5s", "--json")
    assert result.exit_code == 2 and "under one second" in result.stdout
