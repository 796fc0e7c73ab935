"""What the history, listing and reap benches share: a gpucloud home and a
sandbox cloud of their own under one directory, in the environment a CLI run
or a client of the bench reads; and the command line that runs gpucloud."""

from __future__ import annotations

import compileall
import os
import shutil
import sys
from pathlib import Path


def gpucloud_command() -> list[str]:
    """The `gpucloud` script beside this Python (or `python -m gpucloud`), with
    gpucloud's bytecode compiled first so every run is measured warm."""
    import gpucloud

    compileall.compile_dir(str(Path(gpucloud.__file__).parent), quiet=1)
    exe = (shutil.which("gpucloud", path=str(Path(sys.executable).parent))
           or shutil.which("gpucloud"))
    return [exe] if exe else [sys.executable, "-m", "gpucloud"]


def home_env(root: Path, **knobs: str) -> dict[str, str]:
    """The caller's environment without its own gpucloud settings, pointed at the
    home and the cloud under `root` (capacity unbounded); `knobs`: more
    GPUCLOUD_SANDBOX_* settings, by their lowercase name."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUCLOUD_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update({"GPUCLOUD_HOME": str(root / "home"), "HOME": str(root),
                "GPUCLOUD_SANDBOX_DB": str(root / "cloud.sqlite"),
                "GPUCLOUD_SANDBOX_CAPACITY": "1000000"})
    env.update({f"GPUCLOUD_SANDBOX_{name.upper()}": value for name, value in knobs.items()})
    return env
