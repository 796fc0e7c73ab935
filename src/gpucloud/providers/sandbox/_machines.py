"""The simulated cloud as its collaborators see it (job_sim.py, exec_sim.py):
a Protocol, since SandboxCloud (server.py) imports them."""

from __future__ import annotations

import random
import sqlite3
import threading
from contextlib import AbstractContextManager
from typing import Any, Protocol

from gpucloud.providers.sandbox.knobs import Knobs


class Machines(Protocol):
    """What jobs and exec need of the simulated cloud: its knobs and dice, its
    storage and its machines."""

    knobs: Knobs
    rng: random.Random
    _lock: threading.Lock
    volumes: Any  # volume_sim.VolumeSimulation (which imports this module)

    def _now(self) -> int: ...

    def _read(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def _write_lock(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def _roll_failure(self, op: str) -> bool: ...

    def _insert(self, db: sqlite3.Connection, spec: dict[str, Any], now: int) -> str: ...

    def _row(self, db: sqlite3.Connection, instance_id: str, now: int) -> sqlite3.Row: ...

    def _render(self, row: sqlite3.Row, now: int) -> dict[str, Any]: ...

    def _status(self, row: sqlite3.Row, now: int) -> str: ...
