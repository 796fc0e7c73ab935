"""Reaping at scale: `gpucloud reap` over `gpucloud list`, 5,000 machines of which 500 are overdue.

A sandbox cloud (its own timer off, so a deadline past does not end a machine
by itself) holds 5,000 machines of gpucloud's (launch id labels), 500 of them
with a deadline an hour ago; the home's ledger has seen them all (one listing
first). Every timed run starts from a fresh copy of that cloud and home (the
copy is not timed): `gpucloud reap --json` (ends the 500: the listing, then
two requests per overdue machine, the journal and the ledger) and
`gpucloud list --json` (the same listing) alternate, in processes of their
own. Printed: the medians and the ratio reap / list. Goal <= 1.3.

    python bench/reap.py [--machines 5000] [--overdue 500] [--runs 9]

Bytecode is compiled first; nothing here asserts an absolute time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _homes  # beside this script

GOAL = 1.3


def home_env(root: Path) -> dict[str, str]:
    return _homes.home_env(root, native_timer="0")  # a deadline past ends nothing by itself


def fill(root: Path, machines: int, overdue: int) -> None:
    from gpucloud.providers.sandbox.server import US, SandboxCloud

    cloud = SandboxCloud(root / "cloud.sqlite", {"capacity": 1_000_000, "native_timer": False})
    with cloud._write_lock() as db:  # one transaction: the server's own insert
        now = cloud._now()
        for n in range(machines):
            past = now - 3600 * US if n < overdue else None
            cloud._insert(db, {"instance_type": "sim.8xH100", "region": "sim-east-1",
                               "name": f"bench-{n}", "shutdown_us": past,
                               "labels": {"gpucloud-launch-id": f"gc-{n:010x}"}}, now)


def timed(argv: list[str], root: Path) -> float:
    start = time.perf_counter()
    out = subprocess.run(argv, env=home_env(root), check=False, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if out.returncode not in (0,):
        raise SystemExit(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=5000)
    parser.add_argument("--overdue", type=int, default=500)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    if args.runs < 3 or not 0 < args.overdue <= args.machines:
        parser.error("--runs must be at least 3, and 0 < --overdue <= --machines")

    prefix = _homes.gpucloud_command()
    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as tmp:
        template = Path(tmp) / "template"
        template.mkdir()
        fill(template, args.machines, args.overdue)
        timed(prefix + ["list", "--json"], template)  # the ledger sees them all once

        def fresh(name: str) -> Path:
            run = Path(tmp) / name
            shutil.rmtree(run, ignore_errors=True)
            shutil.copytree(template, run)
            return run

        check = fresh("check")
        out = subprocess.run(prefix + ["reap", "--json"], env=home_env(check), check=True,
                             capture_output=True, text=True).stdout
        ended = len([a for a in json.loads(out).get("actions", [])
                     if a.get("action") in ("terminated", "terminate", "deleted")])
        times: dict[str, list[float]] = {"reap": [], "list": []}
        for _ in range(args.runs):
            for command in ("reap", "list"):
                times[command].append(timed(prefix + [command, "--json"], fresh(command)))
    reap, listing = statistics.median(times["reap"]), statistics.median(times["list"])
    ratio = reap / listing
    print(f"machines: {args.machines}, overdue: {args.overdue} (reap ended {ended} in the "
          f"check run); runs: {args.runs} (medians, interleaved, each on a fresh copy)")
    print(f"gpucloud list --json  {listing * 1000:8.1f} ms")
    print(f"gpucloud reap --json  {reap * 1000:8.1f} ms")
    print(f"ratio {ratio:.2f} (goal <= {GOAL})  {'OK' if ratio <= GOAL else 'OVER GOAL'}")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
