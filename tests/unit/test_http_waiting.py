"""A request that has not answered shows a "waiting" line long before any timeout,
sync and async; one that answers in time shows nothing. The threshold is made
short here so the tests stay fast; in use it is _http.WAIT_NOTICE_AFTER (2 s)."""

from __future__ import annotations

import asyncio
import logging
import threading

import httpx
import pytest

from gpucloud.transport import http as _http

URL = "https://cloud.lambda.ai/api/v1/instance-types"
LINE = "waiting for lambda (GET /api/v1/instance-types): no answer after 0.05 s\u2026"


class Blocking(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Answers 200 only once the test releases it (or at once when not `hang`)."""

    def __init__(self, hang: bool = True) -> None:
        self.release = threading.Event()
        self.hang = hang
        if not hang:
            self.release.set()

    def handle_request(self, request):
        assert self.release.wait(10), "the test never released the request"
        return httpx.Response(200, json={}, request=request)

    async def handle_async_request(self, request):
        while not self.release.is_set():
            await asyncio.sleep(0.01)
        return httpx.Response(200, json={}, request=request)


class Provider:
    name = "lambda"

    def limits(self):
        return {}

    def rate_scope(self):
        return (self.name, "https://example.invalid", "")

    def __init__(self, transport):
        self._transport = transport

    def transport(self):
        return self._transport

    def async_transport(self):
        return self._transport

    def auth(self):
        return None


def flow():
    response = yield httpx.Request("GET", URL)
    return response.status_code


class Waiting(logging.Handler):
    """Collects the waiting lines, and notes whether each came while the request hung."""

    def __init__(self, transport):
        super().__init__(logging.INFO)
        self.transport = transport
        self.lines: list[tuple[str, bool, bool]] = []
        self.seen = threading.Event()

    def emit(self, record):
        self.lines.append((record.getMessage(), not self.transport.release.is_set(),
                           getattr(record, "retry", False)))
        self.seen.set()


@pytest.fixture
def watch():
    logger = logging.getLogger("gpucloud.http")
    saved = logger.level
    logger.setLevel(logging.INFO)
    handlers = []

    def attach(transport):
        handler = Waiting(transport)
        logger.addHandler(handler)
        handlers.append(handler)
        return handler
    yield attach
    for handler in handlers:
        logger.removeHandler(handler)
    logger.setLevel(saved)


def test_a_hanging_request_logs_a_waiting_line_before_it_answers(watch):
    transport = Blocking()
    handler = watch(transport)
    session = _http.Session(Provider(transport), notice_after=0.05)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(session.run(flow())))
    worker.start()
    try:
        assert handler.seen.wait(5), "no waiting line while the request hung"
    finally:
        transport.release.set()
        worker.join(10)
    assert result == [200]
    # once, while the request still hung, marked for the CLI's progress handler
    assert handler.lines == [(LINE, True, True)]
    session.close()


def test_a_request_that_answers_in_time_logs_nothing(watch):
    transport = Blocking(hang=False)
    handler = watch(transport)
    session = _http.Session(Provider(transport), notice_after=0.05)
    assert session.run(flow()) == 200
    assert not handler.seen.wait(0.2)  # the timer was cancelled, not just late
    session.close()


def test_async_a_hanging_request_logs_a_waiting_line_before_it_answers(watch):
    transport = Blocking()
    handler = watch(transport)

    async def main():
        session = _http.AsyncSession(Provider(transport), notice_after=0.05)
        task = asyncio.ensure_future(session.run(flow()))
        for _ in range(500):
            if handler.lines:
                break
            await asyncio.sleep(0.01)
        transport.release.set()
        status = await task
        await session.aclose()
        return status

    assert asyncio.run(main()) == 200
    assert handler.lines == [(LINE, True, True)]


def test_async_a_request_that_answers_in_time_logs_nothing(watch):
    transport = Blocking(hang=False)
    handler = watch(transport)

    async def main():
        session = _http.AsyncSession(Provider(transport), notice_after=0.05)
        status = await session.run(flow())
        await asyncio.sleep(0.2)
        await session.aclose()
        return status

    assert asyncio.run(main()) == 200
    assert handler.lines == []


def test_the_line_is_info_so_the_sdk_stays_silent_by_default(watch):
    """Python's default (last resort) handler shows WARNING and above only."""
    transport = Blocking()
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)
            transport.release.set()

    keep = Keep()
    logging.getLogger("gpucloud.http").addHandler(keep)
    watch(transport)  # sets the level to INFO for the test, removed afterwards
    try:
        assert _http.Session(Provider(transport), notice_after=0.05).run(flow()) == 200
    finally:
        logging.getLogger("gpucloud.http").removeHandler(keep)
    assert [r.levelno for r in records] == [logging.INFO]


def test_the_default_threshold_is_two_seconds():
    assert _http.WAIT_NOTICE_AFTER == 2.0
    assert _http.Session(Provider(Blocking(hang=False))).notice_after == 2.0


def test_requests_that_answer_in_time_do_not_wake_the_watchdog_each():
    """A stream of requests answered before their notice is due costs the
    watchdog thread nothing: woken per request, it would cost a thread switch
    each (more than a fast request's own work)."""
    import time

    dog = _http._Watchdog()
    waits: list[float | None] = []  # each time the thread goes to sleep
    real_wait = dog._wake.wait
    dog._wake.wait = lambda timeout=None: (waits.append(timeout), real_wait(timeout))[1]
    fired: list[int] = []
    for i in range(30):
        token = dog.watch(60.0, lambda i=i: fired.append(i))
        dog.cancel(token)
        time.sleep(0.005)  # the thread runs in between, as it would during a request
    assert fired == []
    assert len(waits) <= 2


def test_a_watchdog_idle_for_a_while_is_not_woken_for_each_request_after():
    """As above, once the thread has gone to sleep for good (a period with
    nothing watched): the next request wakes it, the ones after do not."""
    import time

    dog = _http._Watchdog()
    waits: list[float | None] = []
    real_wait = dog._wake.wait
    dog._wake.wait = lambda timeout=None: (waits.append(timeout), real_wait(timeout))[1]
    started = time.monotonic()
    for _ in range(60):  # notices due after 0.25 s: a few such periods go by
        dog.cancel(dog.watch(0.25, lambda: None))
        time.sleep(0.01)
    periods = (time.monotonic() - started) / 0.25
    # About two waits per period (one idle period, then for good); about one per
    # request once the first period is over, when each new notice woke it.
    assert len(waits) <= 2 * periods + 4


def test_a_shorter_notice_still_wakes_the_watchdog_in_time():
    """Guard for the test above: a notice due before the thread would wake by
    itself (its long idle wait) is still given on time."""
    import time

    dog = _http._Watchdog()
    dog.cancel(dog.watch(60.0, lambda: None))
    time.sleep(0.05)  # the thread now waits out a 60 s idle period
    fired = threading.Event()
    started = time.monotonic()
    dog.watch(0.05, lambda: fired.set())
    assert fired.wait(5)
    assert time.monotonic() - started < 2
