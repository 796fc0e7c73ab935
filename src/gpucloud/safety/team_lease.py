"""The reaper's election in the team database: a session advisory lock.

The leader holds ``pg_try_advisory_lock`` on a connection of its own. The
server ends a session whose process dies (its socket closes, SIGKILL
included) and the lock goes with it, so a standby asking on its next pass
takes over: within one interval of the death, well inside the two the
reapers promise. Before each pass the leader checks that its session still
holds the lock (``pg_locks``); a leader cut off from the database answers
False and does nothing that pass, since the server may already have given
the lock to another.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from gpucloud.errors import StateError

if TYPE_CHECKING:
    from gpucloud.safety.journal import Journal
    from gpucloud.safety.store_postgres import AdvisoryLock

PURPOSE = "reaper"


class DatabaseLease:
    """An Elector (election.py) on the team database of `journal`."""

    kind = "database"

    def __init__(self, journal: Journal, interval: float) -> None:
        if journal.team is None:
            raise StateError("reapers elect their leader in the team database, and none is "
                             "configured", path=journal.where,
                             hint="set [state] url (or GPUCLOUD_STATE_URL), or use "
                                  "--lease kubernetes")
        from gpucloud.safety.store_postgres import PostgresStore

        assert isinstance(journal.team, PostgresStore)
        from gpucloud.safety.kube_lease import identity

        self.store = journal.team
        self.interval = interval
        self.identity = identity()  # user@host:pid, as the Kubernetes Lease names it
        self.held: AdvisoryLock | None = None
        self.holder: str | None = None  # who the last try saw leading
        # The watch loop asks from its renewal thread while a pass runs.
        self._lock = threading.Lock()

    def lead(self) -> bool:
        with self._lock:
            if self.held is not None:
                if self.held.alive():
                    self.holder = self.identity
                    return True
                self.held.release()  # the session broke: the lock may be another's now
                self.held = None
            try:
                self.held = self.store.try_advisory(PURPOSE, holder=self.identity)
                self.holder = self.identity if self.held is not None else \
                    self.store.holder(PURPOSE)
            except StateError:
                self.holder = None
                return False  # cannot tell: never act on a guess
            return self.held is not None

    def release(self) -> None:
        with self._lock:
            if self.held is not None:
                self.held.release()
                self.held = None

    def describe(self) -> str:
        where = f"advisory lock in {self.store.shown}"
        if self.held is not None:
            return f"{self.identity} leads ({where})"
        if self.holder:
            return f"{self.holder} leads ({where}); {self.identity} stands by"
        return f"{self.identity} stands by ({where})"


__all__ = ["DatabaseLease", "PURPOSE"]
