"""The shared, adaptive request limiter (ratelimit.py) and how the driver uses it:
the limiter on a fake clock, and concurrent flows run through the real
with_policy by a small virtual-time scheduler (no real waits)."""

from __future__ import annotations

import dataclasses
import heapq
import random
from decimal import Decimal

import httpx
import pytest
from pydantic import SecretStr

from gpucloud.transport.http import RetryPolicy, with_policy
from gpucloud.providers.base import KIND_EXTENSION, Sleep
from gpucloud.providers.lambdalabs.adapter import LambdaProvider
from gpucloud.catalog.bundled import InstanceType, ProviderCatalog
from gpucloud.config.credentials import Credential
from gpucloud.transport.ratelimit import (
    DECREASE,
    FLOOR,
    MARGIN,
    RECOVER,
    Limiter,
    LimiterRegistry,
    RateLimit,
    limiter_for,
)


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# -- the limiter ------------------------------------------------------------------------

# Slots are booked MARGIN wider than the rate (ratelimit.py: requests sent on
# exact slots can arrive closer than one interval): W times each interval.
W = 1 + MARGIN


def widened(*seconds: float) -> list[object]:
    """The waits for slots `seconds` apart at the declared rate, as reserve
    gives them (whole milliseconds)."""
    return [pytest.approx(s * W, abs=1e-3) for s in seconds]


def test_burst_then_steady_rate():
    limiter = Limiter({"*": RateLimit(10, burst=5)}, Clock())
    assert [limiter.reserve("read") for _ in range(8)] == widened(0, 0, 0, 0, 0, 0.1, 0.2, 0.3)


def test_idle_time_refills_the_burst_but_never_beyond_it():
    clock = Clock()
    limiter = Limiter({"*": RateLimit(10, burst=2)}, clock)
    assert [limiter.reserve("read") for _ in range(3)] == widened(0, 0, 0.1)
    clock.t += 60
    assert [limiter.reserve("read") for _ in range(3)] == widened(0, 0, 0.1)


def test_a_429_pauses_every_kind_and_cuts_the_rate_once_per_pause():
    clock = Clock()
    limiter = Limiter({"*": RateLimit(0.5)}, clock)
    assert limiter.reserve("read") == 0
    limiter.throttled(5)
    limiter.throttled(4)  # a storm of 429s answering one overload
    assert limiter.factor == DECREASE and limiter.throttles == 2
    assert limiter.reserve("launch") == 5.0  # every kind waits out the pause
    # then one per 2 s / DECREASE, no longer one per 2 s
    assert limiter.reserve("read") == pytest.approx(5 + 2 * W / DECREASE, abs=1e-3)
    clock.t = 1100
    limiter.throttled(1, told=True)  # the rate was still too high: cut again
    assert limiter.factor == pytest.approx(DECREASE ** 2)
    assert limiter.reserve("read") == 1.0  # the provider's Retry-After, at its word


def test_after_our_own_backoff_the_next_slot_keeps_the_lowered_interval():
    clock = Clock()
    limiter = Limiter({"*": RateLimit(0.5)}, clock)
    limiter.throttled(0.3)  # no Retry-After: a short backoff
    # One lowered interval after the 429, not merely after the 0.3 s pause: a
    # pause shorter than the real spacing would only earn another 429.
    assert limiter.reserve("read") == pytest.approx(2 * W / DECREASE, abs=1e-3)


def test_the_rate_recovers_slowly_and_never_falls_below_the_floor():
    clock = Clock()
    limiter = Limiter({"*": RateLimit(1.0)}, clock)
    for _ in range(20):
        clock.t += 100
        limiter.throttled(0)
    assert limiter.factor == FLOOR
    limiter.factor = 0.5
    steps = round(0.5 / RECOVER)
    for _ in range(steps - 1):
        limiter.answered()
    assert limiter.factor < 1.0
    limiter.answered()
    assert limiter.factor == pytest.approx(1.0)
    limiter.answered()
    assert limiter.factor == 1.0


def test_without_declared_limits_only_a_429_makes_anyone_wait():
    limiter = Limiter({}, Clock())
    assert [limiter.reserve("launch") for _ in range(5)] == [0] * 5
    limiter.throttled(3)
    assert limiter.reserve("read") == 3.0


# -- one limiter per provider account ---------------------------------------------------

CATALOG = ProviderCatalog(
    name="lambda", display_name="Lambda Cloud", api_base="https://cloud.lambda.ai",
    instance_types=(InstanceType(name="gpu_1x_a10", gpu="A10", gpu_count=1,
                                 regions=("us-west-1",), price=Decimal("0.75")),))


def lambda_with(key: str, catalog: ProviderCatalog = CATALOG) -> LambdaProvider:
    return LambdaProvider(catalog, Credential("lambda", SecretStr(key), "argument"))


def test_one_limiter_per_account_shared_by_every_session():
    registry = LimiterRegistry()
    shared = limiter_for(lambda_with("key-one"), registry)
    assert limiter_for(lambda_with("key-one"), registry) is shared
    assert limiter_for(lambda_with("key-two"), registry) is not shared
    staging = dataclasses.replace(CATALOG, api_base="https://staging.lambda.invalid")
    assert limiter_for(lambda_with("key-one", staging), registry) is not shared


def test_the_scope_names_the_account_without_its_key():
    scope = lambda_with("key-one-SECRET").rate_scope()
    assert scope[:2] == ("lambda", "https://cloud.lambda.ai")
    assert "SECRET" not in repr(scope) and len(scope[2]) == 16


def test_lambda_declares_its_published_limits():
    limits = LambdaProvider.rate_limits
    assert limits["*"] == RateLimit(1.0) and limits["launch"].rate == pytest.approx(1 / 12)


# -- concurrent flows in virtual time -----------------------------------------------------


def one_request(kind: str, method: str = "GET"):
    def flow():
        response = yield httpx.Request(method, "https://example.invalid/x",
                                       extensions={KIND_EXTENSION: kind})
        return response.status_code
    return flow()


def simulate(flows, server, clock: Clock):
    """Run flows concurrently in virtual time, as asyncio tasks would run: a Sleep
    wakes its flow later, a request is answered at once by server(request)."""
    queue = [(clock.t, i, i, None) for i in range(len(flows))]
    heapq.heapify(queue)
    seq, results = len(flows), {}
    while queue:
        t, _, i, value = heapq.heappop(queue)
        clock.t = t
        try:
            item = flows[i].send(value)
        except StopIteration as stop:
            results[i] = stop.value
            continue
        seq += 1
        if isinstance(item, Sleep):
            heapq.heappush(queue, (t + item.seconds, seq, i, None))
        else:
            heapq.heappush(queue, (t, seq, i, server(item)))
    return [results[i] for i in range(len(flows))]


def test_a_429_pauses_the_flows_that_did_not_get_it():
    clock = Clock()
    limiter = Limiter({"*": RateLimit(1.0)}, clock)
    sent: list[float] = []

    def server(request):
        sent.append(clock.t)
        if len(sent) == 3:  # the third request, at t=1002, is refused for 3 s
            return httpx.Response(429, headers={"Retry-After": "3"}, request=request)
        return httpx.Response(200, request=request)

    flows = [with_policy("test", one_request("read"), limiter) for _ in range(8)]
    assert simulate(flows, server, clock) == [200] * 8
    assert len(sent) == 9 and sent[:3] == [1000, 1000 + W, pytest.approx(1000 + 2 * W)]
    # The flows booked for the next two slots were asleep when the 429 came: they
    # wait too, until the 3 s pause is over.
    assert not [t for t in sent if sent[2] < t < sent[2] + 3]
    assert all(b - a >= 1 for a, b in zip(sent, sent[1:]))
    assert limiter.throttles == 1 and limiter.factor < 1


def test_a_limit_tighter_than_declared_slows_everyone_to_it(monkeypatch):
    """Declared 1/s; the provider really allows 0.5/s and sends no Retry-After
    (Vast.ai): the 429s cut the rate, so the batch runs near the real limit
    instead of collecting a 429 for every other request."""
    random.seed(7)  # the backoff's jitter
    clock = Clock()
    limiter = Limiter({"*": RateLimit(1.0)}, clock)
    accepted: list[float] = []
    refused: list[float] = []

    def server(request):  # a real limit of one request per 2 s
        if accepted and clock.t - accepted[-1] < 2.0:
            refused.append(clock.t)
            return httpx.Response(429, request=request)
        accepted.append(clock.t)
        return httpx.Response(200, request=request)

    n = 40
    policy = RetryPolicy(max_retries=6)
    flows = [with_policy("test", one_request("read"), limiter, policy) for _ in range(n)]
    assert simulate(flows, server, clock) == [200] * n
    elapsed = accepted[-1] - 1000
    assert elapsed <= 1.3 * (n - 1) * 2.0  # close to the real bound (N-1) x 2 s
    assert len(refused) <= n // 8, f"{len(refused)} 429s for {n} requests"


def test_lambda_launches_keep_12_s_apart_across_concurrent_creates():
    clock = Clock()
    limiter = Limiter(LambdaProvider.rate_limits, clock)
    sent: list[tuple[float, str]] = []

    def server(request):
        sent.append((clock.t, request.extensions[KIND_EXTENSION]))
        return httpx.Response(200, request=request)

    flows = [with_policy("lambda", one_request(kind, "POST"), limiter)
             for kind in ["launch", "read", "launch", "read", "launch", "launch"]]
    simulate(flows, server, clock)
    launches = [t for t, kind in sent if kind == "launch"]
    assert launches == pytest.approx([1000, 1000 + 12 * W, 1000 + 24 * W, 1000 + 36 * W])
    times = sorted(t for t, _ in sent)
    assert all(b - a >= 1 for a, b in zip(times, times[1:]))


def test_a_millisecond_of_jitter_against_a_one_token_bucket_costs_no_429():
    """Declared 1/s, and the provider's bucket holds one token (the sandbox's,
    at 1/s). Each request reaches it a little after it was sent: 1 ms late, then
    on time, alternately (a thread woken late, the next one not). Paced on exact
    slots, the on-time request arrives 0.999 s after the late one: a 429, a
    Retry-After pause and a cut rate. The pacing margin keeps every one apart."""
    from gpucloud.providers.sandbox.transport import TokenBucket

    clock = Clock()
    arrival = {"t": clock.t}
    bucket = TokenBucket(1.0, clock=lambda: arrival["t"])
    limiter = Limiter({"*": RateLimit(1.0)}, clock)
    statuses: list[int] = []

    def server(request):
        arrival["t"] = clock.t + (0.001 if len(statuses) % 2 == 0 else 0.0)
        status = 429 if bucket.take() else 200
        statuses.append(status)
        headers = {"Retry-After": "1"} if status == 429 else {}
        return httpx.Response(status, headers=headers, request=request)

    n = 12
    flows = [with_policy("test", one_request("read"), limiter) for _ in range(n)]
    assert simulate(flows, server, clock) == [200] * n
    assert statuses == [200] * n and limiter.factor == 1.0
    assert clock.t - 1000 <= (n - 1) * W + 1e-6  # the margin is all it costs
