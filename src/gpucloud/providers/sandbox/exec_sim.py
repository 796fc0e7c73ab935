"""The sandbox's exec API: a simulated Linux box with the machine's GPUs.

    POST /v1/instances/{id}/exec  body {command: str, timeout?: seconds}
         -> 200 {exit_code, stdout, stderr, simulated: true}
         404 no such machine, 409 ``conflict`` unless it is running,
         422 ``invalid_request`` for a malformed body.

Nothing runs: each command is answered in the format the real tool prints
(nvidia-smi -L / --query-gpu / topo -m / the default table, dmesg, df, docker
run --gpus all ... nvidia-smi, gpucloud's matmul burn, echo, hostname,
uname). Values vary with time, drawn from a generator seeded by the machine
and the clock, so a test with a fixed clock sees fixed values. Everything else
exits 127 "command not found"; pipes and command lists are refused (exit 2),
as the simulation runs one simple command. The GPUs are healthy: no Xid, no
ECC error, all present; every figure is made up.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Callable
from typing import Any

import httpx

from gpucloud.catalog.gpus import datasheet_tflops, gpu_info
from gpucloud.machine.nvidia import BURN_MARKER
from gpucloud.providers.sandbox._machines import Machines
from gpucloud.providers.sandbox._wire import US, ApiError, json_body

DRIVER, CUDA = "550.54.15", "12.4"
# name as the driver reports it, memory.total in MiB, power limit in W, NVLinks
# per pair (0: PCIe only), ECC supported
_BOARDS: dict[str, tuple[str, int, int, int, bool]] = {
    "H100": ("NVIDIA H100 80GB HBM3", 81559, 700, 18, True),
    "A100-80GB": ("NVIDIA A100-SXM4-80GB", 81920, 400, 12, True),
    "L40S": ("NVIDIA L40S", 46068, 350, 0, True),
    "RTX4090": ("NVIDIA GeForce RTX 4090", 24564, 450, 0, False),
}
_UNITS = {"utilization.gpu": "%", "utilization.memory": "%", "memory.used": "MiB",
          "memory.total": "MiB", "memory.free": "MiB", "temperature.gpu": "",
          "power.draw": "W", "power.limit": "W"}
_FIELDS = ("index", "name", "uuid", "pci.bus_id", "driver_version", "utilization.gpu",
           "utilization.memory", "memory.used", "memory.total", "memory.free",
           "temperature.gpu", "power.draw", "power.limit", "ecc.mode.current",
           "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total")
_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


def exec_route(cloud: Machines, request: httpx.Request, instance_id: str) -> tuple[int, Any]:
    """The endpoint; `cloud` is the SandboxCloud."""
    if request.method != "POST":
        raise ApiError(405, "method_not_allowed", f"{request.method} not allowed on "
                                                  f"{request.url.path}")
    command = _validate(json_body(request))
    now = cloud._now()
    with cloud._read() as db:
        row = cloud._row(db, instance_id, now)
        status = cloud._status(row, now)
    if status != "running":
        raise ApiError(409, "conflict", f"instance {instance_id} is {status}: only a running "
                                        "machine runs commands")
    box = Box(row["id"], row["gpu"], int(row["gpu_count"]), int(row["disk_gb"] or 100),
              now // US)
    code, out, err = box.run(command)
    return 200, {"exit_code": code, "stdout": out, "stderr": err, "simulated": True}


def _validate(body: Any) -> str:
    def bad(message: str) -> ApiError:
        return ApiError(422, "invalid_request", message)

    if not isinstance(body, dict):
        raise bad('the body must be {"command": "...", "timeout": seconds}')
    extra = sorted(set(body) - {"command", "timeout"})
    if extra:
        raise bad(f"unknown field(s): {', '.join(extra)}")
    command = body.get("command")
    if not isinstance(command, str) or not command.strip() or len(command) > 65536:
        raise bad("command is required: a non-empty string of at most 65536 characters")
    timeout = body.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(
            timeout, (int, float)) or not 0 < timeout <= 86400):
        raise bad("timeout must be a number of seconds between 0 and 86400")
    return command


class Box:
    """One simulated machine at one moment (`now`, whole seconds)."""

    def __init__(self, instance_id: str, gpu: str, count: int, disk_gb: int, now: int) -> None:
        info = gpu_info(gpu)
        memory = (info.memory_gb if info else 24) * 1024
        self.id, self.gpu, self.count, self.disk_gb, self.now = (
            instance_id, gpu, count, disk_gb, now)
        self.name, self.memory, self.power_limit, self.nvlinks, self.ecc = _BOARDS.get(
            gpu, (f"NVIDIA {gpu}", memory, 300, 0, True))
        # A training job's rhythm: most minutes busy, some starved of data.
        self.busy = random.Random(f"{instance_id}:{now // 120}").random() > 0.2
        self.rng = random.Random(f"{instance_id}:{now}")

    def run(self, command: str) -> tuple[int, str, str]:
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            return 2, "", f"bash: syntax error: {exc}\n"
        if any(t in ("|", "||", "&&", ";", ">", "<", "&") for t in argv):
            return 2, "", ("sandbox: the simulated machine runs one simple command "
                           "(no pipes, lists or redirections)\n")
        name, args = argv[0], argv[1:]
        if name == "nvidia-smi":
            return self.nvidia_smi(args)
        if name == "docker":
            return self.docker(args)
        if name in ("python3", "python") and args[:1] == ["-c"] and len(args) >= 2 \
                and BURN_MARKER in args[1]:
            return self.burn(args[2:])
        simple: dict[str, Callable[[], str]] = {"dmesg": self.dmesg, "df": self.df,
                  "echo": lambda: " ".join(args) + "\n", "true": lambda: "",
                  "hostname": lambda: self.id + "\n",
                  "uname": lambda: "Linux\n" if not args else
                  f"Linux {self.id} 5.15.0-105-generic #115-Ubuntu SMP x86_64 GNU/Linux\n"}
        if name in simple:
            return 0, simple[name](), ""
        return 127, "", f"bash: line 1: {name}: command not found\n"

    # -- nvidia-smi ---------------------------------------------------------------

    def uuid(self, i: int) -> str:
        h = random.Random(f"{self.id}:uuid:{i}").getrandbits(128)
        x = f"{h:032x}"
        return f"GPU-{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"

    def gpu_values(self, i: int) -> dict[str, str]:
        r = self.rng
        util = r.randint(88, 100) if self.busy else r.randint(3, 25)
        used = int(self.memory * (r.uniform(0.78, 0.9) if self.busy else r.uniform(0.35, 0.45)))
        power = self.power_limit * (r.uniform(0.75, 0.95) if self.busy else r.uniform(0.15, 0.3))
        return {
            "index": str(i), "name": self.name, "uuid": self.uuid(i),
            "pci.bus_id": f"00000000:{_BUSES[i % 8]}:00.0", "driver_version": DRIVER,
            "utilization.gpu": str(util), "utilization.memory": str(max(0, util - 30)),
            "memory.used": str(used), "memory.total": str(self.memory),
            "memory.free": str(self.memory - used),
            "temperature.gpu": str(r.randint(58, 71) if self.busy else r.randint(34, 42)),
            "power.draw": f"{power:.2f}", "power.limit": f"{self.power_limit:.2f}",
            "ecc.mode.current": "Enabled" if self.ecc else "[N/A]",
            "ecc.errors.corrected.volatile.total": "0" if self.ecc else "[N/A]",
            "ecc.errors.uncorrected.volatile.total": "0" if self.ecc else "[N/A]",
        }

    def nvidia_smi(self, args: list[str]) -> tuple[int, str, str]:
        if args == ["-L"]:
            return 0, "".join(f"GPU {i}: {self.name} (UUID: {self.uuid(i)})\n"
                              for i in range(self.count)), ""
        if args == ["topo", "-m"]:
            return 0, self.topology(), ""
        if not args:
            return 0, self.table(), ""
        query = [a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")]
        formats = [a.split("=", 1)[1] for a in args if a.startswith("--format=")]
        if len(query) != 1 or len(formats) != 1 or len(args) != 2:
            return 2, "", ("Invalid combination of input arguments. Please run "
                           "'nvidia-smi -h' for help.\n")
        fields = [f.strip() for f in query[0].split(",")]
        unknown = [f for f in fields if f not in _FIELDS]
        if unknown:
            return 2, "", f'Field "{unknown[0]}" is not a valid field to query.\n'
        options = set(formats[0].split(","))
        lines = []
        if "noheader" not in options:
            lines.append(", ".join(f + ("" if "nounits" in options or not _UNITS.get(f)
                                        else f" [{_UNITS[f]}]") for f in fields))
        for i in range(self.count):
            values = self.gpu_values(i)
            lines.append(", ".join(
                values[f] + ("" if "nounits" in options or not _UNITS.get(f)
                             or values[f].startswith("[") else f" {_UNITS[f]}")
                for f in fields))
        return 0, "\n".join(lines) + "\n", ""

    def table(self) -> str:
        bar = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
        head = (f"NVIDIA-SMI {DRIVER}              Driver Version: {DRIVER}      "
                f"CUDA Version: {CUDA}")
        lines = ["+" + "-" * 89 + "+", f"| {head:<87} |",
                 "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "|",
                 "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | "
                 "Volatile Uncorr. ECC |",
                 "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | "
                 "GPU-Util  Compute M. |",
                 "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
        for i in range(self.count):
            v = self.gpu_values(i)
            ecc = "0" if self.ecc else "N/A"
            lines.append(f"|   {i}  {self.name[:31]:<31}On  |   {v['pci.bus_id']} Off |"
                         f"{ecc:>21} |")
            power = f"{float(v['power.draw']):.0f}W / {self.power_limit:4d}W"
            memory = f"{v['memory.used']}MiB / {v['memory.total']}MiB"
            lines.append(f"| N/A   {v['temperature.gpu']}C    P0 {power:>26} |"
                         f"{memory:>23} |{v['utilization.gpu'] + '%':>8}      Default |")
            lines.append(bar)
        return "(simulated by the gpucloud sandbox)\n" + "\n".join(lines) + "\n"

    def topology(self) -> str:
        n = self.count
        lines = ["\t" + "\t".join(f"GPU{i}" for i in range(n))
                 + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
        for i in range(n):
            cells = ["X " if i == j else f"NV{self.nvlinks}" if self.nvlinks
                     else "NODE" if (i < n / 2) == (j < n / 2) else "SYS" for j in range(n)]
            lines.append(f"GPU{i}\t " + "\t".join(cells) + f"\t0-63\t{0 if i < n / 2 else 1}"
                         "\t\tN/A")
        lines += ["", "Legend:", "", "  X    = Self",
                  "  SYS  = Connection traversing PCIe as well as the SMP interconnect "
                  "between NUMA nodes (e.g., QPI/UPI)",
                  "  NODE = Connection traversing PCIe as well as the interconnect between "
                  "PCIe Host Bridges within a NUMA node",
                  "  NV#  = Connection traversing a bonded set of # NVLinks", ""]
        return "\n".join(lines)

    # -- the rest of the box ------------------------------------------------------

    def dmesg(self) -> str:
        return ("[    0.000000] Linux version 5.15.0-105-generic (simulated by the gpucloud "
                "sandbox)\n"
                f"[    6.112233] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {DRIVER}\n"
                "[   12.884410] EXT4-fs (vda1): re-mounted. Opts: discard,errors=remount-ro.\n")

    def df(self) -> str:
        blocks = self.disk_gb * 1_000_000_000 // 1024
        used = blocks * 6 // 100 + self.rng.randint(0, 1000)
        return ("Filesystem     1024-blocks      Used  Available Capacity Mounted on\n"
                f"/dev/vda1      {blocks:>11} {used:>9} {blocks - used:>10} "
                f"{used * 100 // blocks + 1:>7}% /\n")

    def docker(self, args: list[str]) -> tuple[int, str, str]:
        if args[:1] == ["run"] and "--gpus" in args and "nvidia-smi" in args:
            return self.nvidia_smi(args[args.index("nvidia-smi") + 1:])
        return 125, "", ("docker: the simulated machine answers only `docker run --gpus all "
                         "IMAGE nvidia-smi ...`\n")

    def burn(self, args: list[str]) -> tuple[int, str, str]:
        peak = datasheet_tflops(self.gpu, self.name) or 50.0
        rates = [peak * self.rng.uniform(0.66, 0.74) for _ in range(self.count)]
        return 0, "".join(f"{BURN_MARKER} gpu={i} tflops={rate:.1f}\n"
                          for i, rate in enumerate(rates)), ""
