"""doctor's checks over recorded nvidia-smi outputs through a fake executor: no
GPU needed. tests/fixtures/nvidia-smi/*.txt describe one constructed 8x H100
machine; tests/fixtures/nvidia-smi/real/ holds outputs published by users of
real machines (sources in SOURCE.txt)."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from gpucloud.machine import doctor, nvidia
from gpucloud.catalog.gpus import datasheet_tflops
from gpucloud.models import ExecResult, Instance, InstanceStatus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
REAL = FIXTURES / "real"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def machine(gpu="H100", count=8) -> Instance:
    return Instance(provider="lambda", id="i-1", status=InstanceStatus.RUNNING, gpu=gpu,
                    gpu_count=count, price_per_hour=Decimal("23.92"),
                    created_at=datetime(2026, 12, 1, tzinfo=timezone.utc))


HEALTHY = {
    nvidia.LIST_COMMAND: (0, "h100x8_list.txt"),
    nvidia.DRIVER_QUERY_COMMAND: (0, "h100x8_driver_version.txt"),
    nvidia.HEADER_COMMAND: (0, "h100x8_nvidia-smi.txt"),
    nvidia.container_command(): (0, "h100x8_list.txt"),
    nvidia.query_command(nvidia.ECC_FIELDS): (0, "h100x8_ecc.txt"),
    nvidia.KERNEL_LOG_COMMAND: (0, "dmesg_clean.txt"),
    nvidia.TOPO_COMMAND: (0, "h100x8_topo.txt"),
    nvidia.DISK_COMMAND: (0, "df_root.txt"),
    nvidia.burn_command(30): (0, "burn_h100x8.txt"),
}


class FakeMachine:
    """An executor answering each command from a fixture; `stderr` files end in _stderr."""

    def __init__(self, **changes):
        self.answers = dict(HEALTHY)
        self.answers.update({getattr(nvidia, k, None) or k: v for k, v in changes.items()})
        self.ran: list[tuple[str, float]] = []

    def __call__(self, command: str, timeout: float) -> ExecResult:
        self.ran.append((command, timeout))
        if command.startswith("python3 -c") and command not in self.answers:
            command = nvidia.burn_command(30)
        code, name = self.answers[command]
        body = text(name)
        if name.endswith("_stderr.txt"):
            return ExecResult(command=command, exit_code=code, stderr=body)
        return ExecResult(command=command, exit_code=code, stdout=body)


def statuses(report) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def check(report, name):
    return next(c for c in report.checks if c.name == name)


def test_a_healthy_8x_h100_passes_every_check():
    fake = FakeMachine()
    report = doctor.run(machine(), fake)
    assert report.ok and set(statuses(report).values()) == {"ok"}
    assert list(statuses(report)) == ["gpus", "driver", "container", "ecc", "xid", "topology",
                                      "disk", "burn"]
    assert "driver 550.54.15, CUDA 12.4" in check(report, "driver").detail
    assert "70% of the datasheet's 989 (worst: GPU 5)" in check(report, "burn").detail
    assert report.as_dict()["ok"] is True and set(report.as_dict()) == {"instance", "checks",
                                                                        "ok"}


def test_a_missing_gpu_fails_with_its_fix():
    report = doctor.run(machine(), FakeMachine(LIST_COMMAND=(0, "h100x8_missing_gpu_list.txt")))
    gpus = check(report, "gpus")
    assert not report.ok and gpus.status == "fail"
    assert "only 7 of 8 GPUs visible" in gpus.detail
    assert "check the container runtime and the driver version first" in gpus.fix


def test_no_driver_at_all_fails():
    fake = FakeMachine(LIST_COMMAND=(127, "docker_missing_stderr.txt"))
    report = doctor.run(machine(), fake)
    assert check(report, "gpus").status == "fail" and "nvidia-smi not found" in \
        check(report, "gpus").detail
    # nothing GPU-specific is attempted on a machine without GPUs
    assert not any(cmd.startswith(("docker", "python3")) for cmd, _ in fake.ran)


def test_the_wrong_model_fails():
    report = doctor.run(machine(gpu="H200"), FakeMachine())
    assert check(report, "gpus").status == "fail"
    assert "sold as 8x H200" in check(report, "gpus").detail


def test_an_xid_79_fails_and_names_the_gpu():
    report = doctor.run(machine(), FakeMachine(KERNEL_LOG_COMMAND=(0, "dmesg_xid79.txt")))
    xid = check(report, "xid")
    assert not report.ok and xid.status == "fail"
    assert "Xid 79 on PCI:0000:5d:00" in xid.detail and "fallen off the bus" in xid.detail
    assert "checkpoint" in xid.fix


def test_an_application_xid_only_warns():
    report = doctor.run(machine(), FakeMachine(KERNEL_LOG_COMMAND=(0, "dmesg_xid13.txt")))
    assert report.ok and check(report, "xid").status == "warn"


def test_an_unreadable_kernel_log_warns_that_it_needs_root():
    fake = FakeMachine(KERNEL_LOG_COMMAND=(1, "dmesg_not_permitted_stderr.txt"))
    xid = check(doctor.run(machine(), fake), "xid")
    assert xid.status == "warn" and "needs root" in xid.detail and "sudo dmesg" in xid.fix


def test_an_old_cuda_warns_with_its_fix():
    report = doctor.run(machine(), FakeMachine(
        HEADER_COMMAND=(0, "h100x8_old_driver_nvidia-smi.txt")))
    driver = check(report, "driver")
    assert report.ok and driver.status == "warn"
    assert "H100 needs CUDA >= 11.8" in driver.detail and "base image" in driver.fix


def test_uncorrected_ecc_errors_fail():
    ecc = check(doctor.run(machine(), FakeMachine(
        **{nvidia.query_command(nvidia.ECC_FIELDS): (0, "h100x8_ecc_errors.txt")})), "ecc")
    assert ecc.status == "fail" and "GPU 3: 2" in ecc.detail


def test_consumer_gpus_without_ecc_are_fine():
    assert doctor.check_ecc(ExecResult(command="q", exit_code=0,
                                       stdout=text("rtx4090_ecc.txt"))).status == "ok"


def test_pcie_topology_warns():
    topo = check(doctor.run(machine(), FakeMachine(TOPO_COMMAND=(0, "pcie_x8_topo.txt"))),
                 "topology")
    assert topo.status == "warn" and "28 of 28 GPU pairs not on NVLink" in topo.detail
    assert "NVLink" in topo.fix


def test_a_single_gpu_machine_skips_the_topology():
    one = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
    fake = FakeMachine()

    def single(command, timeout):
        if command in (nvidia.LIST_COMMAND, nvidia.container_command()):
            return ExecResult(command=command, exit_code=0, stdout=one)
        return fake(command, timeout)

    report = doctor.run(machine(count=1), single)
    assert "topology" not in statuses(report) and check(report, "gpus").status == "ok"
    assert not any(cmd == nvidia.TOPO_COMMAND for cmd, _ in fake.ran)


def test_docker_missing_warns_and_a_runtime_without_gpus_fails():
    fake = FakeMachine(**{nvidia.container_command(): (127, "docker_missing_stderr.txt")})
    assert check(doctor.run(machine(), fake), "container").status == "warn"
    fake = FakeMachine(**{nvidia.container_command(): (125, "docker_no_toolkit_stderr.txt")})
    runtime = check(doctor.run(machine(), fake), "container")
    assert runtime.status == "fail" and "NVIDIA Container Toolkit" in runtime.fix


def test_a_nearly_full_disk():
    disk = check(doctor.run(machine(), FakeMachine(DISK_COMMAND=(0, "df_root_full.txt"))),
                 "disk")
    assert disk.status == "warn" and "3 GB free on /" in disk.detail


def test_a_slow_gpu_fails_the_burn_and_no_torch_warns():
    slow = check(doctor.run(machine(), FakeMachine(
        **{nvidia.burn_command(30): (0, "burn_h100x8_slow_gpu5.txt")})), "burn")
    assert slow.status == "fail" and "19%" in slow.detail and "GPU 5" in slow.detail
    no_torch = check(doctor.run(machine(), FakeMachine(
        **{nvidia.burn_command(30): (3, "burn_no_torch_stderr.txt")})), "burn")
    assert no_torch.status == "warn" and "PyTorch" in no_torch.fix


def test_skip_burn_and_burn_seconds():
    fake = FakeMachine()
    report = doctor.run(machine(), fake, burn_seconds=None)
    assert "burn" not in statuses(report)
    doctor.run(machine(), fake, burn_seconds=5)
    burn = [(c, t) for c, t in fake.ran if c.startswith("python3")]
    assert burn[-1][0].endswith(" 5") and burn[-1][1] > 5


def test_an_unknown_gpu_gets_no_ratio():
    burn = doctor.check_burn(machine(gpu="Mystery X1"), ExecResult(
        command="b", exit_code=0, stdout=text("burn_h100x8.txt")), "Mystery X1")
    assert burn.status == "warn" and "no ratio" in burn.detail


def test_datasheet_figures_follow_the_form_factor():
    assert datasheet_tflops("H100", "NVIDIA H100 80GB HBM3") == 989.0
    assert datasheet_tflops("H100", "NVIDIA H100 PCIe") == 756.0
    assert datasheet_tflops("H100", "NVIDIA H100 NVL") == 835.0
    assert datasheet_tflops("A100-80GB") == 312.0 and datasheet_tflops("T4") is None


def test_the_burn_script_is_valid_python():
    compile(nvidia.BURN_SCRIPT, "burn", "exec")
    assert nvidia.BURN_MARKER in nvidia.burn_command(30)


@pytest.mark.parametrize("name,count", [("h100x8_list.txt", 8),
                                        ("h100x8_missing_gpu_list.txt", 7)])
def test_parse_list(name, count):
    listed = nvidia.parse_list(text(name))
    assert len(listed) == count and listed[0].uuid.startswith("GPU-")


def test_parse_topology_and_query():
    links = nvidia.parse_topology(text("h100x8_topo.txt"))
    assert len(links) == 28 and set(links.values()) == {"NV18"}
    rows = nvidia.parse_query(text("h100x8_query_busy.txt"), nvidia.TOP_FIELDS)
    assert len(rows) == 8 and rows[0]["name"] == "NVIDIA H100 80GB HBM3"
    with pytest.raises(ValueError):
        nvidia.parse_query("0, 1\n", nvidia.TOP_FIELDS)
