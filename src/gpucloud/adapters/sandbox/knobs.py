"""Knobs of the simulated cloud: ``GPUCLOUD_SANDBOX_*`` env, then ``[sandbox]`` config.

See server.py's docstring for what each knob does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ...errors import ConfigurationError

ENV_PREFIX = "GPUCLOUD_SANDBOX_"
OPERATIONS = frozenset({"types", "list", "get", "create", "update", "delete"})


@dataclass(frozen=True)
class Knobs:
    capacity: int = 4
    boot_seconds: float = 2.0
    terminate_seconds: float = 1.0
    retain_seconds: float = 3600.0
    latency_ms: float = 0.0
    fail_429: float = 0.0
    fail_5xx: float = 0.0
    fail_after_create: float = 0.0
    fail_on: frozenset[str] = OPERATIONS
    seed: int | None = None
    exhaust: frozenset[str] = frozenset()
    native_timer: bool = True
    hang_after_create: float = 0.0
    job_seconds: float = 5.0
    job_fail: float = 0.0
    job_preempt: float = 0.0

    @classmethod
    def load(cls, config: Mapping[str, Any] | None = None,
             environ: Mapping[str, str] | None = None) -> Knobs:
        """Env ``GPUCLOUD_SANDBOX_*`` first, then ``config`` (lower- or upper-case keys)."""
        environ = os.environ if environ is None else environ
        config = {str(k).lower(): v for k, v in (config or {}).items()}
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - names)
        if unknown:
            raise ConfigurationError(
                f"unknown sandbox setting(s): {', '.join(unknown)}",
                hint=f"valid [sandbox] settings: {', '.join(sorted(names))}")
        values: dict[str, Any] = {}
        for name in names:
            env = ENV_PREFIX + name.upper()
            if env in environ:
                raw, where = environ[env], env
            elif name in config:
                raw, where = config[name], f"[sandbox] {name}"
            else:
                continue
            values[name] = _convert(name, raw, where)
        return cls(**values)


def _convert(name: str, raw: Any, where: str) -> Any:
    def bad(expected: str) -> ConfigurationError:
        return ConfigurationError(f"{where}: expected {expected}, got {raw!r}")

    if name in ("fail_on", "exhaust"):
        items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
        out = frozenset(str(i).strip() for i in items if str(i).strip())
        if name == "fail_on":
            if not out or "all" in out:
                return OPERATIONS
            if out - OPERATIONS:
                raise bad(f"operations from {', '.join(sorted(OPERATIONS))}")
        return out
    if name == "native_timer":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise bad("true or false (1 or 0)")
    try:
        if isinstance(raw, bool):
            raise ValueError
        if name in ("capacity", "seed"):
            value: Any = int(raw)
        else:
            value = float(raw)
    except (TypeError, ValueError):
        raise bad("an integer" if name in ("capacity", "seed") else "a number") from None
    if (name.startswith("fail_") or name in ("job_fail", "job_preempt")) \
            and not 0.0 <= value <= 1.0:
        raise bad("a probability between 0 and 1")
    if name != "seed" and value < 0:
        raise bad("a number >= 0")
    return value
