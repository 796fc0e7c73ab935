"""doctor's checks over outputs published from real machines
(tests/fixtures/nvidia-smi/real, sources in tests/fixtures/nvidia-smi/SOURCE.txt):
every nvidia-smi header form from driver 331 to 610, GPU names as nvidia-smi
prints them, the kernel log of a GPU fallen off the bus, NVLink Xids, nvidia-smi's
own exit 255 and a docker CLI without its daemon."""

from __future__ import annotations

import re

import pytest

from gpucloud import Connection, ExecResult
from gpucloud.machine import doctor, nvidia
from tests.unit.test_doctor_checks import REAL, FakeMachine, check, machine, text

HEADERS = sorted(REAL.glob("header_*.txt"))


def result(stdout: str = "", code: int = 0, stderr: str = "", command: str = "c") -> ExecResult:
    return ExecResult(command=command, exit_code=code, stdout=stdout, stderr=stderr)


def listing(*names: str) -> ExecResult:
    return result("".join(f"GPU {i}: {n} (UUID: GPU-{i})\n" for i, n in enumerate(names)))


# --- driver versions: every header form, and the query first -------------------------

def test_headers_from_many_driver_series_are_collected():
    majors = {int(p.stem.split("_")[1].split(".")[0]) for p in HEADERS}
    assert {331, 390, 450, 535, 550, 580, 610} <= majors and len(HEADERS) >= 15


@pytest.mark.parametrize("path", HEADERS, ids=lambda p: p.stem)
def test_every_header_form_gives_the_driver_and_the_cuda_version(path):
    driver = path.stem.split("_", 1)[1]
    versions = nvidia.parse_header(path.read_text())
    assert versions.driver == driver
    # CUDA joined the header with driver 410; before that there is none to read
    if int(driver.split(".")[0]) >= 410:
        assert versions.cuda is not None and re.fullmatch(r"\d+\.\d+", versions.cuda)
    else:
        assert versions.cuda is None


def test_a_healthy_b200_on_driver_610_is_driver_ok():
    b200 = machine(gpu="B200", count=2)
    report = doctor.run(b200, FakeMachine(
        LIST_COMMAND=(0, "real/list_b200.txt"),
        DRIVER_QUERY_COMMAND=(6, "real/nvml_no_supported_gpus_stderr.txt"),  # no answer
        HEADER_COMMAND=(0, "real/header_610.43.02.txt")), burn_seconds=None)
    driver = check(report, "driver")
    assert driver.status == "ok", driver
    assert driver.detail == "driver 610.43.02, CUDA 13.3"
    assert check(report, "gpus").status == "ok"


def test_the_driver_query_is_the_first_source_and_the_header_gives_cuda():
    fake = FakeMachine(DRIVER_QUERY_COMMAND=(0, "real/query_driver_version_610.57.04.txt"),
                       HEADER_COMMAND=(0, "real/header_610.57.04.txt"))
    driver = check(doctor.run(machine(gpu="RTX4080", count=1), fake, burn_seconds=None),
                   "driver")
    assert driver.status == "ok" and driver.detail == "driver 610.57.04, CUDA 13.3"
    assert any(cmd == nvidia.DRIVER_QUERY_COMMAND for cmd, _ in fake.ran)
    # the query wins over a header that says otherwise
    mixed = doctor.check_driver(machine(), result(text("real/header_590.48.01.txt")),
                                result("610.57.04\n"))
    assert mixed.detail == "driver 610.57.04, CUDA 13.1"


def test_a_driver_query_that_is_no_version_falls_back_to_the_header():
    driver = doctor.check_driver(machine(), result(text("real/header_590.48.01.txt")),
                                 result("[N/A]\n"))
    assert driver.detail == "driver 590.48.01, CUDA 13.1"


# --- the kernel log: a GPU fallen off the bus, hardware and NVLink Xids --------------

FAULTY = "the machine is faulty: delete it and take another"


def xid_check(stdout: str):
    return doctor.check_xid(result(stdout))


def test_a_gpu_fallen_off_the_bus_without_an_xid_line_fails_quoting_the_driver():
    xid = xid_check(text("real/dmesg_fallen_off_bus_570.txt"))
    assert xid.status == "fail" and xid.fix.startswith(FAULTY)
    assert "0000:b3:00.0" in xid.detail
    assert ('"NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this '
            'system has fallen off the bus and is not responding to commands."') in xid.detail


@pytest.mark.parametrize("log,pci", [
    (text("real/dmesg_fallen_off_bus_old.txt"), "0000:01:00.0"),
    # the single-line form of driver 570's message, CONSTRUCTED: no paste of it was found
    ("[ 12.5] NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.\n", "0000:b3:00.0"),
])
def test_every_form_of_the_fallen_off_the_bus_line_fails(log, pci):
    xid = xid_check(log)
    assert xid.status == "fail" and pci in xid.detail and "fallen off the bus" in xid.detail
    assert xid.fix.startswith(FAULTY)


def test_a_fatal_nvlink_xid_fails_and_a_nonfatal_one_warns():
    fatal = xid_check(text("real/dmesg_nvlink_149_fatal.txt"))
    assert fatal.status == "fail" and "Xid 149" in fatal.detail and "Fatal" in fatal.detail
    nonfatal = xid_check(text("real/dmesg_nvlink_144_nonfatal.txt"))
    assert nonfatal.status == "warn" and "Xid 144, 145" in nonfatal.detail


def test_an_xid_45_that_names_an_earlier_nvlink_xid_is_not_that_xid():
    assert xid_check(text("real/dmesg_xid45_after_nvlink.txt")).status == "warn"


@pytest.mark.parametrize("code", [48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 154])
def test_the_xids_the_catalogue_calls_hardware_fail(code):
    xid = xid_check(f"[ 1.0] NVRM: Xid (PCI:0000:10:1c): {code}, pid=1896, message\n")
    assert xid.status == "fail" and xid.fix.startswith(FAULTY)
    assert code in nvidia.HARDWARE_XIDS and nvidia.XID_CATALOGUE.startswith("https://docs.nvidia")


# --- GPU names as nvidia-smi prints them --------------------------------------------

def _names_in(path: str) -> list[str]:
    body = text(path)
    listed = [g.name for g in nvidia.parse_list(body)]
    return listed or re.findall(r"^\|\s+\d+\s+(NVIDIA [^|]+?)\s+(?:On|Off)\s+\|", body, re.M)


@pytest.mark.parametrize("fixture,paid", [
    ("real/list_a100_sxm4_80gb_mig.txt", "A100-80GB"),
    ("real/list_h100_80gb_hbm3.txt", "H100"),
    ("real/list_h200.txt", "H200"),
    ("real/list_b200.txt", "B200"),
    ("real/list_l40s.txt", "L40S"),
    ("real/list_rtx_4080_super.txt", "RTX4080"),
    ("real/header_535.86.10.txt", "A800"),
    ("real/header_535.183.01.txt", "H100"),
    ("real/header_580.126.09.txt", "A100-40GB"),
    ("real/header_610.43.02.txt", "B200"),
])
def test_published_gpu_names_match_what_was_paid_for(fixture, paid):
    names = _names_in(fixture)
    assert names
    gpus, _ = doctor.check_gpus(machine(gpu=paid, count=len(names)), listing(*names))
    assert gpus.status == "ok", gpus


@pytest.mark.parametrize("name,paid", [
    ("NVIDIA A100-PCIE-40GB", "A100-40GB"), ("A100-SXM-80GB", "A100-80GB"),
    ("NVIDIA H100 PCIe", "H100"), ("NVIDIA H100 NVL", "H100"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX6000-ADA"),
    ("NVIDIA GeForce RTX 4080 SUPER", "RTX4080"),
    ("NVIDIA A100-SXM4-80GB", "A100"),  # sold as the family, without memory
])
def test_every_spelling_of_a_paid_gpu_matches(name, paid):
    gpus, _ = doctor.check_gpus(machine(gpu=paid, count=1), listing(name))
    assert gpus.status == "ok", gpus


def test_the_other_memory_variant_is_still_the_wrong_model():
    gpus, _ = doctor.check_gpus(machine(gpu="A100-80GB", count=1),
                                listing("NVIDIA A100-SXM4-40GB"))
    assert gpus.status == "fail" and "sold as 1x A100-80GB" in gpus.detail


def test_a_name_the_catalogue_does_not_know_is_a_warning_that_names_it():
    gpus, listed = doctor.check_gpus(machine(gpu="H100", count=1),
                                     listing("NVIDIA Mystery X1 96GB"))
    assert gpus.status == "warn" and "'NVIDIA Mystery X1 96GB'" in gpus.detail
    assert len(listed) == 1


# --- nvidia-smi's own exit 255, over ssh -----------------------------------------------

def ssh_machine():
    return machine().model_copy(update={"connection": Connection(
        method="ssh", host="198.51.100.2", port=22, user="ubuntu")})


def test_nvml_exit_255_with_a_working_login_is_no_gpu_not_a_login_failure():
    fake = FakeMachine(LIST_COMMAND=(255, "real/nvml_no_supported_gpus_stderr.txt"),
                       true=(0, "df_root.txt"))
    report = doctor.run(ssh_machine(), fake, burn_seconds=None)
    gpus = check(report, "gpus")
    assert "login" not in {c.name for c in report.checks}
    assert gpus.status == "fail" and gpus.detail == (
        "no GPU visible: Failed to initialize NVML: No supported GPUs were found")
    assert gpus.fix == doctor.FIX_NO_GPU
    assert [cmd for cmd, _ in fake.ran[:2]] == [nvidia.LIST_COMMAND, doctor.LOGIN_PROBE]


def test_a_probe_that_fails_too_is_the_login_failure():
    fake = FakeMachine(LIST_COMMAND=(255, "real/nvml_no_supported_gpus_stderr.txt"),
                       true=(255, "real/ssh_permanently_added_stderr.txt"))
    report = doctor.run(ssh_machine(), fake, burn_seconds=None)
    assert [c.name for c in report.checks] == ["login"]


# --- docker without its daemon ---------------------------------------------------------

def test_a_docker_cli_without_its_daemon_warns():
    container = doctor.check_container(
        result(code=125, stderr=text("real/docker_no_daemon_stderr.txt")), 8)
    assert container.status == "warn"
    assert "docker is installed but its daemon is not running" in container.detail
    assert "Container Toolkit" not in (container.fix or "")
