"""Several kubeconfig files read as one, by client-go's loading rules.

``KUBECONFIG=~/.kube/config:~/.kube/coreweave.yaml`` is one configuration, as
kubectl sees it (k8s.io/client-go tools/clientcmd/loader.go,
``ClientConfigLoadingRules.Load`` and ``ResolveLocalPaths``):

* the files are read in order, a repeated path once, a missing file skipped;
  a file that exists but cannot be read or parsed is an error;
* each named cluster, user and context comes whole from the FIRST file that
  names it (entries are never mixed field by field across files);
* ``current-context`` is the first file's that sets one (first non-empty wins);
* relative paths (``certificate-authority``, ``client-certificate``,
  ``client-key``, ``tokenFile``, and an exec ``command`` that contains a path
  separator) are relative to the folder of the file that holds the entry;
* one file naming two clusters (users, contexts) alike is an error, as in
  client-go's conversion ("duplicate name ... in list").
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpucloud.errors import ConfigurationError

SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))


@dataclass(frozen=True)
class Entry:
    """A named cluster, user or context and the file it came from."""

    value: dict[str, Any] = field(repr=False)
    origin: str


@dataclass(frozen=True)
class Merged:
    files: tuple[str, ...]
    current_context: str | None
    clusters: dict[str, Entry]
    users: dict[str, Entry]
    contexts: dict[str, Entry]

    @property
    def where(self) -> str:
        """The files, for messages: one path, or the list as KUBECONFIG spells it."""
        return os.pathsep.join(self.files)


def load(paths: Sequence[str]) -> Merged:
    seen: list[str] = []
    for path in paths:
        if path and path not in seen:
            seen.append(path)
    files: list[str] = []
    current: str | None = None
    sections: dict[str, dict[str, Entry]] = {name: {} for name, _ in SECTIONS}
    for path in seen:
        raw = _read(path)
        if raw is None:
            continue  # a missing file is skipped, as client-go does
        files.append(path)
        if current is None and isinstance(raw.get("current-context"), str) and \
                raw["current-context"]:
            current = raw["current-context"]
        for section, key in SECTIONS:
            for name, value in _named(raw, section, key, path).items():
                if name not in sections[section]:  # the first file to name it wins
                    sections[section][name] = Entry(_resolved(section, value, path), path)
    if not files:
        raise ConfigurationError(f"no kubeconfig file found at {os.pathsep.join(seen)}",
                                 hint="set KUBECONFIG to an existing kubeconfig file")
    return Merged(tuple(files), current, sections["clusters"], sections["users"],
                  sections["contexts"])


def _read(path: str) -> dict[str, Any] | None:
    import yaml  # type: ignore[import-untyped]  # lazily: only Kubernetes needs YAML here

    from gpucloud.config.safe_yaml import load_file

    try:
        # Certificates pasted in make kubeconfigs larger than job files: 4 MiB.
        raw = load_file(path, 4 << 20, error=ConfigurationError, what="kubeconfig")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigurationError(f"cannot read kubeconfig {path}: {exc.strerror}",
                                 hint="set KUBECONFIG to a readable file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ConfigurationError(f"kubeconfig {path} is not valid YAML{where}",
                                 hint="fix the file (kubectl config view shows how it reads)"
                                 ) from None
    if raw is None:
        return {}  # an empty file is an empty config (client-go loads it so)
    if not isinstance(raw, dict):
        raise ConfigurationError(f"kubeconfig {path} is not a kubeconfig (not a mapping)",
                                 hint="fix the file (kubectl config view shows how it reads)")
    return raw


def _named(raw: dict[str, Any], section: str, key: str, path: str) -> dict[str, dict[str, Any]]:
    items = raw.get(section) or []
    if not isinstance(items, list):
        raise ConfigurationError(f"kubeconfig {path}: {section} must be a list",
                                 hint="fix the file (kubectl config view shows how it reads)")
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            name = item["name"]
            if name in out:
                raise ConfigurationError(
                    f"kubeconfig {path}: duplicate name {name!r} in {section}",
                    hint="each cluster, user and context needs its own name in a file")
            value = item.get(key) or {}
            out[name] = dict(value) if isinstance(value, dict) else {}
    return out


def _resolved(section: str, value: dict[str, Any], origin: str) -> dict[str, Any]:
    base = os.path.dirname(os.path.abspath(origin))
    keys = {"clusters": ("certificate-authority",),
            "users": ("client-certificate", "client-key", "tokenFile")}.get(section, ())
    for key in keys:
        value[key] = _absolute(value.get(key), base)
    exe = value.get("exec") if section == "users" else None
    if isinstance(exe, dict) and isinstance(exe.get("command"), str) and \
            os.sep in exe["command"]:
        # A bare name is looked up on PATH; only a command with a separator is a path.
        value["exec"] = dict(exe, command=_absolute(exe["command"], base))
    return value


def _absolute(value: Any, base: str) -> Any:
    if not isinstance(value, str) or not value or os.path.isabs(value):
        return value
    return os.path.join(base, value)
