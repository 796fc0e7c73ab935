"""The client's context: catalogs, credentials, provider scope, journal.

Every operation takes it as its first argument: it says which providers are
in scope and callable and builds adapters and InstanceSpecs; operations never
touch config files or the keyring themselves.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucloud.config import settings as config_mod
from gpucloud.providers.registry import (
    adapter_class, adapter_names, capabilities_of, has_adapter,
)
from gpucloud.catalog.bundled import ProviderCatalog, load_catalogs
from gpucloud.config.credentials import CredentialStore, env_vars, how_to_set
from gpucloud.providers.launch_ids import new_launch_id
from gpucloud.errors import (
    ConfigurationError, CredentialsError, GpuCloudError, SpecError, StateError, option,
)
from gpucloud.safety.journal import Journal

if TYPE_CHECKING:  # pydantic is loaded by what builds these, not by the context
    from gpucloud.providers.base import Provider
    from gpucloud.catalog.gaps import CatalogGap
    from gpucloud.config.identity import Identity
    from gpucloud.models import Attempt, Instance, InstanceSpec, Offer, ProviderStatus

DEFAULT_KEYS = ("~/.ssh/id_ed25519.pub", "~/.ssh/id_rsa.pub")


def _key_path(ssh_key: str | None) -> Path | None:
    """The public key file `ssh_key` names (a default one when None); None for
    the name of a key registered at the provider, or no key at all."""
    if ssh_key is None:
        for candidate in DEFAULT_KEYS:
            if Path(candidate).expanduser().is_file():
                ssh_key = candidate
                break
        else:
            return None
    path = Path(ssh_key).expanduser()
    looks_like_path = path.is_file() or ssh_key.endswith(".pub") or os.sep in ssh_key
    return path if looks_like_path else None


def ssh_key_file(ssh_key: str | None) -> str | None:
    """The absolute path of the public key file create sends (journaled, so
    `gpucloud ssh` later offers its private half); None for a registered name."""
    path = _key_path(ssh_key)
    return str(path.absolute()) if path is not None and path.is_file() else None


def resolve_ssh_key(ssh_key: str | None) -> tuple[str | None, str | None]:
    """(key name, public key text) from a registered name or a public key path."""
    path = _key_path(ssh_key)
    if path is None:
        return ssh_key, None
    if not path.is_file():
        raise SpecError(f"SSH public key file not found: {path}",
                        hint="pass the path of a .pub file or the name of a registered key")
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    fields = text.split()
    if "PRIVATE KEY" in text or len(fields) < 2:
        raise SpecError(f"{path} is not an SSH public key",
                        hint="pass the .pub file; private keys are never read")
    try:
        blob = base64.b64decode(fields[1], validate=True)
    except ValueError as exc:
        raise SpecError(f"{path} is not an SSH public key") from exc
    return "gpucloud-" + hashlib.sha256(blob).hexdigest()[:12], text


class InFlight:
    """The launches of the last create whose outcome is not known yet, in the
    order they were sent: added and removed by each launch's thread, read after
    an interrupt. Removal is by identity and costs the same however many are
    in flight (a wide batch holds thousands answered and not yet confirmed;
    scanning a list for each one was a large part of a launch's CPU)."""

    def __init__(self) -> None:
        self._items: dict[int, Attempt] = {}  # id() of a kept object is unique
        self._lock = threading.Lock()

    def append(self, attempt: Attempt) -> None:
        with self._lock:
            self._items[id(attempt)] = attempt

    def discard(self, attempt: Attempt) -> None:
        """This very object (not an equal one) is no longer in flight."""
        with self._lock:
            if self._items.get(id(attempt)) is attempt:
                del self._items[id(attempt)]

    def __iter__(self) -> Iterator[Attempt]:
        with self._lock:
            return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"InFlight({list(self)!r})"


class ClientContext:
    """What the operations ask about: catalogs, credentials, scope, journal."""

    def __init__(self, providers: list[str] | None, credentials: dict[str, str] | None,
                 on_attempt: Callable[[Attempt], None] | None, use_keyring: bool) -> None:
        self.config = config_mod.load_config()
        self.catalogs: Mapping[str, ProviderCatalog] = load_catalogs(config_mod.config_dir())
        self.credentials = CredentialStore(credentials, use_keyring=use_keyring)
        for name in providers or ():
            self.check_known(name)
        self.providers = list(providers) if providers else None
        self.on_attempt = on_attempt
        self.warnings: list[str] = []
        # Why a provider in scope gave no live offers in the last offers() call.
        self.failures: dict[str, GpuCloudError] = {}
        # Providers the bundled catalog had nothing for in the last offers() call
        # (each is in `warnings` too); the CLI says them in one line.
        self.catalog_gaps: list[CatalogGap] = []
        self.last_attempts: list[Attempt] = []
        # The last create's progress, readable after an interrupt: machines
        # that exist, and launches sent whose outcome is not known yet.
        self.created: list[Instance] = []
        self.in_flight = InFlight()
        # SSH keys resolved once for a whole batch (its launches name the same
        # key; looking for the default key files is file-system work each time):
        # set by batch/create.py for its run, None otherwise.
        self.key_memo: dict[str | None, tuple[str | None, str | None, str | None]] | None = None
        # Who launches, looked up once for a whole batch (the OS user is a
        # password-database read, some 0.1 ms a launch): set by batch/create.py
        # for its run, None otherwise (each launch looks it up).
        self.identity_memo: Identity | None = None
        # The queue task this client works for (None outside one): read once, from
        # the environment the worker gave the task's process, and written on
        # every launch and ledger row it causes. Never read again later, so a
        # client lives under one task id for its whole life.
        self.task_id: str | None = config_mod.queue_task_id()
        self._adapters: dict[str, Provider] = {}
        self._journal: Journal | None = None

    @cached_property
    def known(self) -> list[str]:
        """Every provider with a catalog or an adapter (scans installed entry points)."""
        return sorted(set(self.catalogs) | set(adapter_names()))

    def check_known(self, name: str) -> None:
        if name in self.catalogs or has_adapter(name):  # `known` without its scan
            return
        import difflib

        close = difflib.get_close_matches(name, self.known, n=2)
        raise SpecError(f"unknown provider {name!r}",
                        hint=f"did you mean {' or '.join(close)}?" if close
                        else f"known providers: {', '.join(self.known)}")

    def scope(self, provider: str | None, listing: bool = False, every: bool = False
              ) -> list[str]:
        """The providers an operation covers. `every`: all of them, whatever
        config.toml's default list says (the reaper must not miss a machine)."""
        if provider is not None:
            self.check_known(provider)
            names = [provider]
        elif self.providers is not None:
            names = self.providers
        elif self.config.providers is not None and not every:
            names = list(self.config.providers)
        else:
            # The simulated cloud never mixes into real price comparisons;
            # it is listed once it has been used.
            # A cluster without a kubeconfig has nothing to say (no shared
            # price list exists for it), nor has ssh while config.toml lists
            # none of the team's machines: each is in scope once configured.
            names = [n for n, c in self.catalogs.items() if not c.simulated
                     and (c.auth not in ("kubeconfig", "hosts")
                          or self.credential(n) is not None)]
            if listing and "sandbox" in self.catalogs and config_mod.sandbox_db_path().exists():
                names.append("sandbox")
        for name in names:
            self.check_known(name)
        return [n for n in names if n in self.catalogs]

    def auth_kind(self, name: str) -> str:
        catalog = self.catalogs.get(name)
        return catalog.auth if catalog is not None else "api_key"

    def credential(self, name: str) -> Any:
        return self.credentials.find(name, self.auth_kind(name))

    def has_credentials(self, name: str) -> bool:
        # An adapter, once made, sends the credential it was made with: looking
        # it up again before each call (the environment, the keyring: a round trip
        # to its daemon) would only repeat the answer.
        made = self._adapters.get(name)
        if made is not None and made.credential is not None:
            return True
        return self.auth_kind(name) == "none" or self.credential(name) is not None

    def has_adapter(self, name: str) -> bool:
        return has_adapter(name)

    def can_call(self, name: str) -> bool:
        return self.has_adapter(name) and self.has_credentials(name)

    def missing_credentials(self, names: list[str], *,
                            any_provider: bool = False) -> CredentialsError:
        with_adapter = [n for n in names if has_adapter(n) and n != "sandbox"]
        if len(with_adapter) == 1 and not any_provider:
            name = with_adapter[0]
            return CredentialsError(f"no credentials for {name}",
                                    hint=self.credentials.how_to_set(name, self.auth_kind(name)))
        keys = ", ".join(" + ".join(env_vars(n, self.auth_kind(n))) for n in with_adapter
                         if env_vars(n, self.auth_kind(n)))
        problem = self.credentials.keyring_problem
        return CredentialsError(
            "no credentials for any provider that can create machines",
            hint=f"set {keys} (or `gpucloud auth login NAME`), "
                 f"or try the simulated cloud with {option('provider', '--provider')} sandbox"
                 + (f"; the system keyring is unusable here: {problem}" if problem else ""))

    def require_callable(self, name: str) -> None:
        self.check_known(name)
        if not has_adapter(name):
            raise ConfigurationError(f"{name} has catalog prices only in this version",
                                     hint="its adapter is not available yet")
        if not self.has_credentials(name):
            raise self.missing_credentials([name])

    def adapter(self, name: str) -> Provider:
        if name not in self._adapters:
            cls = adapter_class(name)
            if cls is None:
                raise ConfigurationError(f"no adapter for provider {name!r}")
            catalog = self.catalogs.get(name)
            if catalog is None:
                raise ConfigurationError(
                    f"no catalog file for provider {name!r}",
                    hint=f"add {config_mod.config_dir()}/providers/{name}.toml")
            self._adapters[name] = cls(catalog, self.credential(name))
        return self._adapters[name]

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def tolerant(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A journal call the operation can do without (a deadline lookup, a
        record after the fact): a damaged journal becomes one warning, never a
        reason to stop deleting, listing or reporting a machine that exists."""
        try:
            return fn(*args, **kwargs)
        except StateError as exc:
            self.warn(f"{exc}; {what}" + (f" (fix: {exc.hint})" if exc.hint else ""))
            return None

    @property
    def journal(self) -> Journal:
        if self._journal is None:
            from gpucloud.safety.state_store import open_journal

            self._journal = open_journal(self.config)
        return self._journal

    def report(self, attempt: Attempt) -> None:
        if self.on_attempt is not None:
            self.on_attempt(attempt)

    def ssh_key(self, ssh_key: str | None) -> tuple[str | None, str | None, str | None]:
        """(key name, public key text, key file journaled) for `ssh_key`: see
        resolve_ssh_key and ssh_key_file; once per batch (key_memo)."""
        memo = self.key_memo
        if memo is not None and ssh_key in memo:
            return memo[ssh_key]
        resolved = (*resolve_ssh_key(ssh_key), ssh_key_file(ssh_key))
        if memo is not None:
            memo[ssh_key] = resolved
        return resolved

    def who(self) -> Identity:
        """Who acts through this client now: user and host (config/identity.py)."""
        from gpucloud.config.identity import who

        return who()

    def instance_spec(self, offer: Offer, adapter: Provider, *, name: str | None,
                      image: str | None, ssh_key: str | None, disk_gb: int | None,
                      shutdown_at: Any, job: Any = None,
                      batch: str | None = None, max_cost: Any = None,
                      job_node: bool = False, volumes: tuple[Any, ...] = ()) -> InstanceSpec:
        """``job_node``: a machine of a multi-node job, launched without the job
        (started on it later, over ssh) yet carrying a job launch id;
        ``volumes``: that job's volumes, attached at launch."""
        from gpucloud.models import InstanceSpec

        launch_id = new_launch_id(job=job is not None or job_node)
        key_name, public_key, _ = self.ssh_key(ssh_key)
        if adapter.capabilities.needs_ssh_key and key_name is None:
            raise ConfigurationError(
                f"{offer.provider} needs an SSH key to launch and none was found",
                hint=f"pass {option('ssh_key', '--ssh-key')} with a key name or a .pub "
                     "path, or create ~/.ssh/id_ed25519.pub")
        if disk_gb is not None and not adapter.capabilities.custom_disk and offer.disk_gb \
                and disk_gb > offer.disk_gb:
            raise SpecError(f"{offer.instance_type} has a fixed {offer.disk_gb} GB disk",
                            hint=f"drop {option('disk_gb', '--disk-gb')} or pick a larger "
                                 "instance type")
        return InstanceSpec(
            offer=offer, launch_id=launch_id,
            name=name or f"gpucloud-{offer.gpu.lower()}-{launch_id}"[:64],
            image=image or adapter.catalog.default_image, ssh_key_name=key_name,
            ssh_public_key=public_key, disk_gb=disk_gb, shutdown_at=shutdown_at, job=job,
            batch=batch, max_cost=max_cost, volumes=volumes)

    def statuses(self) -> list[ProviderStatus]:
        """Every known provider: credentials, catalog date, and what its adapter
        can do (reading that imports each adapter: this is the one listing that
        needs them all)."""
        from gpucloud.models import ProviderStatus

        out = []
        for name in self.known:
            catalog = self.catalogs.get(name)
            cred = self.credential(name)
            needs_none = self.auth_kind(name) == "none"
            adapter_known = has_adapter(name)
            hint = None
            if not adapter_known:
                hint = "catalog prices only (adapter not available yet)"
            elif not needs_none and cred is None:
                hint = how_to_set(name, self.auth_kind(name))
            out.append(ProviderStatus(
                name=name, display_name=catalog.display_name if catalog else name,
                credentials=needs_none or cred is not None,
                source="none needed" if needs_none else (cred.source if cred else None),
                hint=hint, simulated=bool(catalog and catalog.simulated),
                catalog_as_of=catalog.as_of if catalog else None,
                capabilities=capabilities_of(name) if adapter_known else None))
        return out
