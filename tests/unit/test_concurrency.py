"""A batch's launches in flight follow Little's law when the caller gives no
number: the account's rate in force times the round trip observed, with
headroom; the runners ask the bound again as each sub-operation starts."""

from __future__ import annotations

import asyncio
import math
import threading
import time

from gpucloud.core.concurrency import MAX_IN_FLIGHT, UNPACED, launch_limit
from gpucloud.core.context import ClientContext
from gpucloud.core.flow import Sleep
from gpucloud.core.instructions import Concurrent
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
    assert limit() == MAX_IN_FLIGHT
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
