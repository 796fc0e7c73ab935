"""`gpucloud doctor`: the checklist to run on a machine before a long run.

Each check runs one command through an executor (``client.exec`` in the CLI, a
fake over recorded outputs in the tests) and judges its output: ok, warn or
fail, with a detail and the fix. Pure functions over ExecResult; nothing here
does I/O of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from gpucloud.machine import nvidia
from gpucloud.catalog.gpus import datasheet_tflops, reported_matches

if TYPE_CHECKING:
    from gpucloud.models import ExecResult, Instance

Executor = Callable[[str, float], "ExecResult"]

MIN_FREE_DISK_GB = 50  # below: warn (checkpoints and datasets fill a disk fast)
CRITICAL_FREE_DISK_GB = 2  # below: fail (a run cannot even write its first checkpoint)
BURN_OK = 0.5  # share of the datasheet peak; dense bf16 matmul usually reaches 0.6-0.8
BURN_FAIL = 0.25
# The CUDA a GPU generation needs at least (the first release with its
# architecture: sm_80 11.0, sm_86 11.1, sm_89 / sm_90 11.8, Blackwell 12.8).
MIN_CUDA: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("H100", "H200", "H800", "GH200", "L40S", "L40", "L4", "RTX4090",
                     "RTX6000-ADA", "RTX4000-ADA", "RTX2000-ADA", "RTX4070", "RTX4060"),
                    (11, 8)),
    **dict.fromkeys(("B200", "B300", "GB200", "RTX5090", "RTX-PRO-6000", "RTX-PRO-5000",
                     "RTX-PRO-4500", "RTX-PRO-4000"), (12, 8)),
    **dict.fromkeys(("A100-80GB", "A100-40GB", "A800", "A30"), (11, 0)),
    **dict.fromkeys(("A10", "A10G", "A40", "RTX-A6000", "RTX-A5000", "RTX-A4500",
                     "RTX-A4000", "RTX-A2000", "RTX3090", "RTX3080", "RTX3070",
                     "RTX3060"), (11, 1)),
}

FIX_NO_GPU = ("check the container runtime and the driver version first (nvidia-smi "
              "printing \"No devices were found\" or \"Failed to initialize NVML\" means "
              "the driver sees no GPU); confirm the NVIDIA driver is installed and the "
              "container runtime has NVIDIA support enabled")
FIX_CUDA = ("match the image's CUDA base version to the machine's driver, or update the "
            "driver; keep one shared base image version (a CUDA failure is usually a "
            "driver and image mismatch); check what your framework was built for with "
            "`python -c \"import torch; print(torch.version.cuda)\"`")
FIX_RUNTIME = ("the container runtime does not pass the GPUs in: install the NVIDIA "
               "Container Toolkit and enable it for Docker (`nvidia-ctk runtime configure "
               "--runtime=docker`, then restart docker); \"cuda available: False\" means "
               "a PyTorch/driver mismatch or a runtime without GPU support")
FIX_HARDWARE = ("the machine is faulty: delete it and take another (or ask the provider "
                "for a replacement); do not start a long run on it. For the runs you do "
                "start, set automatic restart and checkpoint recovery: a task that dies "
                "mid-way is usually a node failure, visible in the system events")
FIX_TOPOLOGY = ("these GPUs talk over PCIe, not NVLink/NVSwitch: multi-GPU training will "
                "be slowed by inter-GPU communication; for large multi-GPU jobs pick an "
                "SXM/NVLink instance type, and confirm NVLink or RDMA bandwidth before "
                "buying")
FIX_DISK = ("free space or attach a larger disk: cache the dataset on local SSD and keep "
            "images and datasets small")
# The command that tells ssh's own exit 255 from the remote command's: a
# shell builtin that cannot fail once logged in.
LOGIN_PROBE = "true"
FIX_TORCH = ("install PyTorch with CUDA support on the machine (or use an image that has "
             "it), then rerun; or pass --skip-burn")


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "warn" or "fail"
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fail(name: str, detail: str, fix: str | None) -> Check:
    return Check(name, "fail", detail, fix)


def _first_line(result: ExecResult) -> str:
    from gpucloud.machine.ssh import message_line

    return message_line(result)


def check_login(instance: Instance, result: ExecResult,
                execute: Executor | None = None) -> Check | None:
    """A failed check when ssh itself failed on the first command; None when
    the machine answered. Exit 255 is ssh's own failure (no connection, the
    login refused) but also nvidia-smi's ("Failed to initialize NVML: No
    supported GPUs were found"): with `execute`, a login probe (`true`) tells
    them apart, and only a probe that fails too is a login failure."""
    from gpucloud.machine.ssh import LOGIN_HINT, SSH_FAILED

    connection = instance.connection
    if connection is None or connection.method != "ssh" or result.exit_code != SSH_FAILED:
        return None
    if execute is not None:
        probe = execute(LOGIN_PROBE, 60)
        if probe.exit_code != SSH_FAILED:
            return None  # logged in: the 255 was the command's own
        result = probe
    return _fail("login", f"ssh could not connect or log in: {_first_line(result)}",
                 LOGIN_HINT)


def check_gpus(instance: Instance, result: ExecResult) -> tuple[Check, list[nvidia.ListedGPU]]:
    """`nvidia-smi -L` against the model and count paid for."""
    if result.exit_code == 127:
        return _fail("gpus", "nvidia-smi not found: no NVIDIA driver on this machine",
                     FIX_NO_GPU), []
    listed = nvidia.parse_list(result.stdout)
    if not result.ok or not listed:
        return _fail("gpus", f"no GPU visible: {_first_line(result)}", FIX_NO_GPU), listed
    names = sorted({g.name for g in listed})
    seen = f"{len(listed)}x {', '.join(names)}"
    paid = instance.gpu
    verdicts = {n: reported_matches(paid, n) for n in names} if paid else {}
    wrong = [n for n, same in verdicts.items() if same is False]
    unknown = [n for n, same in verdicts.items() if same is None]
    if wrong:
        return _fail("gpus", f"{seen} visible, but the machine was sold as "
                             f"{instance.gpu_count}x {instance.gpu}",
                     "ask the provider why the model differs; delete the machine if it is "
                     "not what you pay for"), listed
    if instance.gpu_count is not None and len(listed) < instance.gpu_count:
        return _fail("gpus", f"only {len(listed)} of {instance.gpu_count} GPUs visible "
                             f"({seen}); you pay for {instance.gpu_count}",
                     FIX_NO_GPU + "; if one stays missing the hardware is at fault: "
                     + FIX_HARDWARE), listed
    if unknown:
        return Check("gpus", "warn", f"{seen}: {', '.join(repr(n) for n in unknown)} is not "
                                     f"in gpucloud's GPU catalogue, so it was not checked "
                                     f"against the {paid} paid for",
                     "compare the name with what you ordered yourself"), listed
    return Check("gpus", "ok", f"{seen} (paid for {instance.gpu_count or '?'}x "
                                f"{instance.gpu or '?'})"), listed


def check_driver(instance: Instance, result: ExecResult,
                 query: ExecResult | None = None) -> Check:
    """Driver version from `--query-gpu=driver_version` when it answers (`query`),
    else from the `nvidia-smi` header (`result`), which gives the CUDA version
    too; every header form from driver 331 to 610 ("KMD Version", "CUDA UMD
    Version") is read."""
    versions = nvidia.parse_header(result.stdout) if result.ok else nvidia.Versions(None, None)
    queried = nvidia.parse_driver_query(query.stdout) if query is not None and query.ok \
        else None
    if queried is not None:
        versions = nvidia.Versions(queried, versions.cuda)
    if versions.driver is None:
        failed = result if not result.ok or query is None else query
        return _fail("driver", f"nvidia-smi failed: {_first_line(failed)}", FIX_CUDA)
    detail = f"driver {versions.driver}, CUDA {versions.cuda or 'unknown'}"
    need = MIN_CUDA.get(instance.gpu or "")
    if versions.cuda is None:
        return Check("driver", "warn", detail + " (no CUDA version in the header)", FIX_CUDA)
    if need is not None and nvidia.version_tuple(versions.cuda)[:2] < need:
        return Check("driver", "warn", f"{detail}: {instance.gpu} needs CUDA >= "
                                       f"{need[0]}.{need[1]}", FIX_CUDA)
    return Check("driver", "ok", detail)


def check_container(result: ExecResult, visible: int) -> Check:
    """`docker run --gpus all ... nvidia-smi -L`: the runtime passes the GPUs in."""
    if result.exit_code == 127 and "docker" in (result.stderr + result.stdout):
        return Check("container", "warn", "docker not found: container runtime not checked",
                     "nothing to do if you run without containers (on RunPod, Vast.ai and "
                     "Kubernetes you are already inside one); otherwise install Docker and "
                     "the NVIDIA Container Toolkit")
    text = result.stderr + result.stdout
    if "cannot connect to the docker daemon" in text.lower():
        return Check("container", "warn", "docker is installed but its daemon is not "
                                          "running: container runtime not checked",
                     "start it (`sudo systemctl start docker`) if you run containers; "
                     "nothing to do otherwise")
    if "permission denied" in text.lower() and "docker" in text.lower():
        return Check("container", "warn", "cannot reach the docker daemon: permission "
                                          "denied", "add your user to the docker group "
                                          "(`sudo usermod -aG docker $USER`, then log in "
                                          "again), or run as root")
    inside = nvidia.parse_list(result.stdout)
    if not result.ok or not inside:
        return _fail("container", f"a container sees no GPU: {_first_line(result)}",
                     FIX_RUNTIME)
    if len(inside) < visible:
        return _fail("container", f"a container sees {len(inside)} of {visible} GPUs",
                     FIX_RUNTIME)
    return Check("container", "ok", f"docker --gpus all sees {len(inside)} GPU(s)")


def check_ecc(result: ExecResult) -> Check:
    """Volatile (since the last driver load) ECC error counts per GPU."""
    if not result.ok:
        return Check("ecc", "warn", f"could not read ECC counters: {_first_line(result)}",
                     None)
    try:
        rows = nvidia.parse_query(result.stdout, nvidia.ECC_FIELDS)
    except ValueError as exc:
        return Check("ecc", "warn", f"unreadable ECC counters: {exc}", None)
    bad = [r for r in rows if (nvidia.number(r[nvidia.ECC_FIELDS[3]]) or 0) > 0]
    if bad:
        return _fail("ecc", "uncorrected ECC errors: " + ", ".join(
            f"GPU {r['index']}: {r[nvidia.ECC_FIELDS[3]]}" for r in bad), FIX_HARDWARE)
    if rows and all(r["ecc.mode.current"] is None for r in rows):
        return Check("ecc", "ok", "ECC not supported by these GPUs")
    off = [r["index"] for r in rows if r["ecc.mode.current"] == "Disabled"]
    if off:
        return Check("ecc", "warn", f"ECC disabled on GPU {', '.join(map(str, off))}",
                     "ask the provider to enable ECC (`nvidia-smi -e 1` as root, then a "
                     "reboot)")
    corrected = sum(nvidia.number(r[nvidia.ECC_FIELDS[2]]) or 0 for r in rows)
    return Check("ecc", "ok", f"no uncorrected ECC errors on {len(rows)} GPU(s)"
                 + (f" ({corrected:g} corrected)" if corrected else ""))


def check_xid(result: ExecResult) -> Check:
    """Xid lines in the kernel log: the driver's reports of GPU errors."""
    text = result.stdout + result.stderr
    if not result.ok:
        reason = ("reading the kernel log needs root here"
                  if "not permitted" in text.lower() or "permission" in text.lower()
                  else f"dmesg failed: {_first_line(result)}")
        return Check("xid", "warn", reason + ": Xid errors not checked",
                     "run `sudo dmesg | grep -i xid` on the machine, or run doctor as root")
    xids = nvidia.parse_xids(result.stdout)
    faulty = [x for x in xids if x.hardware]
    drops = nvidia.parse_bus_drops(result.stdout)
    if drops and not faulty:  # no Xid says it, but the driver does: a hardware failure
        where = sorted({d.pci for d in drops if d.pci})
        return _fail("xid", f"a GPU has fallen off the bus"
                            f"{' (' + ', '.join(where) + ')' if where else ''}: "
                            f"\"NVRM: {drops[-1].text}\"", FIX_HARDWARE)
    if not xids:
        return Check("xid", "ok", "no Xid errors in the kernel log")
    codes = sorted({x.code for x in xids})
    where = sorted({x.pci for x in xids})
    shown = faulty[-1] if faulty else xids[-1]
    detail = f"Xid {', '.join(map(str, codes))} on {', '.join(where)}: {shown.text}"
    if faulty:
        return _fail("xid", detail, FIX_HARDWARE)
    return Check("xid", "warn", detail, "these Xids are usually raised by a program (bad "
                 "memory access, a killed job): check your own code's logs; if they "
                 "recur with no job running, " + FIX_HARDWARE)


def check_topology(result: ExecResult) -> Check:
    """On multi-GPU machines every pair should be linked by NVLink (NV#)."""
    if not result.ok:
        return Check("topology", "warn", f"nvidia-smi topo failed: {_first_line(result)}",
                     None)
    links = nvidia.parse_topology(result.stdout)
    if not links:
        return Check("topology", "warn", "no GPU matrix in `nvidia-smi topo -m`", None)
    slow = {pair: link for pair, link in links.items() if not link.startswith("NV")}
    kinds = sorted(set(links.values()))
    if not slow:
        return Check("topology", "ok", f"every GPU pair on NVLink ({', '.join(kinds)})")
    shown = ", ".join(f"GPU{a}-GPU{b} {link}" for (a, b), link in sorted(slow.items())[:4])
    more = f" and {len(slow) - 4} more" if len(slow) > 4 else ""
    return Check("topology", "warn", f"{len(slow)} of {len(links)} GPU pairs not on "
                                     f"NVLink: {shown}{more}", FIX_TOPOLOGY)


def check_disk(result: ExecResult) -> Check:
    found = nvidia.parse_df(result.stdout) if result.ok else None
    if found is None:
        return Check("disk", "warn", f"could not read free disk: {_first_line(result)}", None)
    mount, free = found
    gb = free / 1e9
    detail = f"{gb:.0f} GB free on {mount}"
    if gb < CRITICAL_FREE_DISK_GB:
        return _fail("disk", detail, FIX_DISK)
    if gb < MIN_FREE_DISK_GB:
        return Check("disk", "warn", f"{detail} (under {MIN_FREE_DISK_GB} GB)", FIX_DISK)
    return Check("disk", "ok", detail)


def check_burn(instance: Instance, result: ExecResult, reported: str | None) -> Check:
    """The matmul burn's TFLOPS per GPU against the datasheet's dense BF16 peak."""
    if result.exit_code == 3 or "torch is not installed" in result.stderr:
        return Check("burn", "warn", "PyTorch is not installed: no burn", FIX_TORCH)
    if result.exit_code == 127:
        return Check("burn", "warn", "python3 not found: no burn", FIX_TORCH)
    achieved = nvidia.parse_burn(result.stdout)
    if not result.ok or not achieved:
        return _fail("burn", f"the matmul burn failed: {_first_line(result)}", FIX_CUDA)
    low, high = min(achieved.values()), max(achieved.values())
    figures = f"{low:.0f}-{high:.0f} TFLOPS bf16 per GPU" if low != high else \
        f"{low:.0f} TFLOPS bf16 per GPU"
    peak = datasheet_tflops(instance.gpu or "", reported)
    if peak is None:
        return Check("burn", "warn", f"{figures}; no datasheet figure for "
                                     f"{instance.gpu or 'this GPU'}, so no ratio", None)
    worst = min(achieved, key=lambda i: achieved[i])
    ratio = achieved[worst] / peak
    detail = f"{figures}, {ratio:.0%} of the datasheet's {peak:g} (worst: GPU {worst})"
    if ratio < BURN_FAIL:
        return _fail("burn", detail, "a GPU this far below its datasheet is throttled or "
                     "faulty (check `nvidia-smi -q -d TEMPERATURE,POWER,PERFORMANCE`); "
                     + FIX_HARDWARE)
    if ratio < BURN_OK:
        return Check("burn", "warn", detail, "check clocks, temperature and power limits "
                     "(`nvidia-smi -q -d TEMPERATURE,POWER,PERFORMANCE`) and whether "
                     "another process shares the GPU (sharing makes speed vary)")
    return Check("burn", "ok", detail)


@dataclass(frozen=True)
class Report:
    instance: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {"instance": self.instance, "checks": [c.as_dict() for c in self.checks],
                "ok": self.ok}


def run(instance: Instance, execute: Executor, *, burn_seconds: float | None = 30.0,
        on_check: Callable[[Check], None] | None = None) -> Report:
    """Every check in order; `burn_seconds=None` skips the burn. `on_check` sees
    each result as it comes (the burn takes a while)."""
    checks: list[Check] = []

    def add(check: Check) -> None:
        checks.append(check)
        if on_check is not None:
            on_check(check)

    first = execute(nvidia.LIST_COMMAND, 60)
    login = check_login(instance, first, execute)
    if login is not None:  # nothing else can run: one failed check, not ten
        add(login)
        return Report(instance.ref, checks)
    gpus, listed = check_gpus(instance, first)
    add(gpus)
    query = execute(nvidia.DRIVER_QUERY_COMMAND, 60)
    add(check_driver(instance, execute(nvidia.HEADER_COMMAND, 60), query))
    if listed:
        add(check_container(execute(nvidia.container_command(), 600), len(listed)))
        add(check_ecc(execute(nvidia.query_command(nvidia.ECC_FIELDS), 60)))
    add(check_xid(execute(nvidia.KERNEL_LOG_COMMAND, 60)))
    if len(listed) > 1:
        add(check_topology(execute(nvidia.TOPO_COMMAND, 60)))
    add(check_disk(execute(nvidia.DISK_COMMAND, 60)))
    if burn_seconds is not None and listed:
        result = execute(nvidia.burn_command(burn_seconds), burn_seconds + 300)
        add(check_burn(instance, result, listed[0].name))
    return Report(instance.ref, checks)
