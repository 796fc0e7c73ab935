"""`gpucloud doctor --nccl` without a GPU: the nccl-tests table and NCCL's debug
lines as users published them (tests/fixtures/nccl/real, sources in
tests/fixtures/nccl/SOURCE.txt), the diagnosis of each classic fault, the
verdict against the interconnect, and the run on one machine and across a
job's nodes through a fake executor."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from gpucloud.jobs.multinode import node_env
from gpucloud.machine import nccl, nccl_check, nvidia
from gpucloud.models import ExecResult, Instance, InstanceStatus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NCCL = FIXTURES / "nccl"
REAL = NCCL / "real"
SMI = FIXTURES / "nvidia-smi"


def text(path: Path) -> str:
    return path.read_text()


def machine(gpu="H100", count=8, ident="i-1", private_ip="10.0.0.11") -> Instance:
    return Instance(provider="lambda", id=ident, status=InstanceStatus.RUNNING, gpu=gpu,
                    gpu_count=count, price_per_hour=Decimal("23.92"), private_ip=private_ip,
                    created_at=datetime(2026, 12, 1, tzinfo=timezone.utc))


def listing(count: int, name: str = "NVIDIA H100 80GB HBM3") -> str:
    return "".join(f"GPU {i}: {name} (UUID: GPU-{i})\n" for i in range(count))


class FakeNode:
    """One machine: answers each command from a fixture; records what ran."""

    def __init__(self, *, gpus=8, name="NVIDIA H100 80GB HBM3", probe="probe_ib_8x400.txt",
                 topo="h100x8_topo.txt", bench: str | None = None, bench_code=0,
                 bench_stderr: str = ""):
        self.answers = {nvidia.LIST_COMMAND: listing(gpus, name),
                        nccl.PROBE_COMMAND: text(NCCL / probe),
                        nvidia.TOPO_COMMAND: text(SMI / topo)}
        self.bench, self.bench_code, self.bench_stderr = bench, bench_code, bench_stderr
        self.ran: list[str] = []

    def __call__(self, command: str, timeout: float) -> ExecResult:
        self.ran.append(command)
        if command in self.answers:
            return ExecResult(command=command, exit_code=0, stdout=self.answers[command])
        if "all_reduce_perf" in command or "torch.distributed.run" in command:
            return ExecResult(command=command, exit_code=self.bench_code,
                              stdout=self.bench or "", stderr=self.bench_stderr)
        return ExecResult(command=command, exit_code=127,
                          stderr=f"bash: {command.split()[0]}: command not found\n")


def benchmarks(node: FakeNode) -> list[str]:
    return [c for c in node.ran if c != nccl.PROBE_COMMAND
            and ("all_reduce_perf" in c or "torch.distributed.run" in c)]


def check(report, name):
    return next(c for c in report.checks if c.name == name)


# --- the table, as nccl-tests printed it -------------------------------------------

def test_a_two_node_h100_run_is_read_row_by_row():
    parsed = nccl.parse_allreduce(text(REAL / "allreduce_h100x16_2nodes_a3mega.txt"))
    assert len(parsed.rows) == 31 and parsed.ranks == 16 and parsed.headers == 1
    last = parsed.rows[-1]
    assert (last.size, last.count, last.type, last.redop) == (8589934592, 2147483648,
                                                                "float", "sum")
    assert last.out_of_place == nccl.Measure(47535.0, 180.71, 338.82, 0)
    assert last.in_place == nccl.Measure(47743.0, 179.92, 337.35, 0)
    assert parsed.avg_busbw == 70.742 and parsed.peak_busbw == 338.82 and parsed.wrong == 0


def test_the_newer_wrong_column_and_the_concluding_lines_are_read():
    parsed = nccl.parse_allreduce(text(REAL / "allreduce_gh200x2_2nodes_alps.txt"))
    assert [r.size for r in parsed.rows] == [1048576 << i for i in range(8)]
    assert parsed.avg_busbw == 14.9966 and parsed.peak_busbw == 22.88 and parsed.ranks == 2


def test_the_old_table_without_redop_root_and_with_an_error_column_is_read():
    parsed = nccl.parse_allreduce(text(REAL / "allreduce_old_format_nccl264_2gpus.txt"))
    assert len(parsed.rows) == 12 and parsed.rows[0].redop is None
    assert parsed.rows[-1].in_place == nccl.Measure(3070.3, 21.86, 21.86, 0)
    assert parsed.wrong == 0 and parsed.avg_busbw == 6.6972


def test_a_table_without_its_avg_line_still_gives_the_peak():
    parsed = nccl.parse_allreduce(text(REAL / "allreduce_h100pcie_nvlink_2gpus.txt"))
    assert len(parsed.rows) == 2 and parsed.avg_busbw is None
    assert parsed.peak_busbw == 115.93


def test_wrong_elements_are_counted_and_fail_the_verdict():
    rows = "     1048576        262144     float     sum      -1   339.61    3.09    3.09" \
           "      12   335.85    3.12    3.12       0\n"
    parsed = nccl.parse_allreduce(rows)
    assert parsed.wrong == 12
    assert nccl_check.verdict(parsed, nccl_check.Expected(3.0, "x")).status == "fail"


def test_the_torch_fallback_prints_what_the_same_parser_reads():
    parsed = nccl.parse_allreduce(text(NCCL / "torch_h100x8.txt"))
    assert parsed.ranks == 8 and parsed.rows[-1].out_of_place is None
    assert parsed.peak_busbw == 427.93 and parsed.avg_busbw == 228.224
    compile(nccl.TORCH_SCRIPT, "torch-script", "exec")  # what runs on the machine parses
    assert "algbw * 2 * (n - 1) / n" in nccl.TORCH_SCRIPT  # nccl-tests' all-reduce busbw


# --- NCCL_DEBUG=INFO -----------------------------------------------------------------

def test_ib_disabled_and_lo_are_read_from_nccls_own_lines():
    log = nccl.parse_nccl_log(text(REAL / "nccl_info_ib_disabled_socket_lo.txt"))
    assert log.env_set["NCCL_IB_DISABLE"] == "1" and log.env_set["NCCL_SOCKET_IFNAME"] == "lo"
    assert log.networks == ["Socket"] and log.socket_ifs == ["lo"] and log.socket_only


def test_no_ib_device_then_socket_is_read():
    log = nccl.parse_nccl_log(text(REAL / "nccl_info_ib_no_device_socket_eno1.txt"))
    assert log.ib_not_found and log.socket_only
    assert log.socket_ifs == ["eno1", "veth2ea2288", "vethae2223a"]
    aws = nccl.parse_nccl_log(text(REAL / "nccl_info_aws_ens3_no_ib.txt"))
    assert aws.ib_not_found and aws.socket_ifs == ["ens3"] and aws.networks == []


def test_roce_through_the_ib_plugin_is_not_a_socket_fallback():
    log = nccl.parse_nccl_log(text(REAL / "nccl_info_roce_ibext.txt"))
    assert log.networks == ["IBext_v8"] and not log.socket_only and not log.ib_not_found
    assert log.ib_devices == ["mlx5_2", "mlx5_3", "mlx5_0", "mlx5_1"]


# --- the probe --------------------------------------------------------------------------

def test_the_probe_reads_ib_ports_interfaces_and_tools():
    probe = nccl.parse_probe(text(NCCL / "probe_ib_8x400.txt"))
    assert len(probe.active_ib) == 8 and probe.has_ib
    assert probe.active_ib[0] == nccl.IbPort("mlx5_0", 1, "Active", 400.0, "InfiniBand")
    assert probe.interfaces["eth0"].speed_mbps == 100000
    assert probe.interfaces["docker0"].up is False and probe.interfaces["lo"].speed_mbps is None
    assert probe.tools["all_reduce_perf"] == "/opt/nccl-tests/build/all_reduce_perf"


@pytest.mark.parametrize("spec,selected", [
    ("eth", ["eth0", "eth1"]), ("=eth0", ["eth0"]), ("^lo,docker", ["eth0", "eth1", "ib0"]),
    ("ib0", ["ib0"]), ("ens", []),
])
def test_socket_ifname_follows_nccls_prefix_exact_and_exclude_rules(spec, selected):
    names = ["docker0", "eth0", "eth1", "ib0", "lo"]
    assert nccl.ifname_matches(spec, names) == selected


# --- the diagnosis: each fault and its one-line fix -------------------------------------

def probe(name: str) -> nccl.Probe:
    return nccl.parse_probe(text(NCCL / name))


def test_ib_present_but_disabled_is_found_with_its_fix():
    found = nccl_check.diagnose(probe("probe_ib_disabled.txt"), nccl.parse_nccl_log(""),
                                multi_node=True)
    assert [(c.name, c.status) for c in found] == [("ib-disabled", "fail")]
    assert found[0].fix == "unset NCCL_IB_DISABLE" and "mlx5_0" in found[0].detail
    alone = nccl_check.diagnose(probe("probe_ib_disabled.txt"), nccl.parse_nccl_log(""),
                                multi_node=False)
    assert alone[0].status == "warn" and "spans nodes" in alone[0].detail


def test_ib_disabled_seen_only_in_nccls_lines_counts_too():
    log = nccl.parse_nccl_log(text(REAL / "nccl_info_ib_disabled_socket_lo.txt"))
    found = {c.name: c for c in nccl_check.diagnose(probe("probe_ib_8x400.txt"), log,
                                                     multi_node=True)}
    assert found["ib-disabled"].fix == "unset NCCL_IB_DISABLE"
    assert found["socket-ifname"].status == "fail" and "lo" in found["socket-ifname"].detail
    assert found["socket-ifname"].fix == "set NCCL_SOCKET_IFNAME=ib0"
    alone = {c.name: c.status for c in nccl_check.diagnose(probe("probe_ib_8x400.txt"), log,
                                                           multi_node=False)}
    assert alone == {"ib-disabled": "warn", "socket-ifname": "warn"}


def test_ib_present_but_ncclsees_none_means_the_container_lacks_the_devices():
    log = nccl.parse_nccl_log(text(REAL / "nccl_info_ib_no_device_socket_eno1.txt"))
    found = nccl_check.diagnose(probe("probe_ib_8x400.txt"), log, multi_node=True)
    assert [c.name for c in found] == ["ib-not-found"]
    assert "--device=/dev/infiniband" in (found[0].fix or "")


def test_socket_when_ib_exists_is_a_tcp_fallback():
    log = nccl.parse_nccl_log("h:1:1 [0] NCCL INFO Using network Socket\n")
    found = nccl_check.diagnose(probe("probe_ib_8x400.txt"), log, multi_node=True)
    assert [(c.name, c.status) for c in found] == [("tcp-fallback", "fail")]


def test_no_fault_when_nccl_uses_ib():
    log = nccl.parse_nccl_log(text(REAL / "nccl_info_roce_ibext.txt"))
    assert nccl_check.diagnose(probe("probe_ib_8x400.txt"), log, multi_node=True) == []


def test_socket_ifname_naming_a_missing_interface_fails_everywhere():
    found = nccl_check.diagnose(probe("probe_ifname_missing.txt"), nccl.parse_nccl_log(""),
                                multi_node=False)
    assert [(c.name, c.status) for c in found] == [("socket-ifname", "fail")]
    assert "eth0, lo" in found[0].detail and found[0].fix.startswith(
        "set NCCL_SOCKET_IFNAME=eth0")


def test_a_1gbe_link_when_100gbe_exists_is_slow():
    found = nccl_check.diagnose(probe("probe_no_ib_eth.txt"), nccl.parse_nccl_log(""),
                                multi_node=True)
    assert [(c.name, c.status) for c in found] == [("socket-speed", "fail")]
    assert found[0].fix == "set NCCL_SOCKET_IFNAME=ens5f0"
    assert "1000 Mb/s" in found[0].detail and "100000 Mb/s" in found[0].detail


# --- the verdict against the interconnect ---------------------------------------------

def test_expected_busbw_from_nvlink_pcie_and_the_network():
    h100 = nccl_check.expected_intra("H100", "NVIDIA H100 80GB HBM3", nvlink=True)
    assert h100.busbw == pytest.approx(900 / 2 * 0.8) and "NVLink 900 GB/s" in h100.basis
    bridge = nccl_check.expected_intra("H100", "NVIDIA H100 PCIe", nvlink=True)
    assert bridge.busbw == pytest.approx(600 / 2 * 0.8)
    pcie = nccl_check.expected_intra("RTX4090", "NVIDIA GeForce RTX 4090", nvlink=False)
    assert pcie.busbw == pytest.approx(31.5 * 0.8) and "PCIe Gen4" in pcie.basis
    eth = nccl_check.expected_inter(h100, [probe("probe_no_ib_eth.txt")])
    assert eth.busbw == pytest.approx(100 / 8 * 0.8) and "ens5f0" in eth.basis
    ib = nccl_check.expected_inter(h100, [probe("probe_ib_8x400.txt")])
    # 8 x 400 Gb/s = 400 GB/s x 0.8 = 320, under NVLink's 360: the network is the limit
    assert ib.busbw == pytest.approx(320.0) and "8 active InfiniBand port(s)" in ib.basis
    assert nccl_check.expected_inter(h100, []).busbw == h100.busbw


def test_the_published_h100_two_node_run_is_ok_against_8x400g_ib():
    parsed = nccl.parse_allreduce(text(REAL / "allreduce_h100x16_2nodes_a3mega.txt"))
    h100 = nccl_check.expected_intra("H100", "NVIDIA H100 80GB HBM3", nvlink=True)
    expected = nccl_check.expected_inter(h100, [probe("probe_ib_8x400.txt")] * 2)
    result = nccl_check.verdict(parsed, expected)
    assert result.status == "ok" and "338.8 GB/s" in result.detail and "106%" in result.detail


def test_the_h100_pcie_bridge_pair_is_a_warning_and_pcie_speed_over_nvlink_fails():
    parsed = nccl.parse_allreduce(text(REAL / "allreduce_h100pcie_nvlink_2gpus.txt"))
    bridge = nccl_check.expected_intra("H100", "NVIDIA H100 PCIe", nvlink=True)
    assert nccl_check.verdict(parsed, bridge).status == "warn"  # 116 of 240: 48 %
    slow = nccl.parse_allreduce(text(REAL / "allreduce_old_format_nccl264_2gpus.txt"))
    sxm = nccl_check.expected_intra("H100", "NVIDIA H100 80GB HBM3", nvlink=True)
    failed = nccl_check.verdict(slow, sxm)
    assert failed.status == "fail" and "6%" in failed.detail


# --- the run: one machine ----------------------------------------------------------------

def test_nccl_tests_is_run_when_present_and_judged_against_nvlink():
    node = FakeNode(bench=text(REAL / "allreduce_h100x16_2nodes_a3mega.txt")
                    + text(REAL / "nccl_info_roce_ibext.txt"))
    report = nccl_check.run([machine()], lambda i: node)
    assert report.ok, report.checks
    assert [c.name for c in report.checks] == ["gpus", "nccl"]
    assert benchmarks(node) == ["env NCCL_DEBUG=INFO /opt/nccl-tests/build/all_reduce_perf "
                     "-b 8 -e 1G -f 2 -g 8"]
    data = report.as_dict()
    assert data["nccl"]["tool"] == "nccl-tests" and data["nccl"]["peak_busbw_gbps"] == 338.82
    assert data["nccl"]["network"] == ["IBext_v8"] and len(data["nccl"]["rows"]) == 31


def test_torch_is_the_fallback_without_nccl_tests():
    node = FakeNode(probe="probe_bare.txt", bench=text(NCCL / "torch_h100x8.txt"))
    report = nccl_check.run([machine()], lambda i: node)
    assert report.ok and report.nccl["tool"] == "torch"
    command, = benchmarks(node)
    assert command.startswith("env NCCL_DEBUG=INFO python3 -m torch.distributed.run "
                              "--nproc_per_node=8 --no-python python3 -c ")
    assert "--nnodes" not in command


def test_pcie_only_gpus_are_judged_against_pcie():
    node = FakeNode(name="NVIDIA L40S", topo="pcie_x8_topo.txt", probe="probe_bare.txt",
                    bench=text(REAL / "allreduce_gh200x2_2nodes_alps.txt"))
    report = nccl_check.run([machine(gpu="L40S")], lambda i: node)
    assert "PCIe only: PCIe Gen4" in report.nccl["expected_basis"]
    assert check(report, "nccl").status == "ok"  # 22.9 of 25.2 GB/s


def test_nothing_to_run_is_a_warning_with_the_install_fix():
    node = FakeNode(probe="probe_ifname_missing.txt")
    node.answers[nccl.PROBE_COMMAND] = node.answers[nccl.PROBE_COMMAND].replace(
        "/usr/bin/python3\n", "")
    report = nccl_check.run([machine()], lambda i: node)
    assert check(report, "nccl").status == "warn" and "nccl-tests" in check(report, "nccl").fix
    assert check(report, "socket-ifname").status == "fail" and not report.ok


def test_one_gpu_has_nothing_to_all_reduce():
    node = FakeNode(gpus=1)
    report = nccl_check.run([machine(count=1)], lambda i: node)
    assert report.ok and "one GPU" in check(report, "nccl").detail
    assert benchmarks(node) == []


def test_a_failed_benchmark_is_a_failed_check_with_its_line():
    node = FakeNode(bench="", bench_code=1,
                    bench_stderr="misc/socket.cc:484 NCCL WARN socketStartConnect: Connect "
                                 "to 10.0.0.12<43225> failed : Software caused connection "
                                 "abort\n")
    report = nccl_check.run([machine()], lambda i: node)
    result = check(report, "nccl")
    assert result.status == "fail" and "socketStartConnect" in result.detail


# --- the run: a job's nodes ---------------------------------------------------------------

def two_nodes():
    return [machine(ident="n0", private_ip="10.0.0.11"),
            machine(ident="n1", private_ip="10.0.0.12")]


def test_mpirun_runs_nccl_tests_across_the_nodes_from_node_0():
    head = FakeNode(bench=text(REAL / "allreduce_h100x16_2nodes_a3mega.txt"))
    other = FakeNode()
    nodes = two_nodes()
    report = nccl_check.run(nodes, lambda i: head if i.id == "n0" else other, job="lambda/j-1",
                            node_env=node_env)
    assert report.ok, report.checks
    mpirun = [c for c in head.ran if c.startswith("mpirun")]
    assert mpirun == ["mpirun --allow-run-as-root -np 16 -H 10.0.0.11:8,10.0.0.12:8 "
                      "-x NCCL_DEBUG=INFO /opt/nccl-tests/build/all_reduce_perf "
                      "-b 8 -e 1G -f 2 -g 1"]
    assert benchmarks(other) == []
    data = report.as_dict()
    assert data["job"] == "lambda/j-1" and [n["rank"] for n in data["nodes"]] == [0, 1]
    assert [n["address"] for n in data["nodes"]] == ["10.0.0.11", "10.0.0.12"]
    assert {c["name"] for c in data["checks"]} == {"node0:gpus", "node1:gpus", "nccl"}


def test_torchrun_runs_on_every_node_at_once_with_the_rendezvous_env():
    barrier = threading.Barrier(2, timeout=5)  # fails unless both nodes run together

    class Together(FakeNode):
        def __call__(self, command, timeout):
            if "torch.distributed.run" in command:
                barrier.wait()
            return super().__call__(command, timeout)

    head = Together(probe="probe_bare.txt", bench=text(NCCL / "torch_h100x8.txt"))
    other = Together(probe="probe_bare.txt", bench="")
    report = nccl_check.run(two_nodes(), lambda i: head if i.id == "n0" else other,
                            job="lambda/j-1", node_env=node_env)
    assert report.nccl["tool"] == "torch"
    for rank, node in enumerate((head, other)):
        command, = benchmarks(node)
        env = node_env(rank, ["10.0.0.11", "10.0.0.12"], 8)
        assert f"NODE_RANK={rank} " in command and f"--node_rank={rank} " in command
        assert f"GPUCLOUD_NODE_ADDRS={env['GPUCLOUD_NODE_ADDRS']}" in command
        assert "--nnodes=2" in command and "--master_addr=10.0.0.11" in command
    # 10 GbE between the nodes (probe_bare): the network is the limit
    assert report.nccl["expected_busbw_gbps"] == pytest.approx(10 / 8 * 0.8)


def test_nodes_that_cannot_reach_each_other_are_said_so():
    stderr = text(NCCL / "torch_unreachable_stderr.txt")
    head = FakeNode(probe="probe_bare.txt", bench="", bench_code=1, bench_stderr=stderr)
    other = FakeNode(probe="probe_bare.txt", bench="", bench_code=1, bench_stderr=stderr)
    report = nccl_check.run(two_nodes(), lambda i: head if i.id == "n0" else other,
                            job="lambda/j-1", node_env=node_env)
    nodes = check(report, "nodes")
    assert nodes.status == "fail" and "could not reach each other" in nodes.detail
    assert "No route to host" in nodes.detail and "private network" in nodes.fix
    assert not report.ok


def test_a_node_with_ib_disabled_is_named():
    head = FakeNode(bench=text(REAL / "allreduce_h100x16_2nodes_a3mega.txt"))
    other = FakeNode(probe="probe_ib_disabled.txt")
    report = nccl_check.run(two_nodes(), lambda i: head if i.id == "n0" else other,
                            job="lambda/j-1", node_env=node_env)
    assert check(report, "node1:ib-disabled").status == "fail" and not report.ok


def test_nccl_tests_built_without_mpi_is_told():
    single = text(REAL / "allreduce_gh200x2_2nodes_alps.txt")
    head = FakeNode(bench=single + single)  # one separate test per rank
    report = nccl_check.run(two_nodes(), lambda i: head if i.id == "n0" else FakeNode(),
                            job="lambda/j-1", node_env=node_env)
    assert "built without MPI" in check(report, "nccl").detail


# --- the torch fallback's own script, run under a stand-in for PyTorch -------------------

FAKE_TORCH = Path(__file__).resolve().parent / "_fake_torch"


def run_torch_script(world: int, **env: str):
    import os
    import subprocess
    import sys

    environ = {**os.environ, "PYTHONPATH": str(FAKE_TORCH), "RANK": "0", "LOCAL_RANK": "0",
               "WORLD_SIZE": str(world), **env}
    return subprocess.run([sys.executable, "-c", nccl.TORCH_SCRIPT, "8", str(1 << 20)],
                          capture_output=True, text=True, env=environ, timeout=60, check=False)


def test_the_torch_script_prints_nccl_tests_rows_with_all_reduce_busbw():
    done = run_torch_script(4)
    assert done.returncode == 0, done.stderr
    parsed = nccl.parse_allreduce(done.stdout)
    assert parsed.ranks == 4 and [r.size for r in parsed.rows] == [8 << i for i in range(18)]
    assert parsed.wrong == 0 and parsed.avg_busbw is not None
    for row in parsed.rows:
        # busbw = algbw x 2(n-1)/n = 1.5 x algbw for 4 ranks (both printed to 0.01)
        assert row.in_place.busbw == pytest.approx(row.in_place.algbw * 1.5, abs=0.02)
        assert row.count == row.size // 4 and row.out_of_place is None


def test_the_torch_script_counts_wrong_elements_when_the_sum_is_off():
    done = run_torch_script(4, FAKE_TORCH_LOSSY="1")
    parsed = nccl.parse_allreduce(done.stdout)
    assert parsed.wrong > 0
    assert nccl_check.verdict(parsed, nccl_check.Expected(1.0, "x")).status == "fail"


def test_a_benchmark_cut_off_by_the_timeout_is_reported_not_raised():
    from gpucloud.errors import WaitTimeoutError

    class Hangs(FakeNode):
        def __call__(self, command, timeout):
            if "torch.distributed.run" in command:
                assert timeout == nccl_check.BENCH_TIMEOUT
                self.ran.append(command)
                raise WaitTimeoutError(f"the command ran past {timeout:g} s")
            return super().__call__(command, timeout)

    nodes = [Hangs(probe="probe_bare.txt"), Hangs(probe="probe_bare.txt")]
    report = nccl_check.run(two_nodes(), lambda i: nodes[0] if i.id == "n0" else nodes[1],
                            job="lambda/j-1", node_env=node_env)
    failed = check(report, "nccl")
    assert failed.status == "fail" and "ran past 1200 s" in failed.detail
    command, = benchmarks(nodes[1])
    assert "--rdzv_conf=timeout=300 " in command


def test_without_ibstat_the_rate_comes_from_ibv_devinfo_width_times_lane_speed():
    found = probe("probe_roce_ibv_devinfo.txt")
    assert [(p.device, p.state, p.rate_gbps, p.link_layer) for p in found.ib_ports] == [
        ("mlx5_0", "Active", 200.0, "Ethernet"), ("mlx5_1", "PORT_DOWN", 200.0, "Ethernet")]
    gbps, basis = nccl_check.node_network(found)
    assert gbps == 25.0 and basis.startswith("1 active Ethernet port(s), 200 Gb/s")
