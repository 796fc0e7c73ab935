"""Write kubeconfig files (clientcmd v1) that point at a running emulator."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import yaml

from .server import KubeEmulator

EXEC_PLUGIN = Path(__file__).with_name("exec_credential.py")


def exec_entry(emulator: KubeEmulator, ttl: float | None = None, calls: Path | None = None,
               ca_file: Path | None = None) -> dict[str, Any]:
    env = [{"name": "KEMU_URL", "value": emulator.url},
           {"name": "KEMU_ADMIN_KEY", "value": emulator.admin_key}]
    if ttl is not None:
        env.append({"name": "KEMU_TTL", "value": str(ttl)})
    if calls is not None:
        env.append({"name": "KEMU_CALLS", "value": str(calls)})
    if ca_file is not None:
        env.append({"name": "KEMU_CA_FILE", "value": str(ca_file)})
    # The interpreter running the tests, so the plugin runs without a shebang lookup.
    return {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
            "args": [str(EXEC_PLUGIN)], "env": env, "interactiveMode": "Never",
            "provideClusterInfo": False}


def write_kubeconfig(path: Path, emulator: KubeEmulator, *, token: str | None = None,
                     exec_ttl: float | None = None, exec_calls: Path | None = None,
                     namespace: str | None = "default", context: str = "emulator") -> Path:
    """A kubeconfig whose current context is the emulator with either a static
    bearer token (``token``; default the emulator's admin token) or, given
    ``exec_ttl``, the exec plugin minting tokens that live that many seconds."""
    cluster: dict[str, Any] = {"server": emulator.url}
    ca_file = None
    if emulator.ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(emulator.ca_pem).decode()
        ca_file = emulator.write_ca(path.with_name(path.name + ".ca.pem"))
    if exec_ttl is not None:
        user: dict[str, Any] = {"exec": exec_entry(emulator, exec_ttl, exec_calls, ca_file)}
    else:
        user = {"token": token or emulator.admin_token}
    ctx: dict[str, Any] = {"cluster": "emulator", "user": "emulator-user"}
    if namespace:
        ctx["namespace"] = namespace
    config = {"apiVersion": "v1", "kind": "Config", "preferences": {},
              "clusters": [{"name": "emulator", "cluster": cluster}],
              "users": [{"name": "emulator-user", "user": user}],
              "contexts": [{"name": context, "context": ctx}],
              "current-context": context}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
