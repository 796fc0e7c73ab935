"""The rhythm of elected reapers (``reap --watch I --lease KIND``).

Every reaper asks its elector every P = I/4 seconds; the leader starts a pass
when I seconds have passed since its last one, and a reaper that has just
become leader starts one at once. A Lease lasts D = max(1, floor(I)) whole
seconds (leaseDurationSeconds is an integer; ``--lease`` needs I >= 1 s).

Takeover after the leader dies without releasing (SIGKILL): let r be its last
renewal, r <= the death. A standby sees that renewal at its next try, by r + P
(plus one request), and counts the lease's D from then on its own clock
(kube_lease.py); its first try after that, within another P, takes the Lease
and starts a pass. So a standby acts by r + P + D + P <= death + I/4 + I + I/4
= death + 1.5 I (plus two requests' time), inside the promised two intervals,
with I/2 to spare for the requests. On a release (SIGTERM, Ctrl-C) the lease
has no holder, and a standby takes it at its next try: within P.

One leader at a time: the leader renews every P while it waits, and a
renewer thread (Renewing) renews every P while a pass runs, so the gap between
two renewals is P plus one request, well under D (D >= I/2 = 2P as I >= 1 s;
D = 4P for a whole number of seconds): no standby ever sees
a live leader's record unchanged for D. A renewal that fails (the cluster
unreachable, or another holder) is recorded; the leader stands by from its next
try on, and its pass in progress, already started, finishes.
"""

from __future__ import annotations

import math
import threading
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucloud.safety.election import Elector

POLLS_PER_INTERVAL = 4
MIN_INTERVAL = 1.0  # seconds: a Lease lasts at least one whole second


def lease_seconds(interval: float) -> int:
    """D: the Lease's leaseDurationSeconds for passes every `interval` s."""
    return max(1, math.floor(interval))


def poll_seconds(interval: float) -> float:
    """P: how often every reaper asks its elector."""
    return interval / POLLS_PER_INTERVAL


class Renewing:
    """While a pass runs, ask the elector every `every` seconds from a thread of
    its own, so the leader keeps the lease however long the pass takes."""

    def __init__(self, elector: Elector, every: float) -> None:
        self.elector, self.every = elector, every
        self.lost = False  # a renewal answered "not leading" during the pass
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpucloud-lease-renewal",
                                        daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            if not self.elector.lead():
                self.lost = True

    def __enter__(self) -> Renewing:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()


__all__ = ["MIN_INTERVAL", "POLLS_PER_INTERVAL", "Renewing", "lease_seconds", "poll_seconds"]
