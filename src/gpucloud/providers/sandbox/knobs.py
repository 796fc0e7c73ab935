"""Knobs of the simulated cloud: ``GPUCLOUD_SANDBOX_*`` env, then ``[sandbox]`` config.

Knobs: ``GPUCLOUD_SANDBOX_<NAME>`` in the environment wins over the dict
given (the ``[sandbox]`` section of config.toml, lower-case names):

    CAPACITY           machines per type per region (4)
    BOOT_SECONDS       pending -> running (2)
    TERMINATE_SECONDS  terminating -> terminated (1)
    RETAIN_SECONDS     how long terminated machines stay visible (3600)
    LATENCY_MS         added to every request (0)
    FAIL_429           probability of a 429 + Retry-After: 1 (0)
    FAIL_5XX           probability of a 503 (0)
    FAIL_AFTER_CREATE  probability that POST /v1/instances DOES create the
                       machine and then answers 503 anyway: the ambiguous
                       failure that reconcile-by-launch-id exists for (0)
    FAIL_ON            operations subject to the three above, comma-separated
                       from types, list (a listing's first page), list_more
                       (its later pages: a listing broken off part way), get,
                       create, update (PATCH, stop, start), delete (all)
    SEED               seeds the failure dice: same seed, same failures
    EXHAUST            instance types with zero capacity, comma-separated, or "all"
    NATIVE_TIMER       0: keep shutdown_at but never act on it, like the real
                       clouds, so only a reaper ends machines (1)
    HANG_AFTER_CREATE  seconds POST /v1/instances waits after committing the
                       machine, before answering: a window in which to kill the
                       client (SIGKILL) between the request and its journal
                       entry, as reconcile's crash test does (0)
    RATE_LIMIT         requests per second the cloud accepts, 0 = no limit (0):
                       over it, a 429 with Retry-After (whole seconds until a
                       token) before the server sees the request; a token
                       bucket holding one second's worth (at least 1), shared
                       by every client of the same database in the process.
                       The sandbox adapter declares the same rate, so a
                       client paces to it instead of collecting 429s
    DROP_AFTER_CREATE  probability that POST /v1/instances DOES create the
                       machine and the connection then drops before the answer
                       (httpx.RemoteProtocolError, "server disconnected"): an
                       ambiguous create the launcher resolves by launch id (0)
    WHOLE_SECONDS      1: keep deadlines (shutdown_at) to the whole second,
                       cutting off what is sent, as the real clouds do (they
                       keep them as text to the second); the sandbox adapter
                       then aims at whole seconds too. 0: to the microsecond (0)
    JOB_SECONDS        how long a job runs once its machine has booted (5)
    JOB_FAIL           probability that a job's run exits 1 half-way (0)
    JOB_PREEMPT        probability that a job's run is preempted part-way (0);
                       a failed or preempted run is retried up to the job's
                       ``retries`` (job_sim.py documents jobs and /v1/jobs)
    JOB_NODE_FAIL      probability that a multi-node job's run loses one node
                       part-way (0): the whole run fails on every node, and is
                       retried whole up to ``retries``, from its checkpoint
    REQUEST_LOG        a file every request to the cloud is appended to, one
                       "METHOD path status" line each, by every process sharing
                       the cloud: what tests count across processes (several
                       reapers, one delete per machine) (unset: none)

One die is rolled per request subject to failures: r < FAIL_429 is a 429,
r < FAIL_429 + FAIL_5XX a 503, and (creates only) r < FAIL_429 + FAIL_5XX +
FAIL_AFTER_CREATE the ambiguous failure. 429s and plain 503s are decided
before anything is recorded: they never create a machine. RATE_LIMIT's
429s and DROP_AFTER_CREATE's drops happen on the wire (transport.py), apart
from that die and from FAIL_ON: the drop has its own die (seeded by SEED),
rolled only for creates the server answered 201.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from gpucloud.errors import ConfigurationError

ENV_PREFIX = "GPUCLOUD_SANDBOX_"
OPERATIONS = frozenset({"types", "list", "list_more", "get", "create", "update", "delete"})


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
    job_node_fail: float = 0.0
    rate_limit: float = 0.0
    drop_after_create: float = 0.0
    whole_seconds: bool = False
    request_log: str | None = None

    def injects(self, op: str) -> bool:
        """Whether requests of ``op`` may fail by FAIL_* (a die is rolled for them)."""
        return op in self.fail_on and bool(self.fail_429 or self.fail_5xx
                                           or self.fail_after_create)

    def failure(self, op: str, roll: float) -> bool:
        """The injected failure a die's ``roll`` in [0, 1) gives a request of
        ``op``: a 429 or a 503 raised (ApiError); True when a create must fail
        *after* recording its machine."""
        from gpucloud.providers.sandbox._wire import ApiError

        if roll < self.fail_429:
            raise ApiError(429, "rate_limited", "too many requests (simulated)",
                           {"Retry-After": "1"})
        if roll < self.fail_429 + self.fail_5xx:
            raise ApiError(503, "unavailable", "the service is temporarily unavailable")
        return op == "create" and roll < self.fail_429 + self.fail_5xx + self.fail_after_create

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

    if name == "request_log":
        return str(raw) or None
    if name in ("fail_on", "exhaust"):
        items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
        out = frozenset(str(i).strip() for i in items if str(i).strip())
        if name == "fail_on":
            if not out or "all" in out:
                return OPERATIONS
            if out - OPERATIONS:
                raise bad(f"operations from {', '.join(sorted(OPERATIONS))}")
        return out
    if name in ("native_timer", "whole_seconds"):
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
    if (name.startswith("fail_") or name in ("job_fail", "job_preempt", "job_node_fail",
                                                  "drop_after_create")) \
            and not 0.0 <= value <= 1.0:
        raise bad("a probability between 0 and 1")
    if name != "seed" and value < 0:
        raise bad("a number >= 0")
    return value
