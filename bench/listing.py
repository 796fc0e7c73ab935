"""Listing 10,000 machines: `Client.list()` over the cloud's own render plus a JSON
round trip, and what `gpucloud list --json` holds in memory.

A sandbox cloud is filled with N machines of gpucloud's (the server's own
insert, one transaction, each with a launch id label). Then, in turn, many
times:

* **SDK**: `gpucloud.Client(["sandbox"]).list()` (request, parse, models,
  the ledger's look at what changed);
* **baseline**: the cloud answering the same `GET /v1/instances` in-process
  (its SQLite read and render to JSON), then `json.loads` of that body and
  `json.dumps` of the result: the least any client must do with the reply.

Printed: the medians and the ratio SDK / baseline (goal <= 1.3). Then
`gpucloud list --json` runs in a process of its own (the CLI's entry point,
in a Python that reports its peak resident memory, VmHWM, at exit),
against this cloud and against an empty one: the growth of its peak resident
memory (ru_maxrss of the child) over the empty run, against the size of the
JSON it printed (goal <= 2x), and its time. An empty listing loads neither
httpx nor pydantic nor the models, so that growth includes what listing a
single machine costs once (those modules, the Instance validator): the run
against a cloud of one machine is printed too, and the growth over it per
byte printed beyond its one machine, what grows with the listing itself.

    python bench/listing.py [--machines 10000] [--runs 15]

Bytecode is compiled first; nothing here asserts an absolute time.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _homes import home_env  # beside this script

GOAL_RATIO, GOAL_MEMORY = 1.3, 2.0


def fill(root: Path, machines: int) -> None:
    from gpucloud.providers.sandbox.server import SandboxCloud

    cloud = SandboxCloud(root / "cloud.sqlite", {"capacity": 1_000_000})
    with cloud._write_lock() as db:  # one transaction: the server's own insert
        now = cloud._now()
        for n in range(machines):
            cloud._insert(db, {"instance_type": "sim.8xH100", "region": "sim-east-1",
                               "name": f"bench-{n}",
                               "labels": {"gpucloud-launch-id": f"gc-{n:010x}"}}, now)


# Runs the CLI as its script does, then writes the process's peak resident
# memory (VmHWM: since exec; ru_maxrss would keep the forking parent's) to a file.
CLI = """
import atexit, sys
def peak(path=sys.argv[1]):
    with open("/proc/self/status") as status, open(path, "w") as out:
        out.write(next(l.split()[1] for l in status if l.startswith("VmHWM:")))
atexit.register(peak)
sys.argv = ["gpucloud", "list", "--json"]
from gpucloud.cli import main
main()
"""


def cli_run(env: dict[str, str]) -> tuple[float, int, int]:
    """(seconds, peak RSS in bytes, bytes printed) of one run in its own process."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile() as hwm:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", CLI, hwm.name], env=env, stdout=out,
                       stderr=subprocess.DEVNULL, check=True)
        elapsed = time.perf_counter() - start
        return elapsed, int(Path(hwm.name).read_text()) * 1024, out.tell()  # VmHWM: kB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    if args.runs < 5 or args.machines < 1:
        parser.error("--runs must be at least 5 and --machines at least 1")

    import gpucloud

    compileall.compile_dir(str(Path(gpucloud.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as tmp:
        full, empty, one = Path(tmp) / "full", Path(tmp) / "empty", Path(tmp) / "one"
        for root in (full, empty, one):
            root.mkdir()
        os.environ.update(home_env(one))
        fill(one, 1)
        os.environ.update(home_env(full))
        fill(full, args.machines)

        import httpx

        from gpucloud.providers.sandbox.server import SandboxCloud

        cloud = SandboxCloud(full / "cloud.sqlite")
        request = httpx.Request("GET", "https://sandbox.gpucloud.invalid/v1/instances")

        def baseline() -> int:
            reply = cloud.handle(request)
            return len(json.dumps(json.loads(reply.content)))

        client = gpucloud.Client(["sandbox"])
        assert len(client.list()) == args.machines  # and the ledger has seen them all
        sdk_times, base_times = [], []
        for _ in range(args.runs):
            start = time.perf_counter()
            client.list()
            sdk_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            baseline()
            base_times.append(time.perf_counter() - start)
        client.close()

        cli_run(home_env(full))  # warm: the ledger has seen them; OS caches
        runs = [cli_run(home_env(full)) for _ in range(max(3, args.runs // 3))]
        empties = [cli_run(home_env(empty)) for _ in range(3)]
        cli_run(home_env(one))  # warm, as the full cloud's
        ones = [cli_run(home_env(one)) for _ in range(3)]
    sdk, base = statistics.median(sdk_times), statistics.median(base_times)
    ratio = sdk / base
    seconds = statistics.median(r[0] for r in runs)
    peak = statistics.median(r[1] for r in runs)
    empty_peak = statistics.median(r[1] for r in empties)
    printed = runs[0][2]
    growth = (peak - empty_peak) / printed
    one_peak = statistics.median(r[1] for r in ones)
    per_listing = (peak - one_peak) / (printed - ones[0][2])
    print(f"machines: {args.machines}; runs: {args.runs} (medians, interleaved)")
    print(f"Client.list()                         {sdk * 1000:8.1f} ms")
    print(f"cloud render + JSON round trip        {base * 1000:8.1f} ms")
    verdict = "OK" if ratio <= GOAL_RATIO else "OVER GOAL"
    print(f"ratio {ratio:.2f} (goal <= {GOAL_RATIO})  {verdict}")
    print(f"gpucloud list --json: {seconds:.2f} s; peak RSS {peak / 2**20:.1f} MiB "
          f"(empty cloud: {empty_peak / 2**20:.1f} MiB); printed {printed / 2**20:.1f} MiB")
    print(f"memory growth / JSON printed {growth:.2f} (goal <= {GOAL_MEMORY})  "
          f"{'OK' if growth <= GOAL_MEMORY else 'OVER GOAL'}")
    print(f"one machine: peak RSS {one_peak / 2**20:.1f} MiB; growth over it / JSON printed "
          f"beyond it {per_listing:.2f} (what grows with the listing)")
    return 0 if ratio <= GOAL_RATIO and growth <= GOAL_MEMORY else 1


if __name__ == "__main__":
    sys.exit(main())
