"""`gpucloud doctor --nccl`: an all-reduce on the machine (or across a job's
nodes), its bus bandwidth against what the interconnect should give, and the
classic network faults read from the environment and NCCL's own debug lines.

Every command goes through an executor, as doctor's checks do (``client.exec``
in the CLI, recorded outputs in the tests); this module only orders the
commands and judges their answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucloud.machine import nccl, nvidia
from gpucloud.machine.doctor import FIX_HARDWARE, Check, Executor, check_gpus, check_login

if TYPE_CHECKING:
    from gpucloud.models import ExecResult, Instance

# Per-GPU NVLink bandwidth, both directions together, GB/s, as NVIDIA's
# datasheets print it: V100 SXM2 300 (NVLink 2), A100 SXM 600 (NVLink 3), A800
# 400, H100/H200 SXM and GH200 900 (NVLink 4), H800 400, B200/B300/GB200 1800
# (NVLink 5); NVLink bridges of PCIe boards: A100 PCIe, H100 PCIe and H100 NVL
# 600, H200 NVL 900, A40 and RTX A6000 112.5.
NVLINK_GBPS: dict[str, float] = {
    "V100": 300.0, "A100-80GB": 600.0, "A100-40GB": 600.0, "A800": 400.0,
    "H100": 900.0, "H200": 900.0, "GH200": 900.0, "H800": 400.0,
    "B200": 1800.0, "B300": 1800.0, "GB200": 1800.0, "A40": 112.5, "RTX-A6000": 112.5,
}
_FORM_FACTOR_NVLINK: dict[tuple[str, str], float] = {
    ("H100", "pcie"): 600.0, ("H100", "nvl"): 600.0, ("H200", "nvl"): 900.0,
}
# PCIe x16, one direction, GB/s: Gen3 15.75, Gen4 31.5, Gen5 63 (PCI-SIG).
PCIE_GBPS = {3: 15.75, 4: 31.5, 5: 63.0}
_PCIE_GEN5 = {"H100", "H200", "H800", "GH200", "B200", "B300", "GB200", "RTX5090",
              "RTX-PRO-6000", "RTX-PRO-5000", "RTX-PRO-4500", "RTX-PRO-4000"}
_PCIE_GEN3 = {"V100", "T4", "P100"}
# NCCL moves data in chunks with flags and headers: the NCCL developers put its
# protocol overhead at about 20 % (450 GB/s of H100 NVLink line rate give about
# 370 GB/s of bus bandwidth, NVIDIA/nccl-tests#212). Expected busbw is the
# line rate of the slowest link, one direction, times this.
EFFICIENCY = 0.8
# The verdict, as a share of the expected busbw: at or above OK_FRACTION ok;
# below FAIL_FRACTION fail (a link that slow is a fault: PCIe without P2P, TCP
# where IB exists, a degraded NVLink); between the two warn.
OK_FRACTION = 0.6
FAIL_FRACTION = 0.3
# Interfaces that never carry traffic between machines.
_LOCAL_IFS = ("lo", "docker", "veth", "virbr", "br-", "cni", "flannel", "cali")

FIX_NO_BENCH = ("install nccl-tests on the machine (`git clone https://github.com/NVIDIA/"
                "nccl-tests && make -C nccl-tests`, then put build/all_reduce_perf on PATH) "
                "or PyTorch with CUDA, then rerun")
FIX_REACH = ("put the nodes in one region on one private network and allow all TCP "
             "between them (security group or firewall): torchrun needs the master port "
             "and NCCL opens its own ports; check with `ping` from node 0")


@dataclass(frozen=True)
class Expected:
    busbw: float  # GB/s
    basis: str  # how it was worked out, in words


def _words(reported: str | None) -> set[str]:
    import re

    return set(re.split(r"[^a-z0-9]+", (reported or "").lower()))


def nvlink_gbps(gpu: str | None, reported: str | None = None) -> float | None:
    for (name, word), gbps in _FORM_FACTOR_NVLINK.items():
        if name == gpu and word in _words(reported):
            return gbps
    return NVLINK_GBPS.get(gpu or "")


def pcie_gen(gpu: str | None) -> int:
    return 5 if gpu in _PCIE_GEN5 else 3 if gpu in _PCIE_GEN3 else 4


def expected_intra(gpu: str | None, reported: str | None, nvlink: bool) -> Expected:
    """Inside a node: NVLink when every GPU pair is on it, else PCIe."""
    link = nvlink_gbps(gpu, reported) if nvlink else None
    if link is not None:
        return Expected(link / 2 * EFFICIENCY,
                        f"{gpu} NVLink {link:g} GB/s both ways per GPU (NVIDIA datasheet) = "
                        f"{link / 2:g} GB/s each way x {EFFICIENCY:g} NCCL efficiency")
    gen = pcie_gen(gpu)
    what = "NVLink of unknown bandwidth, counted as PCIe" if nvlink else "PCIe only"
    return Expected(PCIE_GBPS[gen] * EFFICIENCY,
                    f"{what}: PCIe Gen{gen} x16 {PCIE_GBPS[gen]:g} GB/s each way x "
                    f"{EFFICIENCY:g} NCCL efficiency")


def _local(name: str) -> bool:
    return name.startswith(_LOCAL_IFS)


def fastest_interface(probe: nccl.Probe) -> nccl.Interface | None:
    usable = [i for i in probe.interfaces.values()
              if i.up and i.speed_mbps and not _local(i.name)]
    return max(usable, key=lambda i: i.speed_mbps or 0, default=None)


def node_network(probe: nccl.Probe) -> tuple[float, str] | None:
    """What one node can send to the others, GB/s one way: its active IB/RoCE
    ports together (ibstat's Rate is Gb/s), else its fastest Ethernet link."""
    ports = probe.active_ib
    rated = [p for p in ports if p.rate_gbps]
    if rated:
        total = sum(p.rate_gbps or 0 for p in rated)
        kinds = sorted({p.link_layer or "InfiniBand" for p in rated})
        return total / 8, (f"{len(rated)} active {'/'.join(kinds)} port(s), "
                           f"{total:g} Gb/s together (ibstat)")
    nic = fastest_interface(probe)
    if nic is not None and nic.speed_mbps:
        return nic.speed_mbps / 8000, f"{nic.name} at {nic.speed_mbps / 1000:g} Gb/s " \
                                      f"(/sys/class/net/{nic.name}/speed)"
    return None


def expected_inter(intra: Expected, probes: Sequence[nccl.Probe]) -> Expected:
    """Between nodes the slowest node's network is the limit when it is below
    the link inside a node."""
    known = [n for n in (node_network(p) for p in probes) if n is not None]
    if not known:
        return Expected(intra.busbw, intra.basis + "; the network between nodes is "
                                                   "unknown (no ibstat, no link speed)")
    gbps, basis = min(known, key=lambda n: n[0])
    if gbps * EFFICIENCY >= intra.busbw:
        return intra
    return Expected(gbps * EFFICIENCY, f"between nodes: {basis} = {gbps:g} GB/s x "
                                       f"{EFFICIENCY:g} NCCL efficiency")


# --- the diagnosis ----------------------------------------------------------------------

def _setting(name: str, probe: nccl.Probe, log: nccl.NcclLog) -> str | None:
    return log.env_set.get(name, probe.env.get(name))


def diagnose(probe: nccl.Probe, log: nccl.NcclLog, *, multi_node: bool,
             prefix: str = "") -> list[Check]:
    """The classic faults, each with its one-line fix. On one machine the
    network between nodes carries nothing but NCCL's bootstrap, so what would
    slow a multi-node run is a warning there and a failure across nodes."""
    severity = "fail" if multi_node else "warn"
    later = "" if multi_node else " (it matters once the job spans nodes)"
    found: list[Check] = []
    ib_names = ", ".join(probe.ib_devices or sorted({p.device for p in probe.active_ib}))
    ib_disable = _setting("NCCL_IB_DISABLE", probe, log)
    if probe.has_ib and ib_disable not in (None, "", "0"):
        found.append(Check(f"{prefix}ib-disabled", severity,
                           f"InfiniBand/RoCE is present ({ib_names}) but NCCL_IB_DISABLE="
                           f"{ib_disable}: NCCL sends over TCP sockets{later}",
                           "unset NCCL_IB_DISABLE"))
    elif probe.has_ib and log.ib_not_found:
        found.append(Check(f"{prefix}ib-not-found", severity,
                           f"the machine has InfiniBand/RoCE ({ib_names}) but NCCL says "
                           f"\"NET/IB : No device found\"{later}",
                           "give the process the RDMA devices: in a container "
                           "--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1, "
                           "and install libibverbs (rdma-core) in the image"))
    elif probe.has_ib and log.socket_only:
        found.append(Check(f"{prefix}tcp-fallback", severity,
                           f"InfiniBand/RoCE is present ({ib_names}) but NCCL uses "
                           f"\"network Socket\" (TCP){later}",
                           "unset NCCL_NET and NCCL_IB_HCA (or name the HCAs ibstat lists: "
                           f"NCCL_IB_HCA={ib_names.split(', ')[0]})"))
    names = sorted(probe.interfaces)
    best = fastest_interface(probe)
    suggestion = f"set NCCL_SOCKET_IFNAME={best.name}" if best else "unset NCCL_SOCKET_IFNAME"
    ifname = _setting("NCCL_SOCKET_IFNAME", probe, log)
    chosen = log.socket_ifs or (nccl.ifname_matches(ifname, names) if ifname else [])
    if ifname and names and not nccl.ifname_matches(ifname, names):
        found.append(Check(f"{prefix}socket-ifname", "fail",
                           f"NCCL_SOCKET_IFNAME={ifname} names no interface on this machine "
                           f"(it has {', '.join(names)}): NCCL cannot open its sockets",
                           suggestion + (f" (the fastest here, {best.speed_mbps} Mb/s)"
                                         if best else "")))
    elif chosen and all(_local(c) for c in chosen):
        found.append(Check(f"{prefix}socket-ifname", severity,
                           f"NCCL's sockets use {', '.join(chosen)}, which other machines "
                           f"cannot reach{later}", suggestion))
    elif chosen and best is not None and (probe.has_ib is False or log.socket_only):
        speeds = [probe.interfaces[c].speed_mbps for c in chosen if c in probe.interfaces]
        slowest = min((s for s in speeds if s), default=None)
        if slowest and best.speed_mbps and best.speed_mbps >= 2 * slowest \
                and best.name not in chosen:
            found.append(Check(f"{prefix}socket-speed", severity,
                               f"NCCL's sockets use {', '.join(chosen)} at {slowest} Mb/s while "
                               f"{best.name} runs at {best.speed_mbps} Mb/s{later}",
                               f"set NCCL_SOCKET_IFNAME={best.name}"))
    return found


# --- the run -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    rank: int
    instance: Instance
    address: str | None
    gpus: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "instance": self.instance.ref, "address": self.address,
                "gpus": self.gpus}


@dataclass(frozen=True)
class Report:
    instance: str
    job: str | None
    nodes: list[Node]
    checks: list[Check]
    nccl: dict[str, Any]

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {"instance": self.instance, "job": self.job,
                "nodes": [n.as_dict() for n in self.nodes],
                "checks": [c.as_dict() for c in self.checks], "nccl": self.nccl,
                "ok": self.ok}


def address(instance: Instance) -> str | None:
    """Where the other nodes reach this one: the private network first."""
    connection = instance.connection
    return instance.private_ip or instance.ip or (connection.host if connection and
                                                  connection.method == "ssh" else None)


# What the machines print when they cannot reach one another: the kernel's
# connect() errors, torch.distributed's rendezvous, Open MPI's launcher and ssh.
_UNREACHABLE = ("no route to host", "connection refused", "connection timed out",
                "network is unreachable", "name or service not known",
                "could not resolve hostname", "distnetworkerror", "rendezvousconnectionerror",
                "rendezvoustimeouterror", "timed out initializing process group",
                "socket timeout", "orte was unable to reliably start",
                "prte has lost communication", "permission denied (publickey")


def unreachable_line(text: str) -> str | None:
    for line in text.splitlines():
        if any(p in line.lower() for p in _UNREACHABLE):
            return line.strip()
    return None


def _first_line(result: ExecResult) -> str:
    from gpucloud.machine.ssh import message_line

    return message_line(result)


EMPTY_NCCL: dict[str, Any] = {
    "tool": None, "command": None, "ranks": None, "network": [], "rows": [],
    "avg_busbw_gbps": None, "peak_busbw_gbps": None, "expected_busbw_gbps": None,
    "expected_basis": None, "ratio": None, "ok_fraction": OK_FRACTION,
    "fail_fraction": FAIL_FRACTION,
}


def _rows(parsed: nccl.AllReduce) -> list[dict[str, Any]]:
    def measure(m: nccl.Measure | None) -> dict[str, Any] | None:
        return None if m is None else {"time_us": m.time_us, "algbw_gbps": m.algbw,
                                       "busbw_gbps": m.busbw, "wrong": m.wrong}

    return [{"size": r.size, "count": r.count, "type": r.type, "redop": r.redop,
             "out_of_place": measure(r.out_of_place), "in_place": measure(r.in_place)}
            for r in parsed.rows]


BENCH_TIMEOUT = 1200.0  # seconds: a 1 GiB sweep over slow TCP takes minutes


def bench(execute: Executor, command: str) -> ExecResult:
    """The benchmark through `execute`; a run cut off at BENCH_TIMEOUT is a failed
    run (exit 124, as timeout(1) says it) to report, not an error that loses
    the other checks."""
    from gpucloud.errors import WaitTimeoutError
    from gpucloud.models import ExecResult

    try:
        return execute(command, BENCH_TIMEOUT)
    except WaitTimeoutError as exc:
        return ExecResult(command=command, exit_code=124, stderr=f"{exc}\n")


def verdict(parsed: nccl.AllReduce, expected: Expected) -> Check:
    peak = parsed.peak_busbw or 0.0
    ratio = peak / expected.busbw if expected.busbw else 0.0
    detail = (f"peak bus bandwidth {peak:.1f} GB/s (avg {parsed.avg_busbw or 0:.1f} over every "
              f"size), {ratio:.0%} of the {expected.busbw:.0f} GB/s expected from "
              f"{expected.basis}")
    if parsed.wrong:
        return Check("nccl", "fail", f"{parsed.wrong} wrong element(s) in the all-reduce: "
                                     "data is corrupted on the way", FIX_HARDWARE)
    if ratio < FAIL_FRACTION:
        return Check("nccl", "fail", detail, "read the network findings above; with none, "
                     "check `nvidia-smi topo -m` and `nvidia-smi nvlink -s` for links down, "
                     "and ask the provider")
    if ratio < OK_FRACTION:
        return Check("nccl", "warn", detail, "rerun with larger sizes; if it stays low, "
                     "check the links (`nvidia-smi nvlink -s`, ibstat) and NCCL_ALGO/NCCL_PROTO "
                     "overrides in the environment")
    return Check("nccl", "ok", detail)


Rendezvous = Callable[[int, Sequence[str], int], dict[str, str]]


def run(instances: Sequence[Instance], execute_on: Callable[[Instance], Executor], *,
        job: str | None = None, node_env: Rendezvous | None = None,
        on_check: Callable[[Check], None] | None = None, image: str | None = None) -> Report:
    """The NCCL checks on one machine, or on every node of a job (rank order).
    `node_env` gives each node's rendezvous env (gpucloud.jobs.multinode.node_env,
    passed in: the machine layer does not import the jobs layer). `image`: the
    all-reduce is torch.distributed's inside that image (the job's), run with
    docker on each machine, instead of nccl-tests or the machine's python3."""
    checks: list[Check] = []
    multi = len(instances) > 1
    info = dict(EMPTY_NCCL)

    def add(check: Check) -> None:
        checks.append(check)
        if on_check is not None:
            on_check(check)

    def named(check: Check, rank: int) -> Check:
        return Check(f"node{rank}:{check.name}", check.status, check.detail, check.fix) \
            if multi else check

    executors = [execute_on(i) for i in instances]
    nodes: list[Node] = []
    listed_names: list[str] = []
    for rank, (instance, execute) in enumerate(zip(instances, executors)):
        first = execute(nvidia.LIST_COMMAND, 60)
        login = check_login(instance, first, execute)
        if login is not None:
            add(named(login, rank))
            return Report(instances[0].ref, job, nodes, checks, info)
        gpus, listed = check_gpus(instance, first)
        add(named(gpus, rank))
        nodes.append(Node(rank, instance, address(instance), len(listed)))
        listed_names.append(listed[0].name if listed else "")
    if any(n.gpus == 0 for n in nodes):
        return Report(instances[0].ref, job, nodes, checks, info)
    per_node = min(n.gpus for n in nodes)
    probes = [nccl.parse_probe(e(nccl.PROBE_COMMAND, 60).stdout) for e in executors]
    nvlink = False
    if per_node > 1:
        topo = executors[0](nvidia.TOPO_COMMAND, 60)
        links = nvidia.parse_topology(topo.stdout) if topo.ok else {}
        nvlink = bool(links) and all(v.startswith("NV") for v in links.values())
    intra = expected_intra(instances[0].gpu, listed_names[0], nvlink)
    expected = expected_inter(intra, probes) if multi else intra
    info.update(expected_busbw_gbps=round(expected.busbw, 2), expected_basis=expected.basis)

    if not multi and per_node == 1:
        for finding in diagnose(probes[0], nccl.parse_nccl_log(""), multi_node=False):
            add(finding)
        add(Check("nccl", "ok", "one GPU: nothing to all-reduce with (run it on a "
                                "multi-GPU machine or a multi-node job)"))
        return Report(instances[0].ref, job, nodes, checks, info)

    head = probes[0]
    binary = head.tools.get("all_reduce_perf")
    reachable = not multi or all(n.address for n in nodes)

    def no_bench(detail: str, fix: str) -> Report:
        for rank, probe in enumerate(probes):
            for finding in diagnose(probe, nccl.parse_nccl_log(""), multi_node=multi):
                add(named(finding, rank))
        add(Check("nccl", "warn", detail, fix))
        return Report(instances[0].ref, job, nodes, checks, info)

    def torch_on_every_node() -> tuple[str, list[ExecResult | None]]:
        addrs = [n.address or "" for n in nodes]
        commands = [nccl.torch_command(per_node, node_env(n.rank, addrs, per_node)
                                       if multi and node_env else None, image,
                                       probes[n.rank].has_ib) for n in nodes]
        # every node blocks until all have joined the rendezvous: run them at once
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            return commands[0], list(pool.map(lambda ec: bench(*ec), zip(executors, commands)))

    outputs: list[ExecResult | None]
    if image is not None:
        if not reachable:
            return no_bench(f"no all-reduce run in {image}: no node address to rendezvous "
                            "at", FIX_NO_BENCH)
        if not all("docker" in p.tools for p in probes):
            return no_bench(f"no all-reduce run in {image}: docker is not on the machine",
                            "install docker with the NVIDIA Container Toolkit, or leave out "
                            "--image to use nccl-tests or the machine's python3")
        tool = "torch"
        command, outputs = torch_on_every_node()
    elif not multi and binary:
        tool, command = "nccl-tests", nccl.nccl_tests_command(binary, per_node)
        outputs = [bench(executors[0], command)]
    elif multi and binary and "mpirun" in head.tools and reachable:
        tool = "nccl-tests"
        command = nccl.mpirun_command(binary, [n.address or "" for n in nodes], per_node)
        outputs = [bench(executors[0], command)] + [None] * (len(nodes) - 1)
    elif all("python3" in p.tools for p in probes) and reachable:
        tool = "torch"
        command, outputs = torch_on_every_node()
    else:
        missing = "no node address to rendezvous at" if not reachable \
            else "neither nccl-tests (all_reduce_perf) nor python3"
        return no_bench(f"no all-reduce run: {missing} on the machine", FIX_NO_BENCH)

    info.update(tool=tool, command=command)
    texts = [(o.stdout + "\n" + o.stderr) if o is not None else "" for o in outputs]
    for rank, probe in enumerate(probes):
        # under mpirun node 0 prints every rank's lines: each node is judged on them
        log = nccl.parse_nccl_log(texts[rank] or texts[0])
        for finding in diagnose(probe, log, multi_node=multi):
            add(named(finding, rank))
    parsed = nccl.parse_allreduce(outputs[0].stdout if outputs[0] is not None else "")
    head_log = nccl.parse_nccl_log(texts[0])
    info.update(ranks=parsed.ranks, network=head_log.networks, rows=_rows(parsed),
                avg_busbw_gbps=parsed.avg_busbw, peak_busbw_gbps=parsed.peak_busbw)
    if not parsed.rows:
        blocked = next((line for line in (unreachable_line(t) for t in texts) if line), None)
        if multi and blocked:
            add(Check("nodes", "fail", f"the nodes could not reach each other: {blocked}",
                      FIX_REACH))
        elif tool == "torch" and outputs[0] is not None and (
                outputs[0].exit_code == 3 or "torch is not installed" in texts[0]):
            add(Check("nccl", "warn", "PyTorch is not installed and nccl-tests is missing: "
                                      "no all-reduce run", FIX_NO_BENCH))
        else:
            failed = outputs[0]
            add(Check("nccl", "fail", "the all-reduce failed: " + (
                _first_line(failed) if failed is not None else "no output"),
                "read NCCL's own lines (`NCCL_DEBUG=INFO`) in --json's nccl.command run by "
                "hand; the findings above name the usual causes"))
        return Report(instances[0].ref, job, nodes, checks, info)
    if multi and tool == "nccl-tests" and parsed.headers > 1:
        add(Check("nccl", "fail", "mpirun started one separate test per rank: all_reduce_perf "
                                  "was built without MPI", "rebuild nccl-tests with "
                                  "`make MPI=1 MPI_HOME=<your MPI>` on every node"))
        return Report(instances[0].ref, job, nodes, checks, info)
    result = verdict(parsed, expected)
    info.update(ratio=round((parsed.peak_busbw or 0) / expected.busbw, 3)
                if expected.busbw else None)
    add(result)
    return Report(instances[0].ref, job, nodes, checks, info)


__all__ = ["EFFICIENCY", "EMPTY_NCCL", "Expected", "FAIL_FRACTION", "NVLINK_GBPS", "Node",
           "OK_FRACTION", "PCIE_GBPS", "Report", "diagnose", "expected_inter",
           "expected_intra", "node_network", "run", "unreachable_line", "verdict"]
