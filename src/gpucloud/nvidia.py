"""What to ask a GPU machine, and how to read its answers.

The commands `gpucloud doctor` and `gpucloud top` run on a machine, and pure
parsers for their output (nvidia-smi, dmesg, df, the matmul burn), so the
checks run against recorded outputs in the tests as well as on a real machine.
Formats follow NVIDIA's nvidia-smi documentation (`nvidia-smi --help-query-gpu`,
`topo -m` legend) and the Linux kernel log's NVRM lines.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# The seed's §8.3 query, plus power: what `top` shows.
TOP_FIELDS = ("index", "name", "utilization.gpu", "memory.used", "memory.total",
              "temperature.gpu", "power.draw", "power.limit")
ECC_FIELDS = ("index", "ecc.mode.current", "ecc.errors.corrected.volatile.total",
              "ecc.errors.uncorrected.volatile.total")
# nvidia-smi is injected into any container run with --gpus by the NVIDIA
# Container Toolkit; the image is the seed's CUDA base image.
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


LIST_COMMAND = "nvidia-smi -L"
HEADER_COMMAND = "nvidia-smi"
TOPO_COMMAND = "nvidia-smi topo -m"
KERNEL_LOG_COMMAND = "dmesg"
DISK_COMMAND = "df -Pk /"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # topo -m underlines its header on a terminal


@dataclass(frozen=True)
class ListedGPU:
    index: int
    name: str  # as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
    uuid: str | None


_LISTED = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$")


def parse_list(text: str) -> list[ListedGPU]:
    """`nvidia-smi -L`: one "GPU i: NAME (UUID: ...)" line per GPU (MIG lines skipped)."""
    out = []
    for line in text.splitlines():
        match = _LISTED.match(line.strip())
        if match:
            out.append(ListedGPU(int(match.group(1)), match.group(2), match.group(3)))
    return out


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


def parse_header(text: str) -> Versions:
    driver = re.search(r"Driver Version:\s*([0-9][0-9.]*)", text)
    cuda = re.search(r"CUDA Version:\s*([0-9][0-9.]*)", text)
    return Versions(driver.group(1) if driver else None, cuda.group(1) if cuda else None)


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


@dataclass(frozen=True)
class Xid:
    pci: str
    code: int
    text: str


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
