"""Unclaimed machines: gpucloud's mark, and no launch of this journal behind it.

Every launch id is journaled before its request is sent (journal.py), so a
running machine whose launch id has gpucloud's exact form (launch_ids.py) but
that this journal never issued was launched from somewhere else: another
computer (which may have crashed), a home since deleted, a colleague on the
same account. Nothing here can tell those apart, so an unclaimed machine is
reported with what it costs and ended only when a person asks
(``reconcile --orphans --delete``); the reaper reports it and never ends it
for that. A machine without the mark, or with a look-alike of it, is foreign
and never even listed here.

What it has cost so far is the hours since the provider says it was created
times its hourly price: the machine's own price where the listing carries
one, else the bundled catalog's for its type (in its region where the
catalog sells it there). Time spent stopped is counted at that price too, so
the figure is an upper bound for a machine that was ever stopped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

from gpucloud.catalog.pricing import money
from gpucloud.errors import ConfigurationError
from gpucloud.models import Instance, UnclaimedMachine
from gpucloud.providers.launch_ids import is_gpucloud
from gpucloud.safety.deadlines import ENDED

if TYPE_CHECKING:
    from gpucloud.catalog.bundled import ProviderCatalog
    from gpucloud.core.context import ClientContext
    from gpucloud.safety.journal import LaunchRecord

SECONDS_PER_HOUR = Decimal(3600)


def marked(machines: Iterable[Instance]) -> list[Instance]:
    """The machines still up that carry a launch id of gpucloud's form."""
    return [m for m in machines if m.status not in ENDED and is_gpucloud(m.launch_id)]


def unclaimed(machines: Iterable[Instance], known: Mapping[str, LaunchRecord],
              catalogs: Mapping[str, ProviderCatalog], now: datetime
              ) -> list[UnclaimedMachine]:
    """Those of `machines` that are marked and whose launch id is not in
    `known` (the journal's launches of the listed machines' launch ids)."""
    return [priced(m, catalogs, now) for m in marked(machines) if m.launch_id not in known]


def find(ctx: ClientContext, machines: Iterable[Instance], now: datetime
         ) -> list[UnclaimedMachine] | None:
    """`unclaimed` against this computer's journal; None (with a warning) when
    the journal cannot be read: without it no machine can be said unclaimed."""
    candidates = marked(machines)
    if not candidates:
        return []
    known = ctx.tolerant("no machine is reported unclaimed",
                         ctx.journal.by_launch_ids, [m.launch_id for m in candidates])
    if known is None:
        return None
    return unclaimed(candidates, known, ctx.catalogs, now)


def priced(machine: Instance, catalogs: Mapping[str, ProviderCatalog], now: datetime
           ) -> UnclaimedMachine:
    price, source = _price(machine, catalogs)
    age = None
    if machine.created_at is not None:
        age = max(0, int((now - machine.created_at).total_seconds()))
    cost = None
    if age is not None and price is not None:
        cost = money(price * Decimal(age) / SECONDS_PER_HOUR)
    return UnclaimedMachine(instance=machine, age_seconds=age, price_per_hour=price,
                            price_source=source, cost_so_far=cost)


def _price(machine: Instance, catalogs: Mapping[str, ProviderCatalog]
           ) -> tuple[Decimal | None, Literal["instance", "catalog"] | None]:
    if machine.price_per_hour is not None:
        return machine.price_per_hour, "instance"
    if machine.instance_type is None:
        return None, None
    try:
        catalog = catalogs.get(machine.provider)
    except ConfigurationError:  # a broken price file never stops a report on spend
        return None, None
    if catalog is None:
        return None, None
    types = [t for t in catalog.types_named(machine.instance_type) if t.price is not None]
    here = [t for t in types if machine.region in t.regions]
    # A type priced differently per region and sold nowhere near this machine's
    # region has no one price to quote: unknown, never a guess.
    prices = {t.price for t in (here or types)}
    if len(prices) != 1:
        return None, None
    return prices.pop(), "catalog"


def total(found: Iterable[UnclaimedMachine]) -> Decimal | None:
    """What they have cost so far together; None when any part is not known."""
    costs = [u.cost_so_far for u in found]
    if any(c is None for c in costs):
        return None
    return sum((c for c in costs if c is not None), Decimal("0.00"))


__all__ = ["find", "marked", "priced", "total", "unclaimed"]
