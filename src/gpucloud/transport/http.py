"""The engine's HTTP policy, written once for every provider.

Retry policy (the same for sync and async):

* A request that provably never left (connect error, connect timeout, no
  pooled connection in time) is retried, whatever it is.
* 429 is retried after ``Retry-After`` (or exponential backoff with jitter):
  the provider refused the request without acting on it.
* 5xx and read timeouts are retried only for ``read`` and ``idempotent``
  requests. A ``launch`` that may have reached the server is never re-sent:
  the error surfaces (``APITimeoutError(sent=True)`` or the 5xx) and
  Client.create reconciles by launch id instead, because a duplicate POST is
  a second billed machine.
* Each provider's declared limits (Lambda: launch 1 per 12 s, 1 per second
  overall) are kept by waiting before sending, so a batch is paced rather
  than rejected. The limiter is shared by every Session and AsyncSession of
  one provider account in the process (ratelimit.py): a 429 pauses all of
  their flows until its Retry-After and lowers the rate for a while.

Nothing here sleeps or sends by itself: ``with_policy`` is a generator, and
``run_flow`` / ``arun_flow`` (the only sync/async twins) carry out what it
yields. Logs show method, URL path, status and timing; never headers.

A request that has not answered after ``WAIT_NOTICE_AFTER`` seconds logs one
"waiting for ..." line (INFO, marked like the retry lines, so the CLI prints
it in text mode and the SDK stays silent by default): a connect that hangs
is visibly a wait long before the 10 s connect timeout. A watch rather than a
shorter timeout, because a slow but working provider must not be cut off.
"""

from __future__ import annotations

import heapq
import http.cookiejar
import itertools
import logging
import math
import random
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

# re-exported: the loop lives where no httpx is needed
from gpucloud.core.drive import adrive, drive
from gpucloud.core.flow import Flow, Sleep
from gpucloud.errors import APIResponseValidationError, GpuCloudError
from gpucloud.transport.errors import retry_after, transport_error
from gpucloud.transport.pool import LIMITS, async_session_transport, session_transport
from gpucloud.transport.ratelimit import Limiter, limiter_for

log = logging.getLogger("gpucloud.http")
# What parsing a malformed reply raises inside an adapter (pydantic's
# ValidationError is a ValueError; InvalidOperation an ArithmeticError).
UNEXPECTED_SHAPE = (ValueError, TypeError, LookupError, AttributeError, ArithmeticError,
                    RecursionError)
T = TypeVar("T")
# The request extension that says how a request may be retried ("read",
# "idempotent", "launch", "unsafe"): an adapter sets it, the policy below reads
# it. Named here, below the providers, because the transport never imports them.
KIND_EXTENSION = "gpucloud_kind"


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 120.0

    def backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max, self.backoff_base * (2.0 ** attempt))
        return delay * (0.5 + random.random() / 2)  # jitter: 50-100 %


DEFAULT_POLICY = RetryPolicy()


def request_kind(request: httpx.Request) -> str:
    # httpx types its extensions as Any; the adapters put a kind's name here.
    kind: str = request.extensions.get(KIND_EXTENSION,
                                       "read" if request.method == "GET" else "unsafe")
    return kind


def with_policy(
    provider: str,
    flow: Flow[T],
    limiter: Limiter,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> Flow[T]:
    """Wrap an adapter flow with pacing, retries and error translation.

    Yields Requests and Sleeps to the driver; the driver sends back a
    Response, or throws the transport exception it caught.
    """
    value: Any = None
    error: BaseException | None = None
    last: httpx.Response | None = None
    while True:
        try:
            item = flow.throw(error) if error is not None else flow.send(value)
        except StopIteration as stop:
            result: T = stop.value  # what the wrapped Flow[T] returns
            return result
        except UNEXPECTED_SHAPE as exc:
            # An adapter choking on a reply ("tags": 5, a nesting bomb, a number
            # too large for a date) is the provider's unexpected shape, not our
            # bug: never exit 1, and the caller (create) still knows its launch id.
            if last is None or isinstance(exc, GpuCloudError):
                raise
            raise APIResponseValidationError(
                f"{provider}: unexpected response to {last.request.method} "
                f"{last.request.url.path} (HTTP {last.status_code}): {type(exc).__name__}",
                provider=provider, request=last.request,
                hint="the provider's reply did not have the documented shape; "
                     "rerun with --debug to see which request") from exc
        value, error = None, None
        if isinstance(item, Sleep):
            yield item
            continue
        request: httpx.Request = item
        kind = request_kind(request)
        attempt = 0
        while True:
            yield from _paced(limiter, kind)
            started = time.monotonic()
            try:
                response = yield request
            except httpx.TransportError as exc:
                failure = transport_error(provider, request, exc)
                log.debug("%s %s %s -> %s", provider, request.method, request.url.path,
                          type(exc).__name__)
                retryable = not failure.sent or kind in ("read", "idempotent")
                if retryable and attempt < policy.max_retries:
                    _log_retry(provider, attempt, policy,
                               "timeout" if isinstance(exc, httpx.TimeoutException)
                               else "connection error")
                    yield Sleep(policy.backoff(attempt))
                    attempt += 1
                    continue
                error = failure
                break
            took = time.monotonic() - started
            log.debug("%s %s %s -> %s in %.0f ms", provider, request.method, request.url.path,
                      response.status_code, took * 1000)
            status = response.status_code
            if status == 429:
                delay = retry_after(response)
                # Every flow of the account waits out the pause, not only this one.
                limiter.throttled(min(policy.backoff(attempt) if delay is None else delay,
                                      policy.retry_after_max), told=delay is not None)
            else:
                limiter.answered(took)
            retryable = status == 429 or (status >= 500 and kind in ("read", "idempotent"))
            if retryable and attempt < policy.max_retries:
                _log_retry(provider, attempt, policy,
                           "rate limit (HTTP 429)" if status == 429 else f"HTTP {status}")
                if status != 429:  # a 429's wait is the pause, taken by _paced
                    yield Sleep(policy.backoff(attempt))
                attempt += 1
                continue
            value = last = response
            break


def _paced(limiter: Limiter, kind: str) -> Generator[Sleep, Any, None]:
    """Wait for this request's slot. A 429 elsewhere while this flow slept
    dropped that slot: book a new one, behind the pause."""
    while True:
        pauses = limiter.pauses
        wait = limiter.reserve(kind)
        if wait <= 0:
            return
        yield Sleep(wait)
        if limiter.pauses == pauses:
            return


def _log_retry(provider: str, attempt: int, policy: RetryPolicy, reason: str) -> None:
    """One INFO line per retry (the CLI prints these), so a long wait on a failing
    network shows as retries rather than a hang. `retry` marks it for handlers."""
    log.info("retrying %s (%d/%d) after %s\u2026", provider, attempt + 2, policy.max_retries + 1,
             reason, extra={"retry": True})


def _log_waiting(provider: str, request: httpx.Request, after: float) -> None:
    # Marked `retry` like the retry lines: the same kind of progress line, shown
    # by the same CLI handler in text mode only.
    log.info("waiting for %s (%s %s): no answer after %g s\u2026", provider, request.method,
             request.url.path, after, extra={"retry": True})


class _Watchdog:
    """One daemon thread for every watched request of the process: a thread
    started per request costs more than a fast request itself (Thread.start
    waits for the new thread to be scheduled).

    The thread is woken only for a notice due before it would wake by itself:
    finding nothing to watch, it waits one notice period before sleeping for
    good, so a stream of requests that answer in time (the notices of the next
    ones are due after that) never wakes it, where waking it for each would
    cost a thread switch per request."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._cancelled: set[int] = set()
        self._tokens = itertools.count(1)
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._wakes_at = math.inf  # when the thread wakes by itself (inf: only when told)
        self._idle = 0.0  # the last notice period asked for: the thread's wait when idle

    def watch(self, after: float, callback: Callable[..., None], *args: Any) -> int:
        """Call callback(*args) from the watchdog thread in `after` seconds, unless
        the token returned is cancelled first."""
        token = next(self._tokens)
        due = time.monotonic() + after
        with self._wake:
            heapq.heappush(self._due, (due, token, callback, args))
            self._idle = after
            if self._thread is None or not self._thread.is_alive():  # first use, or a fork
                self._wakes_at = math.inf
                self._thread = threading.Thread(target=self._run, name="gpucloud-watchdog",
                                                daemon=True)
                self._thread.start()
            elif due < self._wakes_at:
                self._wake.notify()
        return token

    def cancel(self, token: int) -> None:
        with self._wake:
            self._cancelled.add(token)

    def _run(self) -> None:
        idle = False
        while True:
            with self._wake:
                while self._due and self._due[0][1] in self._cancelled:
                    self._cancelled.discard(heapq.heappop(self._due)[1])
                now = time.monotonic()
                if self._due and self._due[0][0] <= now:
                    _, _, callback, args = heapq.heappop(self._due)
                    self._wakes_at = now  # busy: it looks at the heap again before waiting
                    idle = False
                else:
                    if self._due:
                        self._wakes_at, idle = self._due[0][0], False
                    else:  # one period more (requests may follow), then for good
                        self._wakes_at, idle = (math.inf if idle else now + self._idle), True
                    if self._wake.wait(None if self._wakes_at == math.inf
                                       else self._wakes_at - now):
                        idle = False  # told of a new notice: requests are coming again
                    continue
            callback(*args)


_WATCHDOG = _Watchdog()


def watched(provider: str, send: Callable[[httpx.Request], httpx.Response],
            after: float) -> Callable[[httpx.Request], httpx.Response]:
    """`send`, with one waiting line if a request has not answered after `after`
    seconds (the process's watchdog thread; cancelled when it returns)."""
    def send_watched(request: httpx.Request) -> httpx.Response:
        token = _WATCHDOG.watch(after, _log_waiting, provider, request, after)
        try:
            return _unbound(send(request))
        finally:
            _WATCHDOG.cancel(token)
    return send_watched


def _unbound(response: httpx.Response) -> httpx.Response:
    """The response with its body read and its stream no longer bound to it:
    httpx binds the two into a reference cycle, which keeps every body (a
    listing's page, hundreds of kilobytes) alive until the cyclic collector
    runs, not until the flow that read it is done."""
    if response.is_stream_consumed and not isinstance(response.stream, httpx.ByteStream):
        response.stream = httpx.ByteStream(response.content)
    return response


def awatched(provider: str, send: Callable[[httpx.Request], Awaitable[httpx.Response]],
             after: float) -> Callable[[httpx.Request], Awaitable[httpx.Response]]:
    """The asyncio twin of watched: a loop callback instead of a thread."""
    async def send_watched(request: httpx.Request) -> httpx.Response:
        import asyncio

        handle = asyncio.get_running_loop().call_later(after, _log_waiting, provider,
                                                       request, after)
        try:
            return _unbound(await send(request))
        finally:
            handle.cancel()
    return send_watched


def run_flow(flow: Flow[T], send: Callable[[httpx.Request], httpx.Response],
             sleep: Callable[[float], None] = time.sleep) -> T:
    """Drive a flow synchronously: Sleeps sleep, Requests are sent."""
    def perform(item: Any) -> Any:
        return sleep(item.seconds) if isinstance(item, Sleep) else send(item)

    return drive(flow, perform, httpx.TransportError)


async def arun_flow(flow: Flow[T], send: Callable[[httpx.Request], Awaitable[httpx.Response]],
                    sleep: Callable[[float], Awaitable[Any]] | None = None) -> T:
    """Drive a flow on asyncio: the twin of run_flow."""
    import asyncio

    pause = sleep or asyncio.sleep

    async def perform(item: Any) -> Any:
        return await (pause(item.seconds) if isinstance(item, Sleep) else send(item))

    return await adrive(flow, perform, httpx.TransportError)


class _KeepNoCookies(http.cookiejar.CookieJar):
    """The jar under _NoCookies, and the one a session's client is made with:
    should httpx reach a jar by another path, it still keeps nothing."""

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        pass

    def extract_cookies(self, response: Any, request: Any) -> None:
        pass


class _NoCookies(httpx.Cookies):
    """The cookies of a provider session: none. Every provider here
    authenticates each request with its key or token (auth()), and a session
    sends each request as the adapter built it, which httpx never adds a
    client's cookies to (only its build_request does): a cookie an answer set
    (a load balancer's, a bot screen's) was kept and never sent. Not looking
    for one saves httpx's work per answer (a urllib request and an email
    message built to find Set-Cookie), about as much as the rest of httpx's
    send cost a call to the in-process sandbox."""

    def __init__(self) -> None:
        super().__init__(_KeepNoCookies())

    def extract_cookies(self, response: httpx.Response) -> None:
        pass

    def set_cookie_header(self, request: httpx.Request) -> None:
        pass


class _Client(httpx.Client):
    """httpx.Client with _NoCookies: httpx reads a client's cookies through
    its public ``cookies`` property, overridden here (one stateless object
    serves every client)."""

    _no_cookies = _NoCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._no_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        pass  # none are ever kept


class _AsyncClient(httpx.AsyncClient):
    """The asyncio twin of _Client."""

    _no_cookies = _Client._no_cookies

    @property
    def cookies(self) -> httpx.Cookies:
        return self._no_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        pass


DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# Seconds without an answer before a request says it is waiting (read when a
# session is made, so a test can shorten it).
WAIT_NOTICE_AFTER = 2.0


class Session:
    """Runs one provider's flows over one httpx.Client, with the policy above."""

    def __init__(self, provider: Any, *, policy: RetryPolicy = DEFAULT_POLICY,
                 sleep: Callable[[float], None] = time.sleep,
                 timeout: httpx.Timeout = DEFAULT_TIMEOUT,
                 notice_after: float | None = None) -> None:
        self.provider = provider
        self.notice_after = WAIT_NOTICE_AFTER if notice_after is None else notice_after
        self.policy = policy
        self.sleep = sleep
        self.limiter = limiter_for(provider)
        # The adapter's own transport (the sandbox's, Kubernetes'), else a
        # connection for each request in flight (pool.py).
        self._client = _Client(transport=session_transport(provider.transport()),
                               auth=provider.auth(), timeout=timeout,
                               follow_redirects=False, limits=LIMITS,
                               cookies=_KeepNoCookies())

    def run(self, flow: Flow[T]) -> T:
        wrapped = with_policy(self.provider.name, flow, self.limiter, self.policy)
        send = watched(self.provider.name, self._send, self.notice_after)
        return run_flow(wrapped, send, self.sleep)

    def _send(self, request: httpx.Request) -> httpx.Response:
        """Send, timing the round trip and this thread's CPU in it: how much of
        it a second thread could overlap (Limiter.threads_to_overlap)."""
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return self._client.send(request)
        finally:
            self.limiter.spent(time.perf_counter() - wall, time.thread_time() - cpu)

    def close(self) -> None:
        self._client.close()


class AsyncSession:
    """The asyncio twin of Session."""

    def __init__(self, provider: Any, *, policy: RetryPolicy = DEFAULT_POLICY,
                 sleep: Callable[[float], Any] | None = None,
                 timeout: httpx.Timeout = DEFAULT_TIMEOUT,
                 notice_after: float | None = None) -> None:
        self.provider = provider
        self.notice_after = WAIT_NOTICE_AFTER if notice_after is None else notice_after
        self.policy = policy
        self.sleep = sleep
        self.limiter = limiter_for(provider)
        self._client = _AsyncClient(transport=async_session_transport(
                                        provider.async_transport()),
                                    auth=provider.auth(), timeout=timeout, limits=LIMITS,
                                    follow_redirects=False, cookies=_KeepNoCookies())

    async def run(self, flow: Flow[T]) -> T:
        wrapped = with_policy(self.provider.name, flow, self.limiter, self.policy)
        send = awatched(self.provider.name, self._client.send, self.notice_after)
        return await arun_flow(wrapped, send, self.sleep)

    async def aclose(self) -> None:
        await self._client.aclose()
