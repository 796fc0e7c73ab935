"""History: `gpucloud costs` and `gpucloud reconcile` with 10,000 ended launches over 100.

Two homes (each its own GPUCLOUD_HOME and sandbox cloud) hold the same three
live sandbox machines, made through the public client; one home's journal
and cost ledger also hold 100 launches that started and ended in earlier
months, the other's 10,000 (written through the journal's and the ledger's
own methods, as if this client had made them: a delivered launch, a start
row and an end row each). The commands then run in turn, as a user runs
them (`gpucloud costs --json`, `gpucloud reconcile --json`: separate
processes), alternating between the two homes so machine noise hits both
alike. Printed: the median of each and the ratio large / small.
Goals: costs <= 1.3, reconcile <= 1.2.

    python bench/history.py [--small 100] [--large 10000] [--runs 15]

Bytecode is compiled first; nothing here asserts an absolute time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from _homes import gpucloud_command, home_env  # beside this script

GOALS = {"costs": 1.3, "reconcile": 1.2}
COMMANDS = {"costs": ["costs", "--json"], "reconcile": ["reconcile", "--json"]}
LIVE = 3


def fill(root: Path, ended: int) -> None:
    """LIVE live machines through the client, then `ended` launches of past months."""
    from decimal import Decimal

    import gpucloud
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety import ledger
    from gpucloud.safety.journal import Journal, utcnow

    os.environ.update(home_env(root))
    client = gpucloud.Client(["sandbox"])
    for _ in range(LIVE):
        client.create(gpu="h100", count=8, provider="sandbox", auto_shutdown="4h")
    journal = Journal(state_db_path())
    now = utcnow()
    rows = []
    for n in range(ended):
        launch_id = f"gc-{n:010x}"
        began = now - timedelta(days=40 + n % 300, hours=n % 24)
        journal.record_intent(launch_id=launch_id, provider="sandbox", instance_type="sim.8xH100",
                              region="sim-east-1", name=f"old-{n}", price_per_hour="20.00",
                              shutdown_at=None)
        journal.mark(launch_id, "delivered", instance_id=f"old-{n}")
        journal.mark_deleted("sandbox", f"old-{n}")
        for at, state, event in ((began, ledger.RUNNING, "started"),
                                 (began + timedelta(hours=3), ledger.ENDED, "terminated")):
            rows.append(ledger.Row(at=at, provider="sandbox", instance_id=f"old-{n}",
                                   event=event, source="launch", state=state,
                                   price_per_hour=Decimal("20.00"), instance_type="sim.8xH100",
                                   region="sim-east-1", launch_id=launch_id, simulated=True))
    ledger.Ledger(journal).append(rows)
    client.close()


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    if args.runs < 5 or not 0 <= args.small < args.large:
        parser.error("--runs must be at least 5, and 0 <= --small < --large")

    prefix = gpucloud_command()
    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as tmp:
        roots = {"small": Path(tmp) / "small", "large": Path(tmp) / "large"}
        for size, root in roots.items():
            root.mkdir()
            # in a child process: each home's settings are read once per process
            subprocess.run([sys.executable, __file__, "--fill", str(root),
                            str(args.small if size == "small" else args.large)],
                           check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        times = {(c, s): [] for c in COMMANDS for s in roots}
        for command, argv in COMMANDS.items():  # warm up
            for size, root in roots.items():
                timed(prefix + argv, home_env(root))
        for _ in range(args.runs):
            for command, argv in COMMANDS.items():
                for size, root in roots.items():
                    times[command, size].append(timed(prefix + argv, home_env(root)))
    print(f"runs: {args.runs} (medians, interleaved); {LIVE} live machines in each home")
    over = []
    for command in COMMANDS:
        small = statistics.median(times[command, "small"])
        large = statistics.median(times[command, "large"])
        ratio = large / small
        verdict = "OK" if ratio <= GOALS[command] else "OVER GOAL"
        if ratio > GOALS[command]:
            over.append(command)
        print(f"gpucloud {command:<10} {args.small:>6} ended: {small * 1000:7.1f} ms   "
              f"{args.large:>6} ended: {large * 1000:7.1f} ms   ratio {ratio:4.2f} "
              f"(goal <= {GOALS[command]})  {verdict}")
    return 1 if over else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--fill":
        fill(Path(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    sys.exit(main())
