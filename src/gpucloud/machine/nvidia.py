"""What to ask a GPU machine, and how to read its answers.

The commands `gpucloud doctor` and `gpucloud top` run on a machine, and pure
parsers for their output (nvidia-smi, dmesg, df, the matmul burn), so the
checks run against recorded outputs in the tests as well as on a real machine.
Formats follow NVIDIA's nvidia-smi documentation (`nvidia-smi --help-query-gpu`,
`topo -m` legend) and the Linux kernel log's NVRM lines; the tests read outputs
published by users of every driver series from 331 to 610
(tests/fixtures/nvidia-smi/SOURCE.txt).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# `nvidia-smi -L` and its reader live with the GPU names (the ssh provider reads it too).
from gpucloud.catalog.gpu_list import LIST_COMMAND, ListedGPU, parse_list  # noqa: F401

# Utilisation, memory and temperature per GPU, plus power: what `top` shows.
TOP_FIELDS = ("index", "name", "utilization.gpu", "memory.used", "memory.total",
              "temperature.gpu", "power.draw", "power.limit")
ECC_FIELDS = ("index", "ecc.mode.current", "ecc.errors.corrected.volatile.total",
              "ecc.errors.uncorrected.volatile.total")
# nvidia-smi is injected into any container run with --gpus by the NVIDIA
# Container Toolkit; a small CUDA base image, pulled once per machine.
CONTAINER_IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
BURN_MARKER = "gpucloud-burn"

# Every GPU busy at once: matmuls are queued on all devices in turn (kernel
# launches are asynchronous), synchronised every 10 rounds. 8192^3 bf16 is
# large enough to reach tensor-core peak on any current data-centre GPU.
BURN_SCRIPT = f"""# {BURN_MARKER}: bf16 matmul on every GPU, prints TFLOPS per GPU
import sys, time
try:
    import torch
except ImportError:
    print("{BURN_MARKER}: torch is not installed", file=sys.stderr)
    sys.exit(3)
if not torch.cuda.is_available():
    print("{BURN_MARKER}: torch sees no CUDA device", file=sys.stderr)
    sys.exit(4)
seconds, n = float(sys.argv[1]), 8192
devs = list(range(torch.cuda.device_count()))
a = [torch.randn(n, n, device=d, dtype=torch.bfloat16) for d in devs]
b = [torch.randn(n, n, device=d, dtype=torch.bfloat16) for d in devs]
for d in devs:
    torch.matmul(a[d], b[d])
    torch.cuda.synchronize(d)
rounds, start = 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    for _ in range(10):
        for d in devs:
            torch.matmul(a[d], b[d])
    for d in devs:
        torch.cuda.synchronize(d)
    rounds += 10
elapsed = time.perf_counter() - start
for d in devs:
    print(f"{BURN_MARKER} gpu={{d}} tflops={{2 * n ** 3 * rounds / elapsed / 1e12:.1f}}")
"""


def query_command(fields: tuple[str, ...]) -> str:
    return f"nvidia-smi --query-gpu={','.join(fields)} --format=csv,noheader,nounits"


def burn_command(seconds: float) -> str:
    return f"python3 -c {shlex.quote(BURN_SCRIPT)} {seconds:g}"


def container_command() -> str:
    return f"docker run --rm --gpus all {CONTAINER_IMAGE} nvidia-smi -L"


# The driver's own answer, unchanged by the R610 header relabelling ("Driver
# Version" -> "KMD Version"): read first, the header is the fallback.
DRIVER_QUERY_COMMAND = "nvidia-smi --query-gpu=driver_version --format=csv,noheader"
HEADER_COMMAND = "nvidia-smi"
TOPO_COMMAND = "nvidia-smi topo -m"
KERNEL_LOG_COMMAND = "dmesg"
DISK_COMMAND = "df -Pk /"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # topo -m underlines its header on a terminal


def _value(raw: str) -> str | None:
    raw = raw.strip()
    # "[N/A]", "[Not Supported]", "[Unknown Error]", "[GPU requires reset]"
    return None if not raw or raw.startswith("[") or raw == "N/A" else raw


def parse_query(text: str, fields: tuple[str, ...]) -> list[dict[str, str | None]]:
    """`--format=csv,noheader,nounits`: one row per GPU, values in field order;
    unavailable values ("[N/A]", "[Not Supported]") are None."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            raise ValueError(f"expected {len(fields)} values, got {len(cells)}: {line!r}")
        rows.append({f: _value(c) for f, c in zip(fields, cells)})
    return rows


def number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Versions:
    driver: str | None
    cuda: str | None  # the newest CUDA the driver supports, not the toolkit installed


# The header line of the `nvidia-smi` table. Drivers up to 396 print only
# "Driver Version: 390.116"; 410 to 600 add "CUDA Version: 12.4"; from R610
# they read "KMD Version: 610.43.02" and "CUDA UMD Version: 13.3" (NVIDIA's
# nvidia-smi documentation: "deprecated Driver Version and CUDA Version in
# favor of KMD Version and CUDA UMD Version").
_HEADER_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*([0-9][0-9.]*)")
_HEADER_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*([0-9][0-9.]*)")
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)+")


def parse_header(text: str) -> Versions:
    driver = _HEADER_DRIVER.search(text)
    cuda = _HEADER_CUDA.search(text)
    return Versions(driver.group(1) if driver else None, cuda.group(1) if cuda else None)


def parse_driver_query(text: str) -> str | None:
    """`--query-gpu=driver_version --format=csv,noheader`: one version per GPU
    (all the same); None when the answer is not a version."""
    for line in text.splitlines():
        value = line.strip()
        if value:
            return value if _VERSION.fullmatch(value) else None
    return None


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def parse_topology(text: str) -> dict[tuple[int, int], str]:
    """`nvidia-smi topo -m`: the link between each pair of GPUs (i < j): "NV18",
    "PIX", "PXB", "PHB", "NODE" or "SYS" (legend in the command's output)."""
    columns: list[int] = []
    links: dict[tuple[int, int], str] = {}
    for raw in text.splitlines():
        tokens = _ANSI.sub("", raw).split()
        if not tokens:
            continue
        gpu = re.fullmatch(r"GPU\d+", tokens[0])
        if not columns and gpu and (len(tokens) == 1 or re.fullmatch(r"(GPU|NIC)\d+|CPU",
                                                                       tokens[1])):
            columns = [int(t[3:]) for t in tokens if re.fullmatch(r"GPU\d+", t)]
            continue
        if columns and re.fullmatch(r"GPU\d+", tokens[0]):
            row = int(tokens[0][3:])
            for col, link in zip(columns, tokens[1:1 + len(columns)]):
                if row < col:
                    links[(row, col)] = link
    return links


# NVIDIA's "Xid Errors" catalogue (https://docs.nvidia.com/deploy/xid-errors/,
# "Analyzing Xid Errors with the Xid Catalog") attributes these to the GPU, its
# memory or the bus rather than to the program: they mean a faulty machine.
XID_CATALOGUE = "https://docs.nvidia.com/deploy/xid-errors/"
HARDWARE_XIDS: dict[int, str] = {
    48: "double bit ECC error",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "row remapping / page retirement event",
    64: "row remapping / page retirement failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
    154: "GPU recovery action changed (reset or reboot required)",
}
# NVLink Xids 144-150 (Blackwell) carry their severity in the line: "Fatal"
# is a broken link, "Nonfatal" one the link recovered from.
NVLINK_XIDS = range(144, 151)
_FATAL = re.compile(r"\bFatal\b")


@dataclass(frozen=True)
class Xid:
    pci: str
    code: int
    text: str

    @property
    def hardware(self) -> bool:
        """A fault of the machine, per the catalogue (NVLink: only when Fatal)."""
        if self.code in NVLINK_XIDS:
            return bool(_FATAL.search(self.text))
        return self.code in HARDWARE_XIDS


_XID = re.compile(r"NVRM: Xid \((PCI:[0-9A-Fa-f:.]+)\): (\d+),\s*(.*)$")


def parse_xids(text: str) -> list[Xid]:
    """Xid lines of the kernel log, e.g.
    `NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus.`"""
    out = []
    for line in text.splitlines():
        match = _XID.search(line)
        if match:
            out.append(Xid(match.group(1), int(match.group(2)), match.group(3).strip()))
    return out


@dataclass(frozen=True)
class BusDrop:
    pci: str | None
    text: str  # the driver's message, its continuation lines joined


_NVRM = re.compile(r"NVRM:\s?(.*)$")
_PCI_ADDRESS = re.compile(r"\b[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\b")


def parse_bus_drops(text: str) -> list[BusDrop]:
    """NVRM messages that a GPU "has fallen off the bus" with no Xid line (the
    driver prints them when it loads, or when the GPU stops answering), e.g.
    `NVRM: GPU at 0000:01:00.0 has fallen off the bus.` or, from driver 570, a
    message over three lines: `NVRM: The NVIDIA GPU 0000:b3:00.0` / `NVRM: (PCI
    ID: 10de:26b5) installed in this system has` / `NVRM: fallen off the bus
    and is not responding to commands.` Xid 79 lines are parse_xids' own."""
    out: list[BusDrop] = []
    message: list[str] = []  # NVRM lines since the last one that named a GPU
    for line in text.splitlines():
        match = _NVRM.search(line)
        if match is None or _XID.search(line):
            message = []
            continue
        body = match.group(1).strip()
        if _PCI_ADDRESS.search(body):
            message = [body]
        elif message and len(message) < 4:
            message.append(body)
        else:
            message = [body]
        if "fallen off the bus" in body:
            joined = " ".join(message)
            pci = _PCI_ADDRESS.search(joined)
            out.append(BusDrop(pci.group(0) if pci else None, joined))
            message = []
    return out


def parse_df(text: str) -> tuple[str, int] | None:
    """`df -Pk PATH`: (mount point, free bytes) of the last filesystem listed."""
    found = None
    for line in text.splitlines()[1:]:
        cells = line.split()
        if len(cells) >= 6 and cells[3].isdigit():
            found = (" ".join(cells[5:]), int(cells[3]) * 1024)
    return found


_BURN = re.compile(rf"{BURN_MARKER} gpu=(\d+) tflops=([0-9.]+)")


def parse_burn(text: str) -> dict[int, float]:
    """The burn's "gpucloud-burn gpu=I tflops=X" lines: achieved TFLOPS per GPU."""
    return {int(m.group(1)): float(m.group(2)) for m in _BURN.finditer(text)}
