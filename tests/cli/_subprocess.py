"""The real CLI in its own process, with no credentials of any kind: no
GPUCLOUD_* variables, no KUBECONFIG, an empty HOME and a keyring that holds
nothing (keyring's null backend)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

LIMIT_S = 60


def gpucloud(*args: str, home: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUCLOUD_") and k not in ("KUBECONFIG", "COLUMNS")}
    env.update(GPUCLOUD_HOME=str(home / "gpucloud"), HOME=str(home),
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring", **extra)
    return subprocess.run([sys.executable, "-m", "gpucloud", *args], capture_output=True,
                          text=True, env=env, timeout=LIMIT_S)
