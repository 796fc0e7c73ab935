"""CLI start-up: `gpucloud --help` against `python -c "import typer"`.

Both commands run alternately in one loop so machine noise hits them alike;
the script prints the medians and their ratio. Goal: ratio <= 1.5.

    python bench/cli_startup.py [--runs 15]

Bytecode is compiled first and PYTHONDONTWRITEBYTECODE is dropped for the
children, so both sides are measured warm, as a user's second run is.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL = 1.5


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    if args.runs < 10:
        parser.error("--runs must be at least 10")

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    import gpucloud
    import typer

    for package in (gpucloud, typer):
        compileall.compile_dir(str(Path(package.__file__).parent), quiet=1)

    exe = shutil.which("gpucloud", path=str(Path(sys.executable).parent)) or shutil.which("gpucloud")
    cli = [exe, "--help"] if exe else [sys.executable, "-m", "gpucloud", "--help"]
    base = [sys.executable, "-c", "import typer"]
    for cmd in (cli, base):  # warm the OS caches
        timed(cmd, env)
    cli_times, base_times = [], []
    for _ in range(args.runs):
        cli_times.append(timed(cli, env))
        base_times.append(timed(base, env))
    cli_med, base_med = statistics.median(cli_times), statistics.median(base_times)
    ratio = cli_med / base_med
    print(f"runs: {args.runs}")
    print(f"gpucloud --help      median {cli_med * 1000:7.1f} ms")
    print(f"python -c 'import typer' median {base_med * 1000:7.1f} ms")
    print(f"ratio: {ratio:.2f} (goal <= {GOAL})  {'OK' if ratio <= GOAL else 'OVER GOAL'}")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
