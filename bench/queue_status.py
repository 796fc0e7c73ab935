"""`gpucloud queue status` against `python -c "import typer"`, side by side.

    python bench/queue_status.py [--runs 15]

Times, in turn inside one loop (medians): the baseline; `gpucloud queue
status` on an empty embedded queue (a new GPUCLOUD_HOME: nothing ever queued,
goal <= 2.5x); and, with no goal, `queue status` of a queue holding 20 tasks
with its embedded server running (as between commands) and with the server
stopped (the command starts it; it then stays until the next run's `queue
stop`, which is not timed). Bytecode is compiled first and one warm-up run of
each goes before the timed ones. Exit status 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE = "python -c 'import typer'"
EMPTY = "gpucloud queue status (empty, never used)"
RUNNING = "gpucloud queue status (20 tasks, server running)"
STOPPED = "gpucloud queue status (20 tasks, server stopped)"
JOB = "name: bench\nimage: busybox\nresources: {gpu: h100}\n"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    import gpucloud
    import typer

    for package in (gpucloud, typer):
        compileall.compile_dir(str(Path(package.__file__).parent), quiet=1)
    exe = (shutil.which("gpucloud", path=str(Path(sys.executable).parent))
           or shutil.which("gpucloud"))
    gpucloud_cmd = [exe] if exe else [sys.executable, "-m", "gpucloud"]
    status = gpucloud_cmd + ["queue", "status"]
    times: dict[str, list[float]] = {k: [] for k in (BASELINE, EMPTY, RUNNING, STOPPED)}
    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as top:
        base_env = {k: v for k, v in os.environ.items()
                    if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("GPUCLOUD_")}
        base_env["HOME"] = top
        used = {**base_env, "GPUCLOUD_HOME": str(Path(top, "used"))}
        job = Path(top, "job.yaml")
        job.write_text(JOB)
        subprocess.run(gpucloud_cmd + ["queue", "submit", str(job)] + [
            f"--param=i={i}" for i in range(20)], env=used, check=True,
            stdout=subprocess.DEVNULL)
        stop = gpucloud_cmd + ["queue", "stop", "--force"]
        try:
            for run in range(args.runs + 1):  # the first is the warm-up
                empty = {**base_env, "GPUCLOUD_HOME": tempfile.mkdtemp(dir=top)}
                row = {BASELINE: timed([sys.executable, "-c", "import typer"], base_env),
                       EMPTY: timed(status, empty),
                       RUNNING: timed(status, used)}
                subprocess.run(stop, env=used, check=True, stdout=subprocess.DEVNULL)
                row[STOPPED] = timed(status, used)
                if run:
                    for label, value in row.items():
                        times[label].append(value)
        finally:
            subprocess.run(stop, env=used, stdout=subprocess.DEVNULL)

    base = statistics.median(times[BASELINE])
    width = max(len(k) for k in times)
    print(f"runs: {args.runs} (medians, interleaved)")
    print(f"{BASELINE:<{width}}  {base * 1000:7.1f} ms")
    ratio = statistics.median(times[EMPTY]) / base
    print(f"{EMPTY:<{width}}  {statistics.median(times[EMPTY]) * 1000:7.1f} ms  "
          f"ratio {ratio:4.2f} (goal <= 2.5)  {'OK' if ratio <= 2.5 else 'OVER GOAL'}")
    for label in (RUNNING, STOPPED):
        med = statistics.median(times[label])
        print(f"{label:<{width}}  {med * 1000:7.1f} ms  ratio {med / base:4.2f} (no goal)")
    return 0 if ratio <= 2.5 else 1


if __name__ == "__main__":
    sys.exit(main())
