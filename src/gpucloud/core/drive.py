"""The loop that carries out what a generator yields, sync and async.

Flows (driven by ``transport/http.run_flow`` over httpx) and the operations
(driven by the clients' runners) share it. Its own module, free of httpx, so that an
operation that never reaches a provider (a catalog-only ``offers``) does not
import the HTTP stack.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def drive(gen: Generator[Any, Any, T], perform: Callable[[Any], Any],
          catch: type[BaseException] | tuple[type[BaseException], ...] = Exception) -> T:
    """Run a generator: carry out each item it yields with `perform`, send the
    result back, or throw the caught exception in. Flows and operations are
    both driven by this loop (and its async twin below)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            item = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration as stop:
            result: T = stop.value  # what the generator returned
            return result
        value, error = None, None
        try:
            value = perform(item)
        except catch as exc:
            error = exc
        except BaseException:
            _abandon(gen)
            raise


async def adrive(gen: Generator[Any, Any, T], perform: Callable[[Any], Awaitable[Any]],
                 catch: type[BaseException] | tuple[type[BaseException], ...] = Exception) -> T:
    """The asyncio twin of drive: `perform` is a coroutine function."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            item = gen.throw(error) if error is not None else gen.send(value)
        except StopIteration as stop:
            result: T = stop.value  # what the generator returned
            return result
        value, error = None, None
        try:
            value = await perform(item)
        except catch as exc:
            error = exc
        except BaseException:
            _abandon(gen)
            raise


def _abandon(gen: Generator[Any, Any, Any]) -> None:
    """Close an operation that an interrupt or a cancellation ends mid-way, now:
    its cleanup (a batch's key lock) runs at once rather than whenever the
    generator is collected (a cancelled task's traceback keeps it alive)."""
    try:
        gen.close()
    except Exception:  # noqa: BLE001 - the interrupt is what the caller must see
        pass
