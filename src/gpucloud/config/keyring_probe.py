"""Remembering, across runs, that keyring found no usable backend here.

On a headless Linux box keyring ends on its ``fail.Keyring`` after ~70-120 ms
of imports and backend detection, on every run that looks a key up. Only that
negative verdict is kept (never a backend, a secret or a provider name), under
a fingerprint of everything that could change keyring's choice without a key
being written: the platform, the interpreter, the variables keyring reads, its
``keyringrc.cfg``, every ``sys.path`` entry (installing or removing a package,
so a keyring plugin, changes its directory's mtime) and keyring's version.

Never cached: where a D-Bus session bus could be reached (a Secret Service or
KWallet daemon may be started or activated at any time without any of the
above changing), off Linux (a native keyring is normally viable there), and
when a third-party keyring plugin is installed (its viability may hang on
anything). Every failure to read or write the file means "ask keyring".
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

FORMAT = 1
FILENAME = "keyring.json"
MAX_ENTRIES = 8  # environments remembered (python -m puts the cwd on sys.path)
ENV = ("PYTHON_KEYRING_BACKEND", "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")


def _bus_may_be_reachable(environ: Any) -> bool:
    # jeepney (Secret Service) reads DBUS_SESSION_BUS_ADDRESS only; libdbus
    # (KWallet) and GLib (libsecret) also try the runtime dir's socket and can
    # autolaunch a bus for an X display.
    if "DBUS_SESSION_BUS_ADDRESS" in environ or environ.get("DISPLAY"):
        return True
    sockets = [Path(f"/run/user/{os.getuid()}", "bus")]
    if environ.get("XDG_RUNTIME_DIR"):
        sockets.append(Path(environ["XDG_RUNTIME_DIR"], "bus"))
    return any(os.path.exists(s) for s in sockets)


def _stat(path: str | Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None  # its creation changes the fingerprint
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def _config_file(environ: Any) -> Path:
    # As keyring.util.platform_._config_root_Linux computes it.
    root = environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(root, "python_keyring", "keyringrc.cfg")


def _keyring_dist() -> str | None:
    """keyring's dist-info name (its version), found without importing keyring."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("keyring")
    if spec is None or not spec.origin:
        return None
    site = Path(spec.origin).parent.parent
    return next((n for n in sorted(os.listdir(site))
                 if n.startswith("keyring-") and n.endswith(".dist-info")), None)


def fingerprint(environ: Any = None) -> dict[str, Any] | None:
    """What keyring's choice depends on here; None where no verdict may be kept."""
    environ = os.environ if environ is None else environ
    try:
        if not sys.platform.startswith("linux") or _bus_may_be_reachable(environ):
            return None
        env = {name: environ.get(name) for name in ENV}
        env.update((k, v) for k, v in environ.items() if k.startswith("KEYRING_PROPERTY_"))
        config = _config_file(environ)
        return {"format": FORMAT, "platform": sys.platform, "executable": sys.executable,
                "env": env, "config": [str(config), _stat(config)],
                "path": [[entry, _stat(entry or ".")] for entry in sys.path],
                "keyring": _keyring_dist()}
    except Exception:  # noqa: BLE001 - the cache must never fail a command
        return None


def _file() -> Path:
    from gpucloud.config.settings import cache_dir

    return cache_dir() / FILENAME


def _entries() -> list[dict[str, Any]]:
    try:
        data = json.loads(_file().read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - missing, unreadable or garbage: no verdict
        return []
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return []
    entries = data.get("no_backend")
    if not isinstance(entries, list):
        return []
    return [e for e in entries
            if isinstance(e, dict) and isinstance(e.get("problem"), str) and e["problem"]]


def remembered(print_: dict[str, Any]) -> str | None:
    """The problem keyring reported on this fingerprint, if it had no backend."""
    # Compared as JSON reads it back (lists, not tuples).
    key = json.loads(json.dumps(print_))
    return next((e["problem"] for e in _entries() if e.get("fingerprint") == key), None)


def _only_keyrings_own_plugins() -> bool:
    from importlib.metadata import entry_points

    return all(ep.value.split(":")[0].startswith("keyring.backends")
               and ep.dist is not None and ep.dist.name.lower() == "keyring"
               for ep in entry_points(group="keyring.backends"))


def remember(print_: dict[str, Any], problem: str) -> None:
    """Keep 'no usable backend' for this fingerprint (keyring just said so)."""
    try:
        if not _only_keyrings_own_plugins():
            return
        key = json.loads(json.dumps(print_))
        entries = [e for e in _entries() if e.get("fingerprint") != key]
        entries.append({"fingerprint": key, "problem": problem})
        _write({"format": FORMAT, "no_backend": entries[-MAX_ENTRIES:]})
    except Exception:  # noqa: BLE001 - not remembered: the next run asks keyring
        return


def forget() -> None:
    """keyring found a backend after all: drop every verdict (it only costs one
    slower run per environment)."""
    try:
        _file().unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 - a stale verdict could not be removed; see docs/configuration.md
        return


def _write(data: dict[str, Any]) -> None:
    from gpucloud.config.atomic import write_atomic

    path = _file()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data).encode("utf-8"))
