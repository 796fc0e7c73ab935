"""A batch's launches in flight follow Little's law when the caller gives no
number: the account's rate in force times the round trip observed, with
headroom; the runners ask the bound again as each sub-operation starts."""

from __future__ import annotations

import asyncio
import math
import threading
import time

from gpucloud.core import concurrency
from gpucloud.core.concurrency import (
    MAX_IN_FLIGHT, UNPACED, gather_width, in_flight_cap, launch_limit,
)
from gpucloud.core.context import ClientContext
from gpucloud.core.flow import Sleep
from gpucloud.core.instructions import DEFAULT_CONCURRENCY, Call, Concurrent, Gather
from gpucloud.core.runners import AsyncRunner, ThreadedRunner
from gpucloud.transport.ratelimit import (
    DECREASE, FIRST_LATENCY, HEADROOM, SPARE, Limiter, RateLimit, limiter_for,
)


def test_in_flight_is_the_rate_times_the_observed_round_trip():
    limiter = Limiter({"*": RateLimit(200)})
    # Nothing timed yet: a first guess that starts wide.
    assert limiter.in_flight() == math.ceil(200 * FIRST_LATENCY * HEADROOM) + SPARE
    for _ in range(50):
        limiter.answered(0.05)
    assert limiter.in_flight() == math.ceil(200 * 0.05 * HEADROOM) + SPARE == 17
    for _ in range(50):
        limiter.answered(0.5)  # the latency moved: so does the bound
    assert limiter.in_flight() == math.ceil(200 * 0.5 * HEADROOM) + SPARE
    limiter.throttled(1.0)  # a 429 lowers the rate in force, and the bound with it
    assert limiter.in_flight() == math.ceil(200 * DECREASE * 0.5 * HEADROOM) + SPARE


def test_the_cap_keeps_a_socket_each_within_half_the_open_file_limit(monkeypatch):
    import resource

    for soft, cap in ((256, 128), (1024, MAX_IN_FLIGHT), (10, 8),
                      (resource.RLIM_INFINITY, MAX_IN_FLIGHT)):
        monkeypatch.setattr(resource, "getrlimit", lambda which, soft=soft: (soft, soft))
        concurrency.in_flight_cap.cache_clear()
        assert in_flight_cap() == cap
    concurrency.in_flight_cap.cache_clear()


def test_a_provider_without_a_declared_rate_has_no_bound_from_it():
    assert Limiter({}).in_flight() is None


def test_the_batch_bound_sums_the_providers_and_stays_under_the_caps(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_RATE_LIMIT", "5000")
    ctx = ClientContext(["sandbox"], None, None, False)
    limiter = limiter_for(ctx.adapter("sandbox"))
    limit = launch_limit(ctx, ["sandbox", "sandbox"])
    limiter.answered(0.001)
    assert limit() == limiter.in_flight()  # one provider, named twice, counted once
    for _ in range(100):
        limiter.answered(2.0)  # 5000/s at 2 s: far over the memory cap
    assert limit() == in_flight_cap() <= MAX_IN_FLIGHT
    monkeypatch.setattr(type(ctx.adapter("sandbox")), "max_in_flight", 20)
    assert launch_limit(ctx, ["sandbox"])() == 20  # the provider's stated bound wins
    monkeypatch.delenv("GPUCLOUD_SANDBOX_RATE_LIMIT")
    unpaced = ClientContext(["sandbox"], None, None, False)
    assert launch_limit(unpaced, ["sandbox"])() == UNPACED


def _ops(count: int, peak: list[int], lock: threading.Lock, live: list[int]):
    def op():
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        yield from ()
        time.sleep(0.02)
        with lock:
            live[0] -= 1
        return "done"
    return [op() for _ in range(count)]


def test_the_threaded_runner_asks_the_bound_before_each_start():
    asked: list[int] = []

    def bound() -> int:
        asked.append(1)
        return 2 if len(asked) < 6 else 5  # narrow first, then wider

    peak, live, lock = [0], [0], threading.Lock()
    runner = ThreadedRunner(ClientContext(["sandbox"], None, None, False), time.sleep)
    results = runner.run(_wrap(Concurrent(_ops(30, peak, lock, live), limit=bound)))
    assert results == ["done"] * 30
    assert len(asked) >= 30 and 2 < peak[0] <= 5


def test_the_async_runner_asks_the_bound_too():
    asked: list[int] = []

    def bound() -> int:
        asked.append(1)
        return 3

    live, peak = [0], [0]

    def op():
        live[0] += 1
        peak[0] = max(peak[0], live[0])
        yield Sleep(0.01)
        live[0] -= 1
        return "done"

    runner = AsyncRunner(ClientContext(["sandbox"], None, None, False), _async_pause)
    results = asyncio.run(runner.run(_wrap(Concurrent([op() for _ in range(12)], limit=bound))))
    assert results == ["done"] * 12 and peak[0] == 3 and len(asked) >= 12


async def _async_pause(_seconds: float) -> None:
    await asyncio.sleep(0.01)


def _wrap(item: Concurrent):
    def outer():
        return (yield item)
    return outer()


def test_threads_to_overlap_is_the_round_trip_over_this_threads_own_work():
    limiter = Limiter({})
    assert limiter.threads_to_overlap() is None  # nothing timed yet
    limiter.spent(0.0004, 0.0004)  # served in-process: all of it this thread's work
    assert limiter.threads_to_overlap() == 1
    for _ in range(60):
        limiter.spent(0.050, 0.0005)  # a network round trip: mostly waiting
    assert limiter.threads_to_overlap() >= 50
    coarse = Limiter({})
    coarse.spent(0.0004, 0.0)  # a clock too coarse to see the work: not a measure
    assert coarse.threads_to_overlap() is None


def test_a_gather_is_as_wide_as_its_accounts_round_trips_overlap():
    in_process, network, untimed = Limiter({}), Limiter({}), Limiter({})
    in_process.spent(0.0003, 0.0003)
    network.spent(0.2, 0.001)
    assert gather_width([in_process]) == 1
    assert gather_width([in_process, in_process]) == 2  # one thread per account
    assert gather_width([untimed]) == DEFAULT_CONCURRENCY
    assert gather_width([network, in_process]) == DEFAULT_CONCURRENCY  # the cap


def _thread_of():
    yield from ()
    return threading.get_ident()


def test_a_gather_over_an_in_process_round_trip_runs_in_the_callers_thread():
    runner = ThreadedRunner(ClientContext(["sandbox"], None, None, False), time.sleep)
    runner.session("sandbox").limiter.spent(0.0003, 0.0003)  # timed: all own work
    results = runner.run(_wrap(Gather([Call("sandbox", _thread_of()) for _ in range(6)])))
    assert results == [threading.get_ident()] * 6


def test_a_gather_over_round_trips_that_wait_still_runs_at_once():
    runner = ThreadedRunner(ClientContext(["sandbox"], None, None, False), time.sleep)
    runner.session("sandbox").limiter.spent(0.05, 0.0005)
    meet = threading.Barrier(3, timeout=10)  # passed only by three calls in flight at once

    def waits():
        yield from ()
        return meet.wait()

    results = runner.run(_wrap(Gather([Call("sandbox", waits()) for _ in range(3)])))
    assert sorted(results) == [0, 1, 2]


def test_a_session_times_its_round_trips_and_this_threads_work_in_them(monkeypatch):
    from gpucloud.transport.http import Session

    monkeypatch.setenv("GPUCLOUD_SANDBOX_LATENCY_MS", "30")  # a wait, not work
    ctx = ClientContext(["sandbox"], None, None, False)
    session = Session(ctx.adapter("sandbox"))
    try:
        session.run(ctx.adapter("sandbox").list_page())
    finally:
        session.close()
    limiter = session.limiter
    assert limiter.sync_wall is not None and limiter.sync_cpu is not None
    assert 0 < limiter.sync_cpu <= limiter.sync_wall and limiter.sync_wall >= 0.03
    assert (limiter.threads_to_overlap() or 0) >= 2


def test_operations_beside_a_bound_at_the_cap_take_no_launch_slot(monkeypatch):
    """A batch's listings run beside its launches the whole time: with the
    bound worked out and at the cap, the pool is that much wider, so every
    launch the bound allows runs at once beside them."""
    monkeypatch.setattr(concurrency, "in_flight_cap", lambda: 4)
    runner = ThreadedRunner(ClientContext(["sandbox"], None, None, False), time.sleep)
    meet = threading.Barrier(6, timeout=5)  # 2 beside + 4 launches, all in flight at once

    def waits():
        yield from ()
        return meet.wait()

    results = runner.run(_wrap(Concurrent([waits() for _ in range(6)], limit=lambda: 6,
                                          beside=2)))
    assert sorted(results) == [0, 1, 2, 3, 4, 5]
