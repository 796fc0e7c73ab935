"""Request pacing shared by every flow of a provider account in the process.

Sans-I/O: ``Limiter.reserve(kind)`` books the next slot and returns the
seconds to wait; the driver (_http.with_policy) yields that as a Sleep, so
the same limiter paces threads (Session, Client's Gather pool) and asyncio
tasks (AsyncSession, AsyncClient's gather) alike. One lock, no I/O, no
sleeping here.

Each declared ``RateLimit`` is a GCRA (a token bucket kept as one "theoretical
arrival time"): ``rate`` requests per second with bursts of ``burst``. A
request books every bucket that applies to it (its kind and "*").

It adapts to the provider's answers:

* a 429 pauses every flow of the account until its Retry-After (or the
  backoff when there is none), not only the flow that got it; the slots
  booked before it are dropped, and a flow sleeping towards one books again
  when it wakes (behind the pause, at the lowered rate);
* the first 429 of a pause also cuts the rates to ``DECREASE`` of what they
  were (multiplicative decrease, never below ``FLOOR`` of the declared ones),
  because the provider's real limit is tighter than declared; each answer
  that is not a 429 gives back ``RECOVER`` of the declared rate (slow
  additive recovery).

Why no library: pyrate-limiter, limits and aiolimiter all answer "may I send
now?" (or sleep/await themselves until yes); none books a future slot and
hands back the wait, which is what a driver that only yields Sleep needs,
and none adapts its rate to 429s. A GCRA is a few lines.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

# How many requests an account may have in flight (Little's law: the rate it
# may send at times the time one request takes to answer), with headroom for
# the work between a flow's requests; ``SPARE`` more for the flows between
# requests at any moment. Until an answer is timed, a request is taken to
# take ``FIRST_LATENCY``: high, so that a first batch starts wide and narrows.
HEADROOM = 1.5
SPARE = 2
FIRST_LATENCY = 0.25
LATENCY_WEIGHT = 0.2  # of each new answer in the moving average
FLOOR = 0.05  # the lowest share of a declared rate that 429s can push it to
# Measured in virtual time (tests/unit/test_rate_limits.py) against a provider
# whose real limit is 2x / 1.25x tighter than declared: x0.5 with +0.02 ran
# 100 requests in 1.44x / 1.35x the real bound, x0.7 with +0.01 in 1.22x / 1.16x
# for a few more 429s (8 / 4 in 100): the gentler cut stays nearer the limit.
DECREASE = 0.7
RECOVER = 0.01  # per answer that is not a 429: from 0.7 back to full in 30
# Slots are booked this much wider than the rate in force. Requests sent on
# exact slots reach the provider with the jitter of their journey (a thread
# waking a millisecond late, then the next one on time), so two of them can
# arrive closer than one interval: against a bucket with no spare token (a
# limit of 1/s holding one) that is a 429, which costs a Retry-After pause
# and a cut rate. 1% is 10 ms at 1/s, far above a thread's wake-up jitter,
# and costs 1% of the rate.
MARGIN = 0.01


@dataclass(frozen=True)
class RateLimit:
    """At most ``rate`` requests per second, in bursts of up to ``burst``."""

    rate: float
    burst: int = 1

    @classmethod
    def every(cls, seconds: float) -> RateLimit:
        """One request per ``seconds`` (a minimum interval, no burst)."""
        return cls(1.0 / seconds)


class Limiter:
    """The pacing of one provider account: see the module docstring."""

    def __init__(self, limits: Mapping[str, RateLimit],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = dict(limits)
        self.clock = clock
        self.factor = 1.0  # share of the declared rates in force (429s lower it)
        self.paused_until = float("-inf")
        self.pauses = 0  # bumped by every 429: a sleeping flow sees it changed
        self.throttles = 0  # 429s seen (for tests, benchmarks and reports)
        self._tat: dict[str, float] = {}
        self._lock = threading.Lock()
        self.latency: float | None = None  # moving average of the answers' round trips
        # Moving averages, over the requests sent from a thread of this process
        # (Session), of a request's wall time and of the CPU its thread spent
        # on it: how much of a round trip is waiting (threads_to_overlap).
        self.sync_wall: float | None = None
        self.sync_cpu: float | None = None

    def reserve(self, kind: str) -> float:
        """Book the next slot for a request of this kind; seconds to wait for it."""
        keys = [k for k in (kind, "*") if k in self.limits]
        with self._lock:
            now = self.clock()
            start = max(now, self.paused_until)
            for k in keys:
                limit = self.limits[k]
                interval = self._interval(limit)
                tat = self._tat.get(k, now)
                start = max(start, tat - (limit.burst - 1) * interval)
            for k in keys:
                interval = self._interval(self.limits[k])
                self._tat[k] = max(self._tat.get(k, start), start) + interval
            return _whole_ms(start - now)

    def backlog(self, kind: str = "*") -> float:
        """Seconds a request of this kind booked now would wait for its slot,
        without booking one: the time a flow about to send has anyway (a
        launch spends it committing its journal write with others',
        safety/group_commit.py)."""
        keys = [k for k in (kind, "*") if k in self.limits]
        with self._lock:
            now = self.clock()
            start = max(now, self.paused_until)
            for k in keys:
                limit = self.limits[k]
                start = max(start, self._tat.get(k, now)
                            - (limit.burst - 1) * self._interval(limit))
            return start - now

    def _interval(self, limit: RateLimit) -> float:
        """Seconds between two slots of this limit now: the rate in force, with
        the pacing margin."""
        return (1.0 + MARGIN) / (limit.rate * self.factor)

    def throttled(self, delay: float, *, told: bool = False) -> None:
        """A 429: pause every flow for ``delay`` seconds; lower the rate once per
        pause. ``told``: the delay is the provider's Retry-After, not our backoff."""
        with self._lock:
            now = self.clock()
            if now >= self.paused_until:
                # A storm of 429s answering the same overload decreases once.
                self.factor = max(FLOOR, self.factor * DECREASE)
            self.paused_until = max(self.paused_until, now + delay)
            # Slots booked before the 429 were booked at a rate now known to be
            # too high: drop them; their flows book again behind the pause. The
            # provider's Retry-After is taken at its word; after our own (short)
            # backoff, the first slot is at least one lowered interval after the
            # 429, as a pause shorter than the real spacing only earns another.
            for k, limit in self.limits.items():
                interval = self._interval(limit)
                first = self.paused_until if told else max(self.paused_until, now + interval)
                self._tat[k] = first + (limit.burst - 1) * interval
            self.pauses += 1
            self.throttles += 1

    def answered(self, seconds: float | None = None) -> None:
        """Any answer but a 429: recover some of the declared rate. ``seconds``:
        how long the answer took (its round trip), for ``in_flight``."""
        if seconds is not None and seconds >= 0:
            with self._lock:
                self.latency = seconds if self.latency is None else (
                    self.latency + LATENCY_WEIGHT * (seconds - self.latency))
        if self.factor < 1.0:
            with self._lock:
                self.factor = min(1.0, self.factor + RECOVER)

    def spent(self, wall: float, cpu: float) -> None:
        """A request sent from this thread took `wall` seconds, `cpu` of them
        this thread's own work (building it, the transport, reading the
        answer). Unlocked: the GIL keeps each float whole, and a lost sample
        only moves an average a little less."""
        if self.sync_wall is None or self.sync_cpu is None:
            self.sync_wall, self.sync_cpu = wall, cpu
            return
        self.sync_wall += LATENCY_WEIGHT * (wall - self.sync_wall)
        self.sync_cpu += LATENCY_WEIGHT * (cpu - self.sync_cpu)

    def threads_to_overlap(self) -> int | None:
        """How many of this account's requests one process's threads can
        usefully have in flight with no rate to pace them: as many as fit
        their own work into one round trip. A round trip that is all this
        process's work (a transport served in-process: the sandbox, a test's
        mock) gains nothing from a second thread, only the interpreter lock
        traded between them; a network round trip is mostly waiting. None
        until a request has been timed."""
        if self.sync_wall is None or self.sync_cpu is None:
            return None
        if self.sync_cpu <= 0:  # a coarse clock (Windows: 15.6 ms) saw none
            return None
        return max(1, int(self.sync_wall / self.sync_cpu))

    def in_flight(self) -> int | None:
        """The requests this account needs in flight to send at its rate: the
        rate in force (every request books "*"; without it, the tightest kind)
        times the round trip observed, with headroom (Little's law). None when
        the provider declares no rate: nothing here says how fast it may go."""
        if not self.limits:
            return None
        limit = self.limits.get("*") or min(self.limits.values(), key=lambda r: r.rate)
        latency = self.latency if self.latency is not None else FIRST_LATENCY
        return math.ceil(limit.rate * self.factor * latency * HEADROOM) + SPARE


def _whole_ms(wait: float) -> float:
    """A wait rounded up to the millisecond: the clock read a moment after a 429
    set its pause gives Retry-After 1 as 0.99998...; round-off must not send a
    request early, and a 0.3 s wait stays 0.3 (not 0.30000000000000004). The
    booked slots stay exact, so rounding never adds up over a batch."""
    if wait <= 0:
        return 0.0
    return math.ceil(round(wait * 1000, 3)) / 1000


class LimiterRegistry:
    """The process's limiters, one per scope (provider account); see scope_of."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._by_scope: dict[Hashable, Limiter] = {}
        self._lock = threading.Lock()

    def get(self, scope: Hashable, limits: Mapping[str, RateLimit]) -> Limiter:
        with self._lock:
            limiter = self._by_scope.get(scope)
            if limiter is None or limiter.limits != dict(limits):
                # New declared limits (a sandbox knob changed) start a fresh budget.
                limiter = self._by_scope[scope] = Limiter(limits, self.clock)
            return limiter

    def clear(self) -> None:
        with self._lock:
            self._by_scope.clear()


LIMITERS = LimiterRegistry()


def account_digest(credential: Any) -> str:
    """Which account a credential is, without keeping the secret: two keys of one
    provider get two budgets, two clients with one key share one. A digest, not
    the key, so a limiter never holds a secret."""
    if credential is None:
        return ""
    secret = getattr(credential, "secret", "")
    text = secret.get_secret_value() if hasattr(secret, "get_secret_value") else str(secret)
    client_id = getattr(credential, "client_id", None) or ""
    return hashlib.sha256(f"{client_id}\0{text}".encode()).hexdigest()[:16]


def limiter_for(provider: Any, registry: LimiterRegistry | None = None) -> Limiter:
    """The limiter every Session/AsyncSession of this provider account shares."""
    return (registry or LIMITERS).get(provider.rate_scope(), provider.limits())
