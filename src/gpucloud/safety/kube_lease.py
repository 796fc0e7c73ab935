"""The ``kubernetes`` elector: a ``coordination.k8s.io/v1`` Lease decides who reaps.

The rules are client-go's leader election (k8s.io/client-go
tools/leaderelection/leaderelection.go, ``tryAcquireOrRenew`` and ``release``;
resourcelock/leaselock.go), so a gpucloud reaper and any controller built on
client-go read one Lease alike:

* Each try reads the Lease. No Lease: create it, holding it. A holder other
  than this process whose lease is still valid: stand by. Otherwise (no
  holder, an expired lease, or this process's own): replace it, carrying the
  resourceVersion that was read, so of two standbys that both saw it expire
  only one write succeeds; the other gets 409 Conflict and stands by.
* "Valid" is judged on the reader's own clock, never on the renewTime written
  by another machine's clock: a lease is expired when the record read has not
  changed for leaseDurationSeconds since this process first saw it. Clocks
  that disagree across machines therefore cannot make two leaders; only
  their rates matter.
* The holder renews by replacing the Lease with a new renewTime (first
  optimistically with the resourceVersion of its own last write, then
  through a fresh read), keeping acquireTime and leaseTransitions; a new
  holder counts one more leaseTransition.
* Release (on exit) writes an empty holderIdentity and leaseDurationSeconds 1,
  as ReleaseOnCancel does: a standby's next try takes it without waiting (on
  a fresh read, retried on a conflict: see release()).
* Anything that goes wrong talking to the cluster answers "not leading":
  a reaper that cannot tell whether it leads does not act.

The store is duck-typed (``read_lease`` / ``write_lease``, as
``client.provider("kubernetes")`` offers them), so this module needs nothing
above safety.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Protocol

from gpucloud.config.identity import who
from gpucloud.errors import GpuCloudError

LEASE_NAME = "gpucloud-reaper"
RELEASE_TRIES = 3


class LeaseStore(Protocol):
    def read_lease(self, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        ...

    def write_lease(self, name: str, spec: dict[str, Any], *,
                    resource_version: str | None = None,
                    namespace: str | None = None) -> dict[str, Any] | None:
        ...


def identity() -> str:
    """Who holds the lease, for people reading it: the user and host every state
    row records (config/identity.py) : the process id. Never trusted for
    anything but telling reapers apart; the pid makes two reapers of one user
    on one host differ."""
    me = who()
    return f"{me.user}@{me.host}:{os.getpid()}"


def micro_time(moment: datetime) -> str:
    """metav1.MicroTime on the wire: RFC 3339 in UTC with six fraction digits
    (apimachinery's RFC3339Micro, "2006-01-02T15:04:05.000000Z07:00")."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class KubernetesLease:
    """One reaper's say, through the Lease `name` in `namespace`."""

    kind = "kubernetes"

    def __init__(self, store: LeaseStore, duration_seconds: int, *, name: str = LEASE_NAME,
                 namespace: str | None = None, holder_identity: str | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = _utcnow) -> None:
        if duration_seconds < 1:
            raise ValueError("leaseDurationSeconds is a whole number of seconds, at least 1")
        self.store, self.name, self.namespace = store, name, namespace
        self.duration = int(duration_seconds)
        self.identity = holder_identity or identity()
        self._clock, self._wall = clock, wall
        self._lock = threading.Lock()  # the pass's renewer and the loop share this
        self._lease: dict[str, Any] | None = None  # last read or written: its version
        self._observed: dict[str, Any] = {}  # the record (LeaseSpec) last seen
        self._observed_raw: str | None = None
        self._observed_at = 0.0  # this process's clock when the record last changed

    # -- what was last seen ------------------------------------------------------

    @property
    def holder(self) -> str | None:
        """The holder the last try saw (None: nobody, or not read yet)."""
        return self._observed.get("holderIdentity") or None

    def _is_leader(self) -> bool:
        return self._observed.get("holderIdentity") == self.identity

    def _valid(self, now: float) -> bool:
        seconds = self._observed.get("leaseDurationSeconds") or 0
        return self._observed_at + float(seconds) > now

    def _observe(self, lease: dict[str, Any], now: float) -> None:
        spec = dict(lease.get("spec") or {})
        raw = json.dumps(spec, sort_keys=True)
        if raw != self._observed_raw:
            self._observed, self._observed_raw, self._observed_at = spec, raw, now
        self._lease = lease

    # -- the election -------------------------------------------------------------

    def lead(self) -> bool:
        with self._lock:
            try:
                return self._try()
            except GpuCloudError:
                return False  # cannot tell: do not act

    def _record(self) -> dict[str, Any]:
        stamp = micro_time(self._wall())
        return {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration,
                "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}

    def _write(self, spec: dict[str, Any], resource_version: str | None, now: float) -> bool:
        written = self.store.write_lease(self.name, spec, resource_version=resource_version,
                                         namespace=self.namespace)
        if written is None:
            return False  # 409: another writer got there first
        self._observe(written, now)
        return True

    def _try(self) -> bool:
        record = self._record()
        now = self._clock()
        # 1. The holder renews optimistically, with the version of its own last write.
        if self._is_leader() and self._valid(now) and self._lease is not None:
            record["acquireTime"] = self._observed.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = self._observed.get("leaseTransitions") or 0
            if self._write(record, _version(self._lease), now):
                return True
        # 2. Read it; none yet: create it.
        lease = self.store.read_lease(self.name, namespace=self.namespace)
        now = self._clock()
        if lease is None:
            return self._write(record, None, now)
        # 3. Another holder, and the record has not stayed unchanged for its duration.
        self._observe(lease, now)
        if self.holder is not None and self._valid(now) and not self._is_leader():
            return False
        # 4. Take or renew it, replacing exactly the version read.
        if self._is_leader():
            record["acquireTime"] = self._observed.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = self._observed.get("leaseTransitions") or 0
        else:
            record["leaseTransitions"] = int(self._observed.get("leaseTransitions") or 0) + 1
        return self._write(record, _version(lease), now)

    def release(self) -> None:
        """Give the Lease up, if this process holds it: no holder, one second.
        Unlike client-go's release (one Update, given up on a conflict: a race
        with a renewal cut short that its users have reported), read first and
        try again: a renewal interrupted by the signal that ends the process may
        still land and move the version on, and the Lease would then stay held
        until it expired."""
        with self._lock:
            if not self._is_leader():
                return
            try:
                for _ in range(RELEASE_TRIES):
                    lease = self.store.read_lease(self.name, namespace=self.namespace)
                    if lease is None:
                        return
                    self._observe(lease, self._clock())
                    if not self._is_leader():
                        return  # another holder already: nothing of ours to give up
                    stamp = micro_time(self._wall())
                    record = {"holderIdentity": "", "leaseDurationSeconds": 1,
                              "acquireTime": stamp, "renewTime": stamp,
                              "leaseTransitions": self._observed.get("leaseTransitions") or 0}
                    if self._write(record, _version(lease), self._clock()):
                        return
            except GpuCloudError:
                pass  # the lease then simply expires: a standby waits its duration

    def describe(self) -> str:
        namespace = self.namespace or ((self._lease or {}).get("metadata") or {}).get("namespace")
        where = f"Lease {namespace + '/' if namespace else ''}{self.name}"
        holder = self.holder
        if holder == self.identity:
            return f"{self.identity} leads ({where}, {self.duration} s)"
        return (f"{holder} leads ({where}); {self.identity} stands by" if holder
                else f"nobody leads yet ({where}); {self.identity} stands by")


def _version(lease: dict[str, Any]) -> str | None:
    value = (lease.get("metadata") or {}).get("resourceVersion")
    return value if isinstance(value, str) else None


__all__ = ["LEASE_NAME", "KubernetesLease", "LeaseStore", "identity", "micro_time"]
