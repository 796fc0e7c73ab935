"""The module paths of gpucloud 0.1.0, kept as deprecated aliases for one release.

gpucloud 0.2 put its modules in packages that name the layers (``gpucloud.ssh``
is now ``gpucloud.machine.ssh``). Code that imports an old path still works:
the old name is the new module itself (so ``monkeypatch.setattr`` on either
patches the one module), with a ``DeprecationWarning`` that names the new path.
What such a module held is found there, except what the reshaping moved to a
module of its own (the reaper's ``reap`` is in ``gpucloud.safety.reap`` now,
the ledger's hooks in ``gpucloud.safety.ledger_events``; a provider package
exports its Provider class only): import those from their new modules.
The aliases go in the release after next.

Five old modules share their name with a new package (``gpucloud.client``,
``gpucloud.config``, ``gpucloud.catalog``, ``gpucloud.jobs``,
``gpucloud.batch``): the package forwards an attribute it does not have to the
module that holds it now (``forward``), with the same warning.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # importlib.abc only for its type: it costs start-up time
    from importlib.abc import Loader

# Old module (under gpucloud.) -> its new home. A package entry covers its
# submodules too: gpucloud.adapters.sandbox.server -> gpucloud.providers.sandbox.server.
MOVED: dict[str, str] = {
    "_drive": "core.drive",
    "_files": "config.atomic",
    "_http": "transport.http",
    "_perform": "core.runners",
    "_yaml_lines": "jobs.yaml_lines",
    "adapters": "providers",
    "adapters._lambda_wire": "providers.lambdalabs._wire",
    "adapters._runpod_wire": "providers.runpod._wire",
    "adapters.flow": "core.flow",
    "adapters.lambdalabs": "providers.lambdalabs.adapter",
    "adapters.runpod": "providers.runpod.adapter",
    "batch_client": "batch.create",
    "batch_lock": "batch.lock",
    "batch_models": "batch.models",
    "bearer_auth": "transport.bearer_auth",
    "budget": "safety.budget",
    "catalog_gaps": "catalog.gaps",
    "catalog_offer": "catalog.offer",
    "cli.auth_cmds": "cli.commands.auth",
    "cli.batch_cmds": "cli.commands.batch",
    "cli.catalog_cmds": "cli.commands.catalog",
    "cli.completion_cmds": "cli.commands.completion",
    "cli.costs_cmds": "cli.commands.costs",
    "cli.deadline_cmds": "cli.commands.deadline",
    "cli.doctor_cmds": "cli.commands.doctor",
    "cli.instance_cmds": "cli.commands.instance",
    "cli.job_cmds": "cli.commands.job",
    "cli.queue_cmds": "cli.commands.queue",
    "cli.reconcile_cmds": "cli.commands.reconcile",
    "cli.ssh_cmds": "cli.commands.ssh",
    "cli.worker_cmds": "cli.commands.worker",
    "context": "core.context",
    "costs": "safety.costs",
    "credentials": "config.credentials",
    "deadlines": "safety.deadlines",
    "doctor": "machine.doctor",
    "engine": "core.instances",
    "exec_client": "machine.exec",
    "file_limits": "config.file_limits",
    "gpus": "catalog.gpus",
    "housekeeping": "core.housekeeping",
    "http_errors": "transport.errors",
    "job_client": "jobs.ops",
    "job_costs": "jobs.costs",
    "jobspec": "jobs.spec",
    "keyring_probe": "config.keyring_probe",
    "launch_deadline": "safety.launch_deadline",
    "launch_ids": "providers.launch_ids",
    "launcher": "core.launch",
    "ledger": "safety.ledger",
    "limits": "catalog.limits",
    "nvidia": "machine.nvidia",
    "offer_ops": "core.offers",
    "ops": "core.instructions",
    "planner": "core.plan",
    "pricing": "catalog.pricing",
    "ratelimit": "transport.ratelimit",
    "reaper_install": "safety.reaper_install",
    "reconcile": "safety.reconcile",
    "redaction": "transport.redaction",
    "refs": "core.refs",
    "remote_install": "machine.remote_install",
    "safe_yaml": "config.safe_yaml",
    "safety_client": "safety.deadlines",
    "sdk_types": "types",
    "spot": "catalog.spot",
    "ssh": "machine.ssh",
    "ssh_config": "machine.ssh_config",
    "state": "safety.journal",
    "tokens": "transport.tokens",
    "top": "machine.top",
}

# Old module -> new module, for the old names that are now a package's name.
FORWARDED: dict[str, str] = {
    "batch": "batch.create",
    "catalog": "catalog.bundled",
    "client": "client.sync_client",
    "config": "config.settings",
    "jobs": "jobs.ops",
}


def new_name(old: str) -> str | None:
    """The new dotted name of an old module path (under gpucloud.), or None."""
    parts = old.split(".")
    for i in range(len(parts), 0, -1):
        new = MOVED.get(".".join(parts[:i]))
        if new is not None:
            return ".".join([new, *parts[i:]])
    return None


def _warn(old: str, new: str) -> None:
    warnings.warn(f"gpucloud.{old} moved to gpucloud.{new}; the old path goes in a later "
                  "release", DeprecationWarning, stacklevel=3)


class _Alias:
    """Loads an old path as the new module: exec_module puts the new module in
    sys.modules under the old name, and the import system hands out what it
    finds there (so there is one module object, not a copy). An old package
    whose modules moved under other names is a forwarding stand-in instead."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # a blank module, replaced in exec_module

    def exec_module(self, module: ModuleType) -> None:
        _warn(self.old, self.new)
        target = importlib.import_module(f"gpucloud.{self.new}")
        if any(key.startswith(self.old + ".") for key in MOVED):
            # An old package whose modules moved under other names (adapters:
            # adapters.lambdalabs is providers.lambdalabs.adapter): importing one
            # sets it as an attribute of its parent, which must not be the new
            # package (providers.lambdalabs would become the adapter module). The
            # blank module stays, as a stand-in that forwards what it lacks.
            module.__path__ = []  # a package: its submodules are found by this finder

            def forwarded(name: str) -> Any:
                return getattr(target, name)

            module.__getattr__ = forwarded  # type: ignore[method-assign]
            return
        sys.modules[module.__name__] = target


class _Finder:
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if not fullname.startswith("gpucloud."):
            return None
        old = fullname[len("gpucloud."):]
        new = new_name(old)
        if new is None:
            return None
        return ModuleSpec(fullname, cast("Loader", _Alias(old, new)))


def install() -> None:
    """Put the alias finder first on sys.meta_path (once): before the path finder,
    which would otherwise load a second copy of a moved package's submodule
    through the alias's __path__."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _is_submodule(package: str, name: str) -> bool:
    import os

    return any(os.path.exists(os.path.join(folder, name + ".py"))
               or os.path.isdir(os.path.join(folder, name))
               for folder in sys.modules[package].__path__)


def forward(package: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for a package named like an old module: an
    attribute the package lacks comes from that old module's new home."""
    old = package[len("gpucloud."):]
    new = FORWARDED[old]
    warned: set[str] = set()  # `from pkg import name` asks twice (hasattr, then getattr)

    def __getattr__(name: str) -> Any:
        if name.startswith("__") or _is_submodule(package, name):
            # `from gpucloud.batch import lock` asks for the attribute before it
            # imports the submodule: leave that to the import system.
            raise AttributeError(name)
        module = importlib.import_module(f"gpucloud.{new}")
        try:
            value = getattr(module, name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        if name not in warned:
            warned.add(name)
            _warn(f"{old}.{name}", f"{new}.{name}")
        return value

    return __getattr__
