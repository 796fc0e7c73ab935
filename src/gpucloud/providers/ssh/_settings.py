"""The team's own machines, as config.toml lists them:

    [[providers.ssh.hosts]]
    name = "box1"                  # the machine's id: `gpucloud get ssh/box1`; default: host
    host = "10.0.0.5"              # hostname or IP address
    port = 22
    user = "ml"
    identity = "~/.ssh/id_ed25519" # private key file (its path only is ever read here)
    gpu = "H100"                   # what the host holds: checked with nvidia-smi -L
    gpu_count = 8
    cost_per_hour = "12.00"        # USD the ledger counts while allocated; absent: unknown
    dir = "~/.gpucloud"            # where on the host the lock and job files live

A host's figures come from here and nowhere else: there is no public price
for a machine the team owns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from gpucloud.errors import ConfigurationError, UnknownGPUError

WHERE = "config.toml [[providers.ssh.hosts]]"
EXAMPLE = ('e.g. [[providers.ssh.hosts]] host = "10.0.0.5", user = "ml", gpu = "H100", '
           'gpu_count = 8')
KEYS = frozenset({"name", "host", "port", "user", "identity", "gpu", "gpu_count",
                  "cost_per_hour", "dir"})
# A host's name is its id in refs (ssh/NAME), a HostKeyAlias and a path segment.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
# A remote directory goes into a shell line: ~ or an absolute path, plain characters.
_DIR = re.compile(r"(~/|/)[A-Za-z0-9_./-]*")


@dataclass(frozen=True)
class Host:
    name: str
    host: str
    port: int
    user: str
    gpu: str  # canonical (catalog/gpus.py)
    gpu_count: int
    identity: str | None = None  # a path; the key itself is never read by gpucloud
    cost_per_hour: Decimal | None = None
    dir: str = "~/.gpucloud"


def load(raw: dict[str, Any] | None = None) -> tuple[Host, ...]:
    """The configured hosts (none: the provider has nothing to offer or list)."""
    if raw is None:
        from gpucloud.config import settings as config_mod

        raw = config_mod.load_config().raw
    section = raw.get("providers", {})
    if not isinstance(section, dict):
        raise ConfigurationError("config.toml [providers] must be a table", hint=EXAMPLE)
    ssh = section.get("ssh", {})
    if not isinstance(ssh, dict):
        raise ConfigurationError("config.toml [providers.ssh] must be a table", hint=EXAMPLE)
    entries = ssh.get("hosts", [])
    if not isinstance(entries, list):
        raise ConfigurationError(f"{WHERE} must be an array of tables", hint=EXAMPLE)
    hosts: list[Host] = []
    for number, entry in enumerate(entries, 1):
        host = _host(entry, number)
        if any(h.name == host.name for h in hosts):
            raise ConfigurationError(f"{WHERE}: two hosts are named {host.name!r}",
                                     hint="give each host its own name = \"...\"")
        hosts.append(host)
    return tuple(hosts)


def _host(entry: Any, number: int) -> Host:
    from gpucloud.catalog.gpus import parse_gpu
    from gpucloud.models import ssh_endpoint_ok

    where = f"{WHERE} #{number}"
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where} must be a table", hint=EXAMPLE)
    unknown = sorted(set(entry) - KEYS)
    if unknown:
        raise ConfigurationError(f"{where}: unknown key {unknown[0]!r}",
                                 hint=f"a host knows {', '.join(sorted(KEYS))}")
    for key in ("host", "user", "gpu", "gpu_count"):
        if key not in entry:
            raise ConfigurationError(f"{where}: {key} is missing", hint=EXAMPLE)
    host, user, port = entry["host"], entry["user"], entry.get("port", 22)
    if not ssh_endpoint_ok(host, port, user):
        raise ConfigurationError(
            f"{where}: host {host!r}, port {port!r}, user {user!r} is not a usable ssh endpoint",
            hint="a hostname or IP address, a port 1-65535 and a plain user name")
    name = entry.get("name", host)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigurationError(f"{where}: name {name!r} cannot name a machine",
                                 hint="letters, digits, '.', '_' and '-', e.g. name = \"box1\"")
    try:
        gpu = parse_gpu(str(entry["gpu"]))
    except UnknownGPUError as exc:
        raise ConfigurationError(f"{where}: {exc}", hint=exc.hint) from None
    count = entry["gpu_count"]
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 64:
        raise ConfigurationError(f"{where}: gpu_count must be a whole number from 1 to 64, "
                                 f"got {count!r}", hint="e.g. gpu_count = 8")
    identity = entry.get("identity")
    if identity is not None:
        if not isinstance(identity, str) or not identity.strip() or '"' in identity \
                or any(ord(c) < 32 for c in identity):
            raise ConfigurationError(f"{where}: identity must be the path of a private key",
                                     hint='e.g. identity = "~/.ssh/id_ed25519"')
        identity = str(Path(identity).expanduser())
    directory = entry.get("dir", "~/.gpucloud")
    if not isinstance(directory, str) or not _DIR.fullmatch(directory) or ".." in directory \
            or directory.rstrip("/") in ("", "~"):
        raise ConfigurationError(f"{where}: dir {directory!r} is not a usable directory",
                                 hint='~/something or an absolute path of plain characters, '
                                      'e.g. dir = "~/.gpucloud"')
    return Host(name=name, host=host, port=port, user=user, gpu=gpu, gpu_count=count,
                identity=identity, cost_per_hour=_cost(entry.get("cost_per_hour"), where),
                dir=directory.rstrip("/"))


def _cost(value: Any, where: str) -> Decimal | None:
    if value is None:
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InvalidOperation
        # A TOML float goes through its text, so 0.1 stays 0.1.
        amount = Decimal(str(value).strip().lstrip("$"))
    except InvalidOperation:
        amount = Decimal(-1)
    if not amount.is_finite() or not 0 <= amount < 10 ** 5:
        raise ConfigurationError(f"{where}: cost_per_hour must be an amount in USD per hour, "
                                 f"got {value!r}", hint='e.g. cost_per_hour = "12.00"')
    return amount


__all__ = ["Host", "load"]
