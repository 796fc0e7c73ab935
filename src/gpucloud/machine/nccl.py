"""What `gpucloud doctor --nccl` asks a machine, and how to read the answers.

Commands (the probe of the network, nccl-tests' ``all_reduce_perf``, a
torch.distributed all-reduce when nccl-tests is missing) and pure parsers of
their output: the nccl-tests table, NCCL's own ``NCCL_DEBUG=INFO`` lines,
``ibstat`` and /sys/class/net. Formats follow nccl-tests
(https://github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md for algbw/busbw),
NCCL's environment variables page
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html) and
the outputs users published (tests/fixtures/nccl/SOURCE.txt).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

NCCL_MARKER = "gpucloud-nccl"
# nccl-tests' own sweep: 8 bytes to 1 GiB, doubling; the large sizes are the
# ones that show the link's bandwidth (small ones show latency).
MIN_BYTES, MAX_BYTES = 8, 1 << 30
# Where nccl-tests is usually built when it is not on PATH (its README builds
# into ./build; NGC and cloud images put it under /opt or /usr/local/bin).
NCCL_TESTS_PLACES = ("$HOME/nccl-tests/build/all_reduce_perf",
                     "/opt/nccl-tests/build/all_reduce_perf",
                     "/opt/nccl_tests/build/all_reduce_perf",
                     "/usr/local/bin/all_reduce_perf")

# One round trip reads everything the diagnosis needs; each section is
# optional (a container without ibstat or ip still answers the rest).
# /sys/class/net is read rather than `ip -o link`, which minimal images lack;
# it lists the same interfaces, with their speed in Mb/s.
PROBE_SCRIPT = f"""echo '### {NCCL_MARKER} env'
env | grep -E '^(NCCL|UCX)_' || true
echo '### {NCCL_MARKER} infiniband'
ls /sys/class/infiniband 2>/dev/null || true
echo '### {NCCL_MARKER} ibstat'
ibstat 2>/dev/null || true
echo '### {NCCL_MARKER} ibv_devinfo'
ibv_devinfo -v 2>/dev/null \\
  | grep -E 'hca_id:|port:|state:|active_width:|active_speed:|link_layer:' || true
echo '### {NCCL_MARKER} net'
for d in /sys/class/net/*; do
  speed=$(cat "$d/speed" 2>/dev/null || echo -)
  echo "${{d##*/}} $speed $(cat "$d/operstate" 2>/dev/null || echo -)"
done
echo '### {NCCL_MARKER} tools'
for t in all_reduce_perf mpirun python3 docker; do command -v "$t" || true; done
for p in {' '.join(NCCL_TESTS_PLACES)}; do [ -x "$p" ] && echo "$p"; done
true
"""
PROBE_COMMAND = f"sh -c {shlex.quote(PROBE_SCRIPT)}"

# The torch.distributed fallback prints what all_reduce_perf prints (the same
# row layout and "# Avg bus bandwidth" line), so one parser reads both. Bus
# bandwidth is nccl-tests' for all-reduce: algbw x 2(n-1)/n (doc/PERFORMANCE.md).
TORCH_SCRIPT = f"""# {NCCL_MARKER}: all-reduce bus bandwidth, printed as nccl-tests prints it
import os, sys, time
try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("{NCCL_MARKER}: torch is not installed", file=sys.stderr)
    sys.exit(3)
lo, hi = int(sys.argv[1]), int(sys.argv[2])
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
dist.init_process_group("nccl")
rank, n = dist.get_rank(), dist.get_world_size()
if rank == 0:
    print(f"# {NCCL_MARKER} torch {{torch.__version__}} nccl "
          f"{{'.'.join(map(str, torch.cuda.nccl.version()))}} ranks {{n}}")
    print("#       size         count      type   redop    root     time   algbw   busbw #wrong")
total, rows, size = 0.0, 0, lo
while size <= hi:
    count = max(1, size // 4)
    x = torch.zeros(count, device="cuda", dtype=torch.float32)
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / 20
    x.fill_(1.0)
    dist.all_reduce(x)
    wrong = (x != n).sum()
    dist.all_reduce(wrong)
    algbw = count * 4 / seconds / 1e9
    busbw = algbw * 2 * (n - 1) / n
    total, rows = total + busbw, rows + 1
    if rank == 0:
        print(f"{{count * 4:12d}}  {{count:12d}}     float     sum      -1 "
              f"{{seconds * 1e6:8.1f}} {{algbw:7.2f}} {{busbw:7.2f}} {{int(wrong):6d}}", flush=True)
    del x
    size *= 2
if rank == 0:
    print(f"# Avg bus bandwidth    : {{total / max(rows, 1):.4f}}")
dist.destroy_process_group()
"""


RENDEZVOUS_TIMEOUT = 300  # seconds


def _env_prefix(env: Mapping[str, str]) -> str:
    return "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " "


def nccl_tests_command(binary: str, gpus: int) -> str:
    """All GPUs of one machine in one process (-g), with NCCL's debug lines."""
    return (f"{_env_prefix({'NCCL_DEBUG': 'INFO'})}{shlex.quote(binary)} "
            f"-b {MIN_BYTES} -e 1G -f 2 -g {gpus}")


def mpirun_command(binary: str, addrs: list[str], gpus_per_node: int) -> str:
    """nccl-tests over MPI: one rank per GPU on every node (-g 1), run from
    node 0; it needs nccl-tests built with MPI=1 and ssh between the nodes."""
    hosts = ",".join(f"{a}:{gpus_per_node}" for a in addrs)
    return (f"mpirun --allow-run-as-root -np {len(addrs) * gpus_per_node} -H {hosts} "
            f"-x NCCL_DEBUG=INFO {shlex.quote(binary)} -b {MIN_BYTES} -e 1G -f 2 -g 1")


def torch_command(gpus: int, env: Mapping[str, str] | None = None,
                  image: str | None = None, infiniband: bool = False) -> str:
    """The fallback, one process per GPU through torchrun (python3 -m
    torch.distributed.run: torchrun itself is not always on PATH). `env` is a
    multi-node job's rendezvous (jobs.multinode.node_env). With `image`, inside
    that image (the job's: its PyTorch and NCCL, not the machine's)."""
    env = dict(env or {})
    nodes = ""
    if env:
        # The static rendezvous waits 600 s for the other nodes by default: a
        # node that cannot reach node 0 says so after RENDEZVOUS_TIMEOUT instead.
        nodes = (f"--nnodes={env['NNODES']} --node_rank={env['NODE_RANK']} "
                 f"--master_addr={env['MASTER_ADDR']} --master_port={env['MASTER_PORT']} "
                 f"--rdzv_conf=timeout={RENDEZVOUS_TIMEOUT} ")
    run = (f"python3 -m torch.distributed.run --nproc_per_node={gpus} {nodes}--no-python "
           f"python3 -c {shlex.quote(TORCH_SCRIPT)} {MIN_BYTES} {MAX_BYTES}")
    env = {"NCCL_DEBUG": "INFO", **env}
    if image is None:
        return _env_prefix(env) + run
    return container_command(image, env, infiniband) + " " + run


def container_command(image: str, env: Mapping[str, str], infiniband: bool) -> str:
    """``docker run`` of `image` as a training container runs: every GPU, the
    host's network (the nodes reach each other's ports) and IPC (NCCL's shared
    memory), and where the machine has InfiniBand its devices with unlimited
    locked memory (RDMA registers memory). docker as the login user where it
    may, else through ``sudo -n``, as the job's runner starts it as root."""
    flags = ["--rm", "--gpus", "all", "--network", "host", "--ipc", "host"]
    if infiniband:
        flags += ["--device", "/dev/infiniband", "--cap-add", "IPC_LOCK",
                  "--ulimit", "memlock=-1"]
    for key, value in env.items():
        flags += ["-e", f"{key}={value}"]
    return ('if docker info >/dev/null 2>&1; then gc_docker=docker; '
            'else gc_docker="sudo -n docker"; fi; '
            f"$gc_docker run {' '.join(shlex.quote(f) for f in flags)} {shlex.quote(image)}")


# --- the nccl-tests table ----------------------------------------------------------

@dataclass(frozen=True)
class Measure:
    time_us: float
    algbw: float  # GB/s
    busbw: float  # GB/s
    wrong: int | None  # "N/A" when validation is off (-c 0)


@dataclass(frozen=True)
class Row:
    size: int  # bytes
    count: int
    type: str
    redop: str | None
    out_of_place: Measure | None
    in_place: Measure

    @property
    def busbw(self) -> float:
        return max(m.busbw for m in (self.out_of_place, self.in_place) if m is not None)


@dataclass(frozen=True)
class AllReduce:
    rows: list[Row]
    avg_busbw: float | None  # "# Avg bus bandwidth"
    ranks: int | None  # the "# Using devices" lines, or the torch script's "ranks N"
    headers: int  # how many "nThread" lines: more than one under mpirun means no MPI build

    @property
    def peak_busbw(self) -> float | None:
        return max((r.busbw for r in self.rows), default=None)

    @property
    def wrong(self) -> int:
        return sum((m.wrong or 0) for r in self.rows
                   for m in (r.out_of_place, r.in_place) if m is not None)


_ROW_START = re.compile(r"^\s*(\d+)\s+(\d+)\s+([a-z]\w*)\s+(.*)$")
_NUMBER = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")
_RANK = re.compile(r"#?\s*Rank\s+\d+\s+(Group\s+\d+\s+)?Pid\s+\d+\s+on\s+\S+\s+device")
_TORCH_RANKS = re.compile(rf"#\s*{NCCL_MARKER} torch .* ranks (\d+)")


def _wrong(token: str) -> int | None:
    # Newer nccl-tests count wrong elements (#wrong: 0). Older ones print the
    # largest relative error (error: 2e-07), normal rounding for a float sum,
    # and flag a real error with an asterisk (such a row is not read): 0.
    # "N/A" when validation is off.
    if token == "N/A":
        return None
    return 0 if "e" in token.lower() or "." in token else int(token)


def _measure(tokens: list[str]) -> Measure | None:
    if len(tokens) != 4 or not all(_NUMBER.match(t) for t in tokens[:3]):
        return None
    if tokens[3] != "N/A" and not _NUMBER.match(tokens[3]):
        return None
    return Measure(float(tokens[0]), float(tokens[1]), float(tokens[2]), _wrong(tokens[3]))


def _row(line: str) -> Row | None:
    # NCCL lines and ranks can be interleaved with the table (NCCL_DEBUG=INFO):
    # a row is read from the size onwards. Layouts: size count type [redop]
    # [root] then four figures (time algbw busbw #wrong/error) per variant,
    # out-of-place and in-place, or in-place only.
    hit = None if line.startswith("#") else _ROW_START.match(line)
    if not hit:
        return None
    rest = hit.group(4).split()
    redop = None
    if rest and re.fullmatch(r"[a-z]+", rest[0]):
        redop, rest = rest[0], rest[1:]
    if len(rest) in (5, 9) and re.fullmatch(r"-?\d+", rest[0]):  # the root column
        rest = rest[1:]
    if len(rest) == 8:
        first, second = _measure(rest[:4]), _measure(rest[4:])
        if first is None or second is None:
            return None
        return Row(int(hit.group(1)), int(hit.group(2)), hit.group(3), redop, first, second)
    if len(rest) == 4 and (only := _measure(rest)) is not None:
        return Row(int(hit.group(1)), int(hit.group(2)), hit.group(3), redop, None, only)
    return None


def parse_allreduce(text: str) -> AllReduce:
    rows: list[Row] = []
    avg = ranks = None
    rank_lines = headers = 0
    for line in text.splitlines():
        stripped = line.strip()
        if (hit := _AVG.search(stripped)) is not None:
            avg = float(hit.group(1))
        elif (hit := _TORCH_RANKS.search(stripped)) is not None:
            ranks = int(hit.group(1))
        elif _RANK.search(stripped):
            rank_lines += 1
        elif "nThread" in stripped and "nGpus" in stripped:
            headers += 1
        elif (row := _row(stripped)) is not None:
            rows.append(row)
    return AllReduce(rows, avg, ranks if ranks is not None else (rank_lines or None), headers)


# --- NCCL_DEBUG=INFO ---------------------------------------------------------------

@dataclass(frozen=True)
class NcclLog:
    networks: list[str]  # "Using network X": IB, IBext_v8, Socket, AWS Libfabric ...
    ib_not_found: bool  # "NET/IB : No device found"
    ib_devices: list[str]  # "NET/IB : Using [0]mlx5_0:1/IB ..."
    socket_ifs: list[str]  # "NET/Socket : Using [0]eth0:10.0.0.1<0> ..."
    env_set: dict[str, str]  # "NCCL_X set by environment to Y"
    warnings: list[str] = field(default_factory=list)  # "NCCL WARN ..." lines

    @property
    def socket_only(self) -> bool:
        return bool(self.networks) and all(n.lower() == "socket" for n in self.networks)


_NET = re.compile(r"NCCL INFO Using network (\S+)")
_IB_NONE = re.compile(r"NET/IB\w*\s*: No device found")
_IB_USING = re.compile(r"NET/IB\w*\s*: Using (.*?)(?:;|$)")
_SOCK_USING = re.compile(r"NET/Socket\s*: Using (.*)$")
_ENV_SET = re.compile(r"NCCL INFO (NCCL_\w+) set by environment to (.*?)\.?\s*$")
_IF_ENTRY = re.compile(r"\[\d+\]\s*([^:\s]+):")
_IB_ENTRY = re.compile(r"\[\d+\]\s*=?\{?\s*(?:\[\d+\]\s*)?([\w-]+):\d+/(\w+)")


def parse_nccl_log(text: str) -> NcclLog:
    networks: list[str] = []
    ib_devices: list[str] = []
    socket_ifs: list[str] = []
    env: dict[str, str] = {}
    warnings: list[str] = []
    found_none = False
    for line in text.splitlines():
        if (hit := _NET.search(line)) and hit.group(1) not in networks:
            networks.append(hit.group(1))
        if _IB_NONE.search(line):
            found_none = True
        elif (hit := _IB_USING.search(line)):
            for dev, _kind in re.findall(r"([\w-]+):\d+/(\w+)", hit.group(1)):
                if dev not in ib_devices:
                    ib_devices.append(dev)
        if (hit := _SOCK_USING.search(line)):
            for name in _IF_ENTRY.findall(hit.group(1)):
                if name not in socket_ifs:
                    socket_ifs.append(name)
        if (hit := _ENV_SET.search(line)):
            env[hit.group(1)] = hit.group(2).strip()
        if "NCCL WARN" in line:
            warnings.append(line.split("NCCL WARN", 1)[1].strip())
    return NcclLog(networks, found_none and not ib_devices, ib_devices, socket_ifs, env,
                   warnings)


# --- the probe ------------------------------------------------------------------------

@dataclass(frozen=True)
class IbPort:
    device: str
    port: int
    state: str  # Active, Down, Initializing ...
    rate_gbps: float | None  # ibstat's "Rate:" (Gb/s)
    link_layer: str | None  # InfiniBand or Ethernet (RoCE)


@dataclass(frozen=True)
class Interface:
    name: str
    speed_mbps: int | None  # /sys/class/net/<if>/speed; None when unknown (-1, virtual)
    up: bool


@dataclass(frozen=True)
class Probe:
    env: dict[str, str]
    ib_devices: list[str]  # /sys/class/infiniband
    ib_ports: list[IbPort]
    interfaces: dict[str, Interface]
    tools: dict[str, str]  # name -> path: all_reduce_perf, mpirun, python3

    @property
    def active_ib(self) -> list[IbPort]:
        return [p for p in self.ib_ports if p.state.lower() == "active"]

    @property
    def has_ib(self) -> bool:
        return bool(self.active_ib) or (bool(self.ib_devices) and not self.ib_ports)


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        hit = re.match(rf"### {NCCL_MARKER} (\w+)", line.strip())
        if hit:
            current = hit.group(1)
            out[current] = []
        elif current is not None and line.strip():
            out[current].append(line.rstrip())
    return out


def parse_ibstat(text: str) -> list[IbPort]:
    """`ibstat`: a "CA 'mlx5_0'" block per adapter, a "Port N:" block per port
    with State, Rate (Gb/s) and Link layer."""
    ports: list[IbPort] = []
    device: str | None = None
    port: int | None = None
    values: dict[str, str] = {}

    def flush() -> None:
        if device is not None and port is not None:
            rate = values.get("rate")
            ports.append(IbPort(device, port, values.get("state", "unknown"),
                                float(rate) if rate and _NUMBER.match(rate) else None,
                                values.get("link layer")))

    for line in text.splitlines():
        stripped = line.strip()
        if (hit := re.match(r"CA '([^']+)'", stripped)):
            flush()
            device, port, values = hit.group(1), None, {}
        elif (hit := re.match(r"Port (\d+):$", stripped)):
            flush()
            port, values = int(hit.group(1)), {}
        elif port is not None and ":" in stripped:
            key, _, value = stripped.partition(":")
            values[key.strip().lower()] = value.strip()
    flush()
    return ports


def parse_ibv_devinfo(text: str) -> list[IbPort]:
    """`ibv_devinfo -v` (rdma-core), where ibstat is missing: "hca_id:" per
    adapter, "port:" per port, its state (PORT_ACTIVE), active_width (4X) and
    active_speed per lane ("100.0 Gbps (128)"): the rate is width x speed."""
    ports: list[IbPort] = []
    device: str | None = None
    port: int | None = None
    values: dict[str, str] = {}

    def flush() -> None:
        if device is None or port is None:
            return
        width = re.match(r"(\d+)X", values.get("active_width", ""))
        speed = re.match(r"([0-9.]+)\s*Gbps", values.get("active_speed", ""))
        rate = int(width.group(1)) * float(speed.group(1)) if width and speed else None
        state = values.get("state", "unknown").split()[0]
        ports.append(IbPort(device, port, "Active" if state == "PORT_ACTIVE" else state, rate,
                            values.get("link_layer")))

    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            flush()
            device, port, values = value, None, {}
        elif key == "port" and value.isdigit():
            flush()
            port, values = int(value), {}
        elif port is not None:
            values[key] = value
    flush()
    return ports


def parse_probe(text: str) -> Probe:
    parts = _sections(text)
    env = {}
    for line in parts.get("env", []):
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    interfaces = {}
    for line in parts.get("net", []):
        tokens = line.split()
        if len(tokens) != 3:
            continue
        name, speed, state = tokens
        number = int(speed) if re.fullmatch(r"\d+", speed) else None
        interfaces[name] = Interface(name, number if number and number > 0 else None,
                                     state.lower() in ("up", "unknown"))
    tools: dict[str, str] = {}
    for line in parts.get("tools", []):
        path = line.strip()
        tools.setdefault(path.rsplit("/", 1)[-1], path)
    return Probe(env, [d for line in parts.get("infiniband", []) for d in line.split()],
                 parse_ibstat("\n".join(parts.get("ibstat", [])))
                 or parse_ibv_devinfo("\n".join(parts.get("ibv_devinfo", []))),
                 interfaces, tools)


def ifname_matches(spec: str, names: list[str]) -> list[str]:
    """The interfaces NCCL_SOCKET_IFNAME selects, per NCCL's rule: a
    comma-separated list of prefixes; "=" makes them exact names; "^" makes it
    an exclusion list (then every other interface is selected)."""
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    wanted = [w for w in spec.lstrip("=").split(",") if w]

    def hit(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return [n for n in names if hit(n) != exclude]


__all__ = ["AllReduce", "IbPort", "Interface", "MAX_BYTES", "MIN_BYTES", "Measure",
           "NCCL_MARKER", "NcclLog", "PROBE_COMMAND", "Probe", "Row", "TORCH_SCRIPT",
           "ifname_matches", "mpirun_command", "nccl_tests_command", "parse_allreduce",
           "parse_ibstat", "parse_ibv_devinfo", "parse_nccl_log", "parse_probe", "torch_command"]
