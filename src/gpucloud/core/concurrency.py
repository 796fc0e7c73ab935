"""How many launches a batch keeps in flight when the caller does not say.

Little's law: to launch at the rate a provider allows, a batch needs that rate
times the time one request takes in flight. Each launch has at most one
request out at a time, so the launches in flight are the requests in flight
the provider account's limiter asks for (``Limiter.in_flight``: the declared
rate in force times the round trip it has timed, with headroom). A fixed
number cannot do it: 8 launches at 50 ms never pass 160 requests a second,
and at 5 ms most of them only wait for their slot.

The bound is asked again each time a launch may start, so it follows the
latency as it is observed (the plan's offer lookup times the first answers)
and a rate lowered by 429s. It is bounded by the provider's own stated bound
on requests in flight (``Provider.max_in_flight``) and by ``in_flight_cap()``:
``MAX_IN_FLIGHT``, a memory cap (a thread each in Client), or half the
process's open-file limit where that is lower (each request in flight holds
a socket of its own, transport/pool.py: macOS starts a shell at 256). A
provider that declares no rate gets ``UNPACED``: its 429s pace it, and
nothing says how much wider it could go. An explicit ``concurrency`` still
overrides all of this.

A ``Gather`` (a pass's reads and deletes, one listing per provider) is
bounded by ``gather_width``: threads only overlap waiting, so an account
whose round trips are all this process's own work (measured:
``Limiter.threads_to_overlap``) gets one, and each other account as many as
overlap its round trips, at most ``DEFAULT_CONCURRENCY`` in all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from gpucloud.core.instructions import DEFAULT_CONCURRENCY

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.transport.ratelimit import Limiter

MAX_IN_FLIGHT = 512
UNPACED = DEFAULT_CONCURRENCY


@functools.cache
def in_flight_cap() -> int:
    """The most launches a batch keeps in flight by default (see above)."""
    try:
        import resource
    except ImportError:  # Windows: sockets are not counted against a file limit
        return MAX_IN_FLIGHT
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_IN_FLIGHT
    return max(DEFAULT_CONCURRENCY, min(MAX_IN_FLIGHT, soft // 2))


def launch_limit(ctx: ClientContext, providers: Iterable[str]) -> Callable[[], int]:
    """The bound on launches in flight across `providers` (those a batch
    launches on), as a function asked before each launch starts."""
    names = list(dict.fromkeys(providers))
    accounts: list[tuple[Limiter, int | None]] = []

    def limit() -> int:
        from gpucloud.transport.ratelimit import limiter_for

        if not accounts:  # the adapters and their limiters, once
            for name in names:
                adapter = ctx.adapter(name)
                accounts.append((limiter_for(adapter), adapter.max_in_flight))
        total = 0
        for limiter, stated in accounts:
            wanted = limiter.in_flight()
            wanted = UNPACED if wanted is None else wanted
            total += wanted if stated is None else min(wanted, stated)
        return max(1, min(in_flight_cap(), total))

    return limit


def gather_width(limiters: Iterable[Limiter]) -> int:
    """Threads for one Gather over the accounts of `limiters` (one each):
    what each account's measured round trips overlap, DEFAULT_CONCURRENCY for
    one not timed yet, at most DEFAULT_CONCURRENCY in all. A reap pass's 500
    reads and deletes against the in-process sandbox (bench/reap.py) took
    the whole `gpucloud reap` about 0.8 s of CPU in 8 threads against 0.65 s
    in one: the threads only traded the interpreter lock at each SQLite call."""
    total = 0
    for limiter in limiters:
        overlap = limiter.threads_to_overlap()
        total += DEFAULT_CONCURRENCY if overlap is None else overlap
        if total >= DEFAULT_CONCURRENCY:
            return DEFAULT_CONCURRENCY
    return max(1, total)


__all__ = ["MAX_IN_FLIGHT", "UNPACED", "gather_width", "in_flight_cap", "launch_limit"]
