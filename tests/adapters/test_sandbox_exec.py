"""The sandbox answers commands like a Linux box with the machine's GPUs
(exec_sim.py): only while it runs, with bodies validated like every endpoint."""

from __future__ import annotations

import pytest

from gpucloud.machine import doctor, nvidia
from gpucloud.providers.sandbox.exec_sim import Box
from gpucloud.errors import ConflictError, NotFoundError
from gpucloud.models import InstanceStatus
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    Env,
    _no_sandbox_env,
    catalog,
    clock,
    env,
)


def running(env, clock, instance_type="sim.8xH100"):
    made = env.create(instance_type)
    clock.advance(5)
    return env.run(env.provider.get(made.id))


def test_connection_is_the_api_once_running_and_none_while_pending(env, clock):
    made = env.create()
    assert made.status == InstanceStatus.PENDING and made.connection is None
    clock.advance(5)
    assert env.run(env.provider.get(made.id)).connection.method == "api"


def test_nvidia_smi_lists_the_machines_gpus(env, clock):
    machine = running(env, clock)
    result = env.provider.exec_command(machine.id, "nvidia-smi -L", 30)
    listed = nvidia.parse_list(result.stdout)
    assert result.ok and len(listed) == 8
    assert {g.name for g in listed} == {"NVIDIA H100 80GB HBM3"}


def test_query_values_vary_with_time_and_are_fixed_for_a_fixed_clock(env, clock):
    machine = running(env, clock)
    command = nvidia.query_command(nvidia.TOP_FIELDS)
    first = env.provider.exec_command(machine.id, command, 30).stdout
    assert env.provider.exec_command(machine.id, command, 30).stdout == first
    clock.advance(1)
    later = env.provider.exec_command(machine.id, command, 30).stdout
    assert later != first
    rows = nvidia.parse_query(later, nvidia.TOP_FIELDS)
    assert [r["memory.total"] for r in rows] == ["81559"] * 8


def test_with_header_and_units_and_unknown_fields(env, clock):
    machine = running(env, clock, "sim.1xH100")
    shown = env.provider.exec_command(
        machine.id, "nvidia-smi --query-gpu=index,memory.used --format=csv", 30).stdout
    assert shown.splitlines()[0] == "index, memory.used [MiB]"
    assert shown.splitlines()[1].endswith(" MiB")
    bad = env.provider.exec_command(
        machine.id, "nvidia-smi --query-gpu=index,bogus --format=csv", 30)
    assert bad.exit_code == 2 and 'Field "bogus"' in bad.stderr


def test_unknown_commands_and_pipes_are_not_pretended(env, clock):
    machine = running(env, clock, "sim.1xH100")
    missing = env.provider.exec_command(machine.id, "htop", 30)
    assert missing.exit_code == 127 and "command not found" in missing.stderr
    assert env.provider.exec_command(machine.id, "dmesg | grep Xid", 30).exit_code == 2


def test_pcie_boards_show_no_nvlink():
    box = Box("sbx-pcie", "L40S", 4, 100, 0)  # the sandbox sells no multi-GPU L40S
    code, topo, _ = box.run(nvidia.TOPO_COMMAND)
    links = set(nvidia.parse_topology(topo).values())
    assert code == 0 and links == {"NODE", "SYS"}


def test_a_machine_that_is_not_running_refuses(env, clock):
    made = env.create()
    with pytest.raises(ConflictError, match="pending"):
        env.provider.exec_command(made.id, "nvidia-smi -L", 30)
    with pytest.raises(NotFoundError):
        env.provider.exec_command("sbx-nothere", "nvidia-smi -L", 30)


@pytest.mark.parametrize("body", [
    None, [], {"command": ""}, {"command": 3}, {"command": "ls", "timeout": -1},
    {"command": "ls", "timeout": True}, {"command": "ls", "extra": 1},
])
def test_the_body_is_validated(env, clock, body):
    machine = running(env, clock, "sim.1xH100")
    response = env.raw("POST", f"/v1/instances/{machine.id}/exec", json=body)
    assert response.status_code == 422, response.json()
    assert response.json()["error"]["code"] == "invalid_request"


def test_only_post(env, clock):
    machine = running(env, clock, "sim.1xH100")
    assert env.raw("GET", f"/v1/instances/{machine.id}/exec").status_code == 405


def test_the_whole_checklist_passes_on_a_simulated_machine(env, clock):
    machine = running(env, clock)
    report = doctor.run(machine, lambda cmd, t: env.provider.exec_command(machine.id, cmd, t))
    assert report.ok and [c.status for c in report.checks] == ["ok"] * 8, report.checks
    burn = report.checks[-1]
    assert burn.name == "burn" and "of the datasheet's 989" in burn.detail
