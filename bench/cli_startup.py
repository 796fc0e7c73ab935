"""CLI start-up: gpucloud commands against `python -c "import typer"`.

Every command and the baseline run in turn inside one loop, so machine noise
hits them alike; the script prints each median and its ratio to the baseline,
against its goal:

    gpucloud --help                         <= 1.5
    gpucloud offers --gpu h100 --count 8    <= 2.5  (catalog only, no credentials)
    gpucloud list                           <= 3.0  (no credentials, no sandbox used
                                             yet: nothing in scope, so it loads
                                             the client but neither httpx nor
                                             pydantic nor the ledger)

    python bench/cli_startup.py [--runs 15] [--before CHECKOUT]

--before times the same commands from another checkout's src/ (e.g. the
commit before a change, unpacked with `git archive REV src providers | tar -x
-C DIR`) inside the same loop, so a before/after comparison shares the noise.

The commands run with an empty GPUCLOUD_HOME and no GPUCLOUD_* credential
variables, as on a fresh machine; the system keyring is consulted as it would
be for a user (offers asks it for each provider's key). Bytecode is compiled
first and PYTHONDONTWRITEBYTECODE is dropped for the children, so every side
is measured warm, as a user's second run is: the warm-up run also fills
gpucloud's cache directory (parsed catalogs; on a machine with no usable
keyring backend, that verdict). The "first run" line times offers with a new,
empty GPUCLOUD_HOME each time, so what a first run costs is printed too.
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

# A new, empty GPUCLOUD_HOME on every run: nothing cached yet.
FIRST_RUN = "gpucloud offers ... (first run, no cache)"
# (label, arguments after `gpucloud`, goal as a multiple of `import typer`; None: none)
CASES = [
    ("gpucloud --help", ["--help"], 1.5),
    ("gpucloud offers --gpu h100 --count 8", ["offers", "--gpu", "h100", "--count", "8"], 2.5),
    # No credentials: the sandbox is the one provider listed.
    ("gpucloud list (no credentials)", ["list"], 3.0),
    (FIRST_RUN, ["offers", "--gpu", "h100", "--count", "8"], None),
]
BASELINE = "python -c 'import typer'"
BEFORE = " [before]"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def clean_env(home: str) -> dict[str, str]:
    """The caller's environment without credentials or a gpucloud home of its own."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("GPUCLOUD_")
           and k != "KUBECONFIG"}
    env["GPUCLOUD_HOME"] = home
    env["HOME"] = home  # no ~/.kube/config, no ~/.ssh keys of the person running it
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--before", metavar="CHECKOUT",
                        help="also time the commands of this checkout's src/, side by side")
    args = parser.parse_args()
    if args.runs < 10:
        parser.error("--runs must be at least 10")

    import gpucloud
    import typer

    for package in (gpucloud, typer):
        compileall.compile_dir(str(Path(package.__file__).parent), quiet=1)

    exe = (shutil.which("gpucloud", path=str(Path(sys.executable).parent))
           or shutil.which("gpucloud"))
    prefix = [exe] if exe else [sys.executable, "-m", "gpucloud"]
    commands = {BASELINE: [sys.executable, "-c", "import typer"]}
    commands.update({label: prefix + argv for label, argv, _ in CASES})
    before_src = None
    if args.before:
        before_src = str(Path(args.before, "src").resolve())
        compileall.compile_dir(before_src, quiet=1)
        commands.update({label + BEFORE: prefix + argv for label, argv, _ in CASES})
    times: dict[str, list[float]] = {label: [] for label in commands}
    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as home:
        env = clean_env(home)
        envs = {label: ({**env, "PYTHONPATH": before_src} if label.endswith(BEFORE) and before_src
                        else env) for label in commands}
        for label, cmd in commands.items():  # warm the OS caches; a failing command stops here
            timed(cmd, envs[label])
        for run in range(args.runs):
            for label, cmd in commands.items():
                env_now = envs[label]
                if label.startswith(FIRST_RUN):
                    env_now = {**env_now, "GPUCLOUD_HOME": tempfile.mkdtemp(dir=home)}
                times[label].append(timed(cmd, env_now))

    base = statistics.median(times[BASELINE])
    width = max(len(label) for label in commands)
    print(f"runs: {args.runs} (medians, interleaved)")
    print(f"{BASELINE:<{width}}  {base * 1000:7.1f} ms")
    over = []
    for label, _, goal in CASES:
        med = statistics.median(times[label])
        ratio = med / base
        if goal is None:
            print(f"{label:<{width}}  {med * 1000:7.1f} ms  ratio {ratio:4.2f} (no goal)")
        else:
            verdict = "OK" if ratio <= goal else "OVER GOAL"
            if ratio > goal:
                over.append(label)
            print(f"{label:<{width}}  {med * 1000:7.1f} ms  ratio {ratio:4.2f} "
                  f"(goal <= {goal})  {verdict}")
        if label + BEFORE in times:
            med = statistics.median(times[label + BEFORE])
            print(f"{label + BEFORE:<{width}}  {med * 1000:7.1f} ms  ratio {med / base:4.2f}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
