"""The retry policy, stepped by hand: no HTTP, no sleeping."""

import httpx
import pytest

from gpucloud.transport.http import RetryPolicy, run_flow, with_policy
from gpucloud.providers.base import KIND_EXTENSION
from gpucloud.errors import APITimeoutError
from gpucloud.transport.ratelimit import MARGIN, Limiter, RateLimit


def one_request(kind, method="POST"):
    def flow():
        response = yield httpx.Request(method, "https://example.invalid/x",
                                       extensions={KIND_EXTENSION: kind})
        return response.status_code
    return flow()


def drive(flow, outcomes):
    """Feed scripted outcomes (status codes or exceptions); record what was sent/slept."""
    sent, slept = [], []
    script = iter(outcomes)

    def send(request):
        sent.append(request)
        outcome = next(script)
        if isinstance(outcome, Exception):
            raise outcome
        return httpx.Response(outcome[0], headers=outcome[1], request=request) \
            if isinstance(outcome, tuple) else httpx.Response(outcome, request=request)

    # A clock that stands still: a 429's pause is exactly its Retry-After.
    limiter = Limiter({}, clock=lambda: 100.0)
    wrapped = with_policy("test", flow, limiter, RetryPolicy(max_retries=3))
    return run_flow(wrapped, send, slept.append), sent, slept


def test_launch_is_never_resent_after_a_5xx():
    status, sent, _ = drive(one_request("launch"), [500, 200])
    assert status == 500 and len(sent) == 1


def test_launch_read_timeout_is_ambiguous_and_not_resent():
    req = httpx.Request("POST", "https://example.invalid/x")
    with pytest.raises(APITimeoutError) as info:
        drive(one_request("launch"), [httpx.ReadTimeout("slow", request=req), 200])
    assert info.value.sent is True


def test_launch_connect_error_is_resent_because_it_never_left():
    req = httpx.Request("POST", "https://example.invalid/x")
    status, sent, _ = drive(one_request("launch"),
                            [httpx.ConnectError("refused", request=req), 201])
    assert status == 201 and len(sent) == 2


def test_launch_that_never_got_a_connection_is_resent_because_it_never_left():
    """httpx's PoolTimeout: no connection came free in time, nothing was written."""
    req = httpx.Request("POST", "https://example.invalid/x")
    status, sent, _ = drive(one_request("launch"),
                            [httpx.PoolTimeout("no connection", request=req), 201])
    assert status == 201 and len(sent) == 2


def test_429_honours_retry_after_for_any_kind():
    status, sent, slept = drive(one_request("launch"), [(429, {"Retry-After": "7"}), 200])
    assert status == 200 and len(sent) == 2 and slept == [7.0]


def test_reads_retry_5xx_with_bounded_backoff():
    status, sent, slept = drive(one_request("read", "GET"), [503, 502, 503, 503, 200])
    assert status == 503 and len(sent) == 4  # 1 + max_retries, then the error surfaces
    assert len(slept) == 3 and all(0 < s <= 30 for s in slept)


def test_rate_limiter_spaces_requests():
    now = [100.0]
    limiter = Limiter({"launch": RateLimit.every(12.0), "*": RateLimit(1.0)},
                      clock=lambda: now[0])
    assert limiter.reserve("launch") == 0
    # Each slot is MARGIN (1%) wider than the declared interval (ratelimit.py).
    assert limiter.reserve("launch") == pytest.approx(12.0 * (1 + MARGIN), abs=1e-3)
    # The second launch was booked at +12 s; any request keeps 1 s from it.
    assert limiter.reserve("read") == pytest.approx(13.0 * (1 + MARGIN), abs=1e-3)
    now[0] += 60
    assert limiter.reserve("launch") == 0


@pytest.mark.parametrize("header", ["soon", "", "Wed, 99 Foo 2026"])
def test_unreadable_retry_after_falls_back_to_backoff(header):
    status, sent, slept = drive(one_request("read", "GET"), [(429, {"Retry-After": header}), 200])
    assert status == 200 and len(sent) == 2 and 0 < slept[0] <= 30


def test_the_policy_reads_the_kind_the_adapters_write():
    # The transport names the extension for itself (it never imports a provider);
    # the adapters' base class writes the same one.
    from gpucloud.transport import http

    assert http.KIND_EXTENSION == KIND_EXTENSION
    request = httpx.Request("POST", "https://example.invalid/x",
                            extensions={KIND_EXTENSION: "launch"})
    assert http.request_kind(request) == "launch"
