"""The primitives operations are made of, below every operation module (so
none of them imports another for these): the instructions an
operation yields (``Call``, ``Gather``, ``Concurrent``, ``Emit``; ``Sleep``
from core/flow.py), and the small pure helpers every operation shares."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from gpucloud.catalog import pricing
from gpucloud.core.flow import Flow, Sleep
from gpucloud.errors import SpecError, option
from gpucloud.types import split_ref  # where it lives now; operations import it from here

if TYPE_CHECKING:
    from gpucloud.models import Offer
    from gpucloud.catalog.offer import CatalogOffer

_O = TypeVar("_O", "Offer", "CatalogOffer")

# Sub-operations in flight at once where nothing better is known (a batch on a
# provider that declares no rate: core/concurrency.py).
DEFAULT_CONCURRENCY = 8

MAX_FALLBACKS = 20
Op = Generator[Any, Any, Any]


@dataclass
class Call:
    provider: str
    flow: Flow[Any]


@dataclass
class Gather:
    calls: list[Call] = field(default_factory=list)


@dataclass
class Concurrent:
    """Run sub-operations at once, at most ``limit`` in flight, each driven by the
    client like a whole operation (a thread of Client, a task of AsyncClient).
    The answer is their results in order; an exception a sub-operation raised
    comes back as its value (as in Gather). Sub-operations share the context,
    so what they record there must be per launch (core/launch.py). ``limit``:
    a number, or a function asked each time one may start (a bound that moves
    with what is observed, core/concurrency.py). ``beside``: how many of the
    sub-operations run the whole time beside the rest (counted in ``limit``),
    so that a thread pool sized to a cap on the rest is that much wider."""
    ops: list[Op] = field(default_factory=list)
    limit: int | Callable[[], int] = DEFAULT_CONCURRENCY
    beside: int = 0

    def bound(self) -> int:
        """The most sub-operations in flight now (at least one)."""
        return max(1, self.limit() if callable(self.limit) else self.limit)


@dataclass
class Emit:
    """Machines (or any items) an operation hands on as it goes, before it
    ends: a listing, page by page. The runners' ``iterate`` yields them to the
    reader one by one; ``collect`` gathers them into the operation's answer."""
    items: list[Any] = field(default_factory=list)


def collect(op: Op) -> Op:
    """Run `op` as part of this operation; its answer is the list of every item
    it emitted, in order (its other instructions pass through unchanged)."""
    out: list[Any] = []
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            item = op.throw(error) if error is not None else op.send(value)
        except StopIteration:
            return out
        value, error = None, None
        if isinstance(item, Emit):
            out.extend(item.items)
            continue
        try:
            value = yield item
        except Exception as exc:  # noqa: BLE001 - thrown into `op`, as drive does
            error = exc
        except BaseException:
            op.close()  # an interrupt: `op` cleans up now, not when collected
            raise


def check_count(count: int) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise SpecError(f"count must be a positive number of GPUs, got {count!r}",
                        hint=f"{option('count', '--count')} is the number of GPUs on one "
                             "machine, e.g. 8")
    return count


def sort_offers(offers: list[_O]) -> list[_O]:
    """Cheapest first; but every offer with a price part not known (a live price
    of 0, storage billed at a rate not in the data) after all fully priced ones:
    its real price may be anything, so it is never the "cheapest" (and one with
    no machine price at all comes last). The one order of offers, estimate and
    plan alike."""
    def key(o: _O) -> tuple[Any, ...]:
        unknown = pricing.unknown_parts(o)
        return (bool(unknown), pricing.MACHINE in unknown, o.price_per_hour,
                o.available is False, o.provider, o.region, o.instance_type)
    return sorted(offers, key=key)


__all__ = ["Call", "Concurrent", "DEFAULT_CONCURRENCY", "Emit", "Gather", "MAX_FALLBACKS", "Op",
           "Sleep", "check_count", "collect", "sort_offers", "split_ref"]
