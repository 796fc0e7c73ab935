"""Which of several ``gpucloud reap --watch`` processes acts: one leader.

Any number of reapers may run (laptops, a CI job, a Deployment's replicas);
each pass, a reaper asks its elector whether it leads. Only the leader reaps;
the others stand by and ask again, so when the leader dies one of them takes
over. An elector never lets two processes lead at once while their clocks
and the lock's store agree; where that cannot be known (the store is gone),
it answers False rather than risk a second delete of one machine.

Kinds: ``none`` (this process always leads: a single reaper, as before),
``database`` (the team database holds the lock), ``kubernetes`` (a
``coordination.k8s.io/v1`` Lease).
"""

from __future__ import annotations

from typing import Protocol


class Elector(Protocol):
    """One reaper's say in the election."""

    kind: str

    def lead(self) -> bool:
        """True when this process is to act on this pass (it took or renewed
        the lock); False when another process holds it, or this one cannot
        tell."""
        ...

    def release(self) -> None:
        """Give the lock up (on exit), so a standby takes over at once."""
        ...

    def describe(self) -> str:
        """One line for the reaper's output: who leads, where the lock is."""
        ...


class Alone:
    """No election: this process always acts."""

    kind = "none"

    def lead(self) -> bool:
        return True

    def release(self) -> None:
        return None

    def describe(self) -> str:
        return "a single reaper (no election)"


__all__ = ["Alone", "Elector"]
