"""Where credentials come from (the httpx.Auth that sends them: bearer_auth.py).

Order: explicit argument, then the environment, then the system keyring
(service ``gpucloud``, user = provider name). Nothing secret is ever written
to a plain file. Secrets are pydantic ``SecretStr``: their repr is
``SecretStr('**********')``.

Two kinds of credential:

* ``api_key``: ``GPUCLOUD_<PROVIDER>_API_KEY``; keyring holds the key.
* ``oauth2`` (client credentials, e.g. Verda): ``GPUCLOUD_<PROVIDER>_CLIENT_ID``
  and ``GPUCLOUD_<PROVIDER>_CLIENT_SECRET``; keyring holds
  ``<client_id>:<client_secret>``; an explicit argument is a
  ``(client_id, client_secret)`` pair or the same ``id:secret`` string.
* ``kubeconfig`` (Kubernetes, CoreWeave): a kubeconfig file, found at the
  explicit argument (a path), ``GPUCLOUD_<PROVIDER>_KUBECONFIG``, and for
  ``kubernetes`` only, ``KUBECONFIG`` (all its existing entries, which the
  adapter merges as kubectl does) or ``~/.kube/config``: a preset (``coreweave``)
  needs its own variable, so one cluster never shows up as two providers (listed,
  reaped and costed twice). The
  Credential holds the file's path (or paths, joined by os.pathsep) in
  ``client_id`` (paths, not a secret);
  what the file says (tokens, keys, exec plugins) is read by the adapter.
* ``hosts`` (ssh: the team's own machines): config.toml lists them under
  ``[[providers.<provider>.hosts]]``; found when it lists at least one. The
  Credential holds no secret (ssh presents each host's key itself): it says
  the provider is set up, so that it is in scope only then.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpucloud.errors import CredentialsError

if TYPE_CHECKING:  # pydantic is imported when a credential is found, not to look
    from pydantic import SecretStr

KEYRING_SERVICE = "gpucloud"


@dataclass(frozen=True)
class Credential:
    provider: str
    secret: SecretStr = field(repr=False)  # the API key, or the OAuth2 client secret
    source: str  # "argument", "env:NAME", "keyring"
    client_id: str | None = None  # OAuth2 only; an identifier, not a secret

    def __repr__(self) -> str:
        return (f"Credential(provider={self.provider!r}, secret=[secure], "
                f"source={self.source!r}, client_id={self.client_id!r})")




def env_vars(provider: str, kind: str = "api_key") -> tuple[str, ...]:
    """The environment variables that hold a provider's credential."""
    prefix = f"GPUCLOUD_{provider.upper().replace('-', '_')}_"
    if kind == "oauth2":
        return (prefix + "CLIENT_ID", prefix + "CLIENT_SECRET")
    if kind == "kubeconfig":
        return (prefix + "KUBECONFIG",)
    if kind == "hosts":
        return ()  # config.toml lists the hosts; no variable holds them
    return (prefix + "API_KEY",)


def how_to_set(provider: str, kind: str = "api_key") -> str:
    if kind == "hosts":
        return (f"list your machines in config.toml as [[providers.{provider}.hosts]] "
                '(host, user, gpu, gpu_count; e.g. host = "10.0.0.5", user = "ml", '
                'gpu = "H100", gpu_count = 8)')
    if kind == "kubeconfig":
        if provider != "kubernetes":
            return (f"point {env_vars(provider, kind)[0]} at the kubeconfig file {provider} "
                    "issued (KUBECONFIG and ~/.kube/config belong to provider kubernetes)")
        return (f"point KUBECONFIG or {env_vars(provider, kind)[0]} at a kubeconfig file, or "
                "create ~/.kube/config (your cluster's console or `kubectl config` writes one)")
    names = " and ".join(env_vars(provider, kind))
    return (f"set {names}, or run `gpucloud auth login {provider}` to keep it in the "
            "system keyring")


def _split_pair(value: str) -> tuple[str, str] | None:
    client_id, sep, secret = value.partition(":")
    return (client_id.strip(), secret.strip()) if sep and client_id and secret else None


def _keyring() -> Any:
    """The keyring module, its backend chosen as keyring itself would choose it."""
    import keyring

    # Only while keyring has chosen nothing: a backend set by the caller (or a
    # test) stands. Should keyring rename the attribute, keyring chooses alone.
    if getattr(keyring.core, "_keyring_backend", True) is None:
        keyring.set_keyring(_detect_backend())
        if not _no_backend(keyring):
            from gpucloud.config import keyring_probe

            keyring_probe.forget()  # a remembered "no backend" is wrong now
    return keyring


def _no_backend(keyring: Any) -> bool:
    from keyring.backends import fail

    return type(keyring.get_keyring()) is fail.Keyring


def _detect_backend() -> Any:
    """keyring's own choice (PYTHON_KEYRING_BACKEND, then keyringrc.cfg, then
    the viable backend of highest priority), without importing the macOS
    backend where it cannot be viable: its import looks for the Security
    framework with ctypes.util.find_library (about 40 ms on Linux, each run),
    and its priority refuses any system but Darwin before anything else."""
    import platform

    from keyring import core

    chosen = core.load_env() or core.load_config()
    if chosen is not None:
        return chosen
    if platform.system() == "Darwin":
        return core._detect_backend()
    import logging
    from importlib.metadata import entry_points

    from keyring.backend import KeyringBackend, by_priority
    from keyring.backends.chainer import ChainerBackend

    for plugin in entry_points(group="keyring.backends"):
        if plugin.value == "keyring.backends.macOS":
            continue
        try:  # as keyring's _load_plugins: a broken plugin is logged and skipped
            init = plugin.load()
            if callable(init):
                init()
        except Exception:
            logging.getLogger("keyring.backend").exception(f"Error initializing plugin {plugin}.")
    rings = []
    for cls in KeyringBackend.get_viable_backends():
        if cls is ChainerBackend:
            continue
        try:
            rings.append(cls())
        except TypeError:  # as keyring: a backend that needs arguments is no candidate
            continue
    # The chainer wins (priority 10) when two backends or more have a priority
    # above 0; it then chains every backend keyring finds: let keyring build it.
    if sum(1 for ring in rings if ring.priority > 0) > 1:
        return core._detect_backend()
    # Otherwise its priority is below the fail backend's (always viable), so it
    # is never the choice; `max` keeps keyring's order for ties.
    return max(rings, key=by_priority)


def _keyring_get(provider: str) -> tuple[str | None, str | None]:
    """(stored value, why the keyring could not be read). Never raises: a broken
    keyring must not stop a listing; the caller reports the problem instead."""
    # keyring untouched in this process (no backend set by a caller): a past
    # run may have found, on this very environment, that it has no backend.
    print_ = None
    if "keyring" not in sys.modules:
        from gpucloud.config import keyring_probe

        print_ = keyring_probe.fingerprint()
        problem = keyring_probe.remembered(print_) if print_ is not None else None
        if problem:
            return None, problem
    try:
        keyring = _keyring()
    except ImportError:  # pragma: no cover - keyring is a dependency
        return None, "the keyring package is not installed"
    try:
        return keyring.get_password(KEYRING_SERVICE, provider), None
    except Exception as exc:  # noqa: BLE001 - NoKeyringError, backend failures, ...
        first = str(exc).split(". ")[0].strip().rstrip(".")
        problem = f"{type(exc).__name__}" + (f" ({first})" if first else "")
        if print_ is not None and _no_backend(keyring):
            from gpucloud.config import keyring_probe

            keyring_probe.remember(print_, problem)
        return None, problem


class CredentialStore:
    """Resolves a provider's credential: argument, environment, keyring."""

    def __init__(self, explicit: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None, use_keyring: bool = True):
        self._explicit = dict(explicit or {})
        self._environ = os.environ if environ is None else environ
        self._use_keyring = use_keyring
        # Why the system keyring could not be read, if it could not (headless
        # machines have no backend): shown in hints instead of failing.
        self.keyring_problem: str | None = None

    def find(self, provider: str, kind: str = "api_key") -> Credential | None:
        if kind == "none":
            return None
        if kind == "kubeconfig":
            return self._kubeconfig(provider)
        if kind == "hosts":
            return self._hosts(provider)
        if provider in self._explicit:
            return self._make(provider, kind, self._explicit[provider], "argument")
        names = env_vars(provider, kind)
        values = [self._environ.get(n, "").strip() for n in names]
        if all(values):
            return self._make(provider, kind, ":".join(values) if kind == "oauth2" else values[0],
                              "env:" + ",".join(names))
        if self._use_keyring:
            stored, problem = _keyring_get(provider)
            if problem:
                self.keyring_problem = problem
            if stored:
                return self._make(provider, kind, stored, "keyring")
        return None

    def _kubeconfig(self, provider: str) -> Credential | None:
        """The kubeconfig file in force (never the keyring: the file itself holds, or
        says how to obtain, what authenticates)."""
        if provider in self._explicit:
            found = [([str(self._explicit[provider])], "argument")]
        else:
            name = env_vars(provider, "kubeconfig")[0]
            found = [(self._environ.get(name, "").split(os.pathsep), f"env:{name}")]
            if provider == "kubernetes":
                # client-go's loading rules: a set KUBECONFIG is the whole chain;
                # ~/.kube/config is read only when KUBECONFIG lists nothing.
                listed = [p for p in self._environ.get("KUBECONFIG", "").split(os.pathsep)
                          if p.strip()]
                found.append((listed, "env:KUBECONFIG") if listed
                             else (["~/.kube/config"], "~/.kube/config"))
        for paths, source in found:
            # A list (as KUBECONFIG) is one configuration: every existing file of
            # it, joined again with os.pathsep, merged by the adapter as kubectl does.
            present = [os.path.abspath(os.path.expanduser(p.strip())) for p in paths
                       if p.strip() and os.path.isfile(os.path.expanduser(p.strip()))]
            if present:
                return Credential(provider, _secret(""), source,
                                  client_id=os.pathsep.join(dict.fromkeys(present)))
            if source == "argument":
                raise CredentialsError(f"{provider}: no kubeconfig file at {paths[0]}",
                                       hint=how_to_set(provider, "kubeconfig"))
        return None

    @staticmethod
    def _hosts(provider: str) -> Credential | None:
        """config.toml's [[providers.<provider>.hosts]]: set up when it lists any."""
        from gpucloud.config.settings import load_config

        section = load_config().raw.get("providers")
        table = section.get(provider) if isinstance(section, dict) else None
        hosts = table.get("hosts") if isinstance(table, dict) else None
        if not hosts:
            return None
        return Credential(provider, _secret(""), "config.toml")

    def how_to_set(self, provider: str, kind: str = "api_key") -> str:
        if kind in ("kubeconfig", "hosts"):
            return how_to_set(provider, kind)
        hint = how_to_set(provider, kind)
        if self.keyring_problem:
            hint += (f" (the system keyring is unusable here: {self.keyring_problem}; "
                     f"{NO_KEYRING_ADVICE})")
        return hint

    @staticmethod
    def _make(provider: str, kind: str, value: Any, source: str) -> Credential | None:
        if kind != "oauth2":
            return Credential(provider, _secret(str(value).strip()), source)
        pair = tuple(value) if isinstance(value, (tuple, list)) else _split_pair(str(value))
        if not pair or len(pair) != 2:
            raise CredentialsError(
                f"{provider} needs a client id and a client secret ({source})",
                hint=how_to_set(provider, kind))
        return Credential(provider, _secret(str(pair[1])), source, client_id=str(pair[0]))


def _secret(value: str) -> SecretStr:
    from pydantic import SecretStr

    return SecretStr(value)


def __getattr__(name: str) -> Any:
    # BearerAuth lived here; it moved so that this module never imports httpx.
    if name == "BearerAuth":
        from gpucloud.transport.bearer_auth import BearerAuth

        return BearerAuth
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Where to go without a keyring. keyrings.alt's PlaintextKeyring "works" by
# writing the key to a file in clear text: never recommend it unsaid.
NO_KEYRING_ADVICE = ("use the environment variables, or install an encrypted keyring backend "
                     "(Secret Service or KWallet, macOS Keychain, Windows Credential Locker); "
                     "keyrings.alt's PlaintextKeyring would keep the key unencrypted in a file")


def _keyring_error(provider: str, kind: str, exc: Exception) -> CredentialsError:
    names = " and ".join(env_vars(provider, kind))
    return CredentialsError(
        f"no usable system keyring on this machine ({type(exc).__name__})",
        hint=f"{names}: {NO_KEYRING_ADVICE}")


@dataclass(frozen=True)
class KeyringBackend:
    """Which keyring backend holds stored credentials, and whether it encrypts."""

    name: str  # e.g. "keyring.backends.SecretService.Keyring"
    plaintext: bool

    @property
    def warning(self) -> str | None:
        if not self.plaintext:
            return None
        return (f"the keyring backend {self.name} stores credentials unencrypted in a file; "
                "prefer the environment variables or an encrypted backend")


def keyring_backend() -> KeyringBackend:
    """The active backend; for a chain, the first one (where a new secret goes)."""
    keyring = _keyring()
    backend: Any = keyring.get_keyring()
    chained = getattr(backend, "backends", None)
    if type(backend).__name__ == "ChainerBackend" and chained:
        backend = chained[0]
    cls = type(backend)
    name = f"{cls.__module__}.{cls.__qualname__}"
    # keyrings.alt names its unencrypted file backends PlaintextKeyring.
    return KeyringBackend(name, plaintext="plaintext" in name.lower())


def store_credential(provider: str, kind: str, value: str) -> KeyringBackend:
    """Keep a verified credential in the system keyring (never in a file of ours);
    returns the backend that holds it."""
    keyring = _keyring()
    from keyring.errors import KeyringError

    try:
        keyring.set_password(KEYRING_SERVICE, provider, value)
    except (KeyringError, RuntimeError) as exc:
        raise _keyring_error(provider, kind, exc) from None
    return keyring_backend()


def delete_credential(provider: str, kind: str = "api_key") -> bool:
    """Remove a stored credential; False when there was none."""
    keyring = _keyring()
    from keyring.errors import KeyringError, PasswordDeleteError

    try:
        keyring.delete_password(KEYRING_SERVICE, provider)
    except PasswordDeleteError:
        return False
    except (KeyringError, RuntimeError) as exc:
        raise _keyring_error(provider, kind, exc) from None
    return True
