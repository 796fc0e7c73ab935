"""How Client and AsyncClient carry out an operation's instructions
(instructions.py): ``Call`` through the provider's session, ``Gather`` at
once, ``Sleep``, and ``Concurrent`` sub-operations, with threads or with
asyncio. Each client holds one runner, which holds the provider sessions.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from gpucloud.core.drive import _abandon, adrive, drive
from gpucloud.core.flow import Sleep
from gpucloud.core.instructions import Call, Concurrent, Emit, Gather, Op

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    from gpucloud.transport.http import AsyncSession, Session
    from gpucloud.core.context import ClientContext


class ThreadedRunner:
    """Runs operations in this thread, a provider's calls through one
    httpx.Client session each (opened on first use), several at once in threads."""

    def __init__(self, ctx: ClientContext, sleep: Callable[[float], None]) -> None:
        self._ctx = ctx
        self._sleep = sleep
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()  # concurrent launches open sessions from threads

    def session(self, name: str) -> Session:
        found = self._sessions.get(name)  # a dict read is atomic: no lock once made
        if found is not None:
            return found
        from gpucloud.transport.http import Session

        with self._lock:
            if name not in self._sessions:
                self._sessions[name] = Session(self._ctx.adapter(name), sleep=self._sleep)
            return self._sessions[name]

    def _call(self, call: Call) -> Any:
        return self.session(call.provider).run(call.flow)

    def _capture(self, call: Call) -> Any:
        try:
            return self._call(call)
        except Exception as exc:  # noqa: BLE001 - handed back to the operation
            return exc

    def _perform(self, item: Any) -> Any:
        if isinstance(item, Call):
            return self._call(item)
        if isinstance(item, Gather):
            width = self._gather_width(item) if len(item.calls) > 1 else 1
            if width <= 1:
                return [self._capture(c) for c in item.calls]
            from concurrent.futures import ThreadPoolExecutor  # not for a lone call

            with ThreadPoolExecutor(max_workers=min(width, len(item.calls))) as pool:
                return list(pool.map(self._capture, item.calls))
        if isinstance(item, Sleep):
            return self._sleep(item.seconds)
        if isinstance(item, Concurrent):
            return self._concurrent(item)
        raise TypeError(f"unknown instruction {item!r}")

    def _gather_width(self, item: Gather) -> int:
        """Threads for the calls of `item`: what their providers' timed round
        trips overlap (core/concurrency.py)."""
        from gpucloud.core.concurrency import gather_width

        names = dict.fromkeys(call.provider for call in item.calls)
        return gather_width(self.session(name).limiter for name in names)

    def _concurrent(self, item: Concurrent) -> list[Any]:
        """Each sub-operation in a thread, at most item.bound() at once (asked
        again as each one ends, so a bound that follows the observed latency
        widens or narrows mid-batch). An interrupt (or a KeyboardInterrupt
        raised in a worker) starts nothing more and propagates at once: those
        in flight stay listed in ctx.in_flight."""
        if not item.ops:
            return []
        import queue
        import threading
        from collections import deque
        from concurrent.futures import Future, ThreadPoolExecutor

        from gpucloud.core.concurrency import in_flight_cap

        # Set by the worker an interrupt ends: a thread of the pool would otherwise
        # take an operation already handed to it before this thread sees the
        # interrupt (a launch no one asked for any more).
        stopping = threading.Event()

        def one(op: Op) -> Any:
            if stopping.is_set():
                return None  # never started: the interrupt propagates from another
            try:
                return self.run(op)
            except Exception as exc:  # noqa: BLE001 - handed back to the operation
                return exc
            except BaseException:
                stopping.set()
                raise

        waiting = deque(enumerate(item.ops))
        results: list[Any] = [None] * len(item.ops)
        running: dict[Future[Any], int] = {}
        # Each future hands itself here as it ends: waiting for the next one is
        # one queue read, where concurrent.futures.wait installs and removes a
        # waiter on every future in flight each time (hundreds at a time for a
        # batch against a slow provider, per launch ended: CPU the launches need).
        ended: queue.SimpleQueue[Future[Any]] = queue.SimpleQueue()
        # A number given is taken as it is; a bound worked out stays under the cap.
        widest = item.limit if isinstance(item.limit, int) else in_flight_cap() + item.beside
        pool = ThreadPoolExecutor(max_workers=max(1, min(widest, len(item.ops))),
                                  thread_name_prefix="gpucloud-launch")
        try:
            while waiting or running:
                while waiting and len(running) < item.bound():
                    index, op = waiting.popleft()
                    future = pool.submit(one, op)
                    running[future] = index
                    future.add_done_callback(ended.put)
                future = ended.get()
                # re-raises what one() does not catch (an interrupt)
                results[running.pop(future)] = future.result()
        except BaseException:
            stopping.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        return results

    def run(self, op: Op) -> Any:
        return drive(op, self._perform)

    def iterate(self, op: Op) -> Iterator[Any]:
        """What `op` emits, item by item, as it comes (drive's loop, with each
        ``Emit`` handed to the reader). A reader that stops early closes `op`:
        it ends there, and what it does after the last item (a record of the
        whole listing) is not done."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                item = op.throw(error) if error is not None else op.send(value)
            except StopIteration:
                return
            value, error = None, None
            try:
                if isinstance(item, Emit):
                    yield from item.items
                    continue
                value = self._perform(item)
            except Exception as exc:  # thrown into `op`, as drive does
                if isinstance(item, Emit):
                    _abandon(op)
                    raise
                error = exc
            except BaseException:  # an interrupt, or the reader closed this iterator
                _abandon(op)
                raise

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()


class AsyncRunner:
    """Runs operations as asyncio tasks, a provider's calls through one
    httpx.AsyncClient session each (opened on first use)."""

    def __init__(self, ctx: ClientContext,
                 sleep: Callable[[float], Awaitable[None]] | None) -> None:
        self._ctx = ctx
        self._sleep = sleep
        self._sessions: dict[str, AsyncSession] = {}

    def session(self, name: str) -> AsyncSession:
        if name not in self._sessions:
            from gpucloud.transport.http import AsyncSession

            self._sessions[name] = AsyncSession(self._ctx.adapter(name), sleep=self._sleep)
        return self._sessions[name]

    async def _perform(self, item: Any) -> Any:
        import asyncio

        if isinstance(item, Call):
            return await self.session(item.provider).run(item.flow)
        if isinstance(item, Gather):
            return list(await asyncio.gather(
                *(self.session(c.provider).run(c.flow) for c in item.calls),
                return_exceptions=True))
        if isinstance(item, Sleep):
            return await (self._sleep or asyncio.sleep)(item.seconds)
        if isinstance(item, Concurrent):
            return await self._concurrent(item)
        raise TypeError(f"unknown instruction {item!r}")

    async def _concurrent(self, item: Concurrent) -> list[Any]:
        """Each sub-operation a task, at most item.bound() at once (asked again as
        each one ends). Cancelled: the tasks in flight are cancelled too."""
        import asyncio
        from collections import deque

        async def one(op: Op) -> Any:
            try:
                return await self.run(op)
            except Exception as exc:  # noqa: BLE001 - handed back to the operation
                return exc

        waiting = deque(enumerate(item.ops))
        results: list[Any] = [None] * len(item.ops)
        running: dict[asyncio.Task[Any], int] = {}
        try:
            while waiting or running:
                while waiting and len(running) < item.bound():
                    index, op = waiting.popleft()
                    running[asyncio.ensure_future(one(op))] = index
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    results[running.pop(task)] = task.result()
        except BaseException:
            for task in running:
                task.cancel()
            raise
        return results

    async def run(self, op: Op) -> Any:
        return await adrive(op, self._perform)

    async def iterate(self, op: Op) -> AsyncIterator[Any]:
        """ThreadedRunner.iterate, with calls as tasks."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                item = op.throw(error) if error is not None else op.send(value)
            except StopIteration:
                return
            value, error = None, None
            try:
                if isinstance(item, Emit):
                    for one in item.items:
                        yield one
                    continue
                value = await self._perform(item)
            except Exception as exc:  # thrown into `op`, as adrive does
                if isinstance(item, Emit):
                    _abandon(op)
                    raise
                error = exc
            except BaseException:  # cancelled, or the reader closed this iterator
                _abandon(op)
                raise

    async def aclose(self) -> None:
        for session in self._sessions.values():
            await session.aclose()
        self._sessions.clear()


__all__ = ["AsyncRunner", "ThreadedRunner"]
