"""Confirming the machines a batch made with one listing per pass, not one
read per machine.

A create reply that names a machine is confirmed before the machine counts as
made (core/launch.py). One create on its own reads its machine back by id; a
batch would then send two requests per machine against the provider's rate
limit, halving the creates it can make in a given time. Instead the launches of
a batch stop at the answer (``Answered``: the replied id journaled, the attempt
in flight naming it) and a pass confirms everything answered so far with one
listing of each provider:

* a machine listed under the replied id carrying this launch's launch id is
  confirmed, exactly as a read back by id would have;
* listed under the replied id with another launch id: someone else's machine,
  and the launch is looked for by its launch id (``conclude``, as a lie of a
  single create is);
* not listed: the listing may lag the create (eventual consistency), so that
  machine is read back by id as on its own (a 404 is a lie, as above);
* the listing failing: every machine of that provider is read back by id.

Passes run among the launches, so that the machines made are reported as the
batch goes and an interrupt leaves fewer unconfirmed: when ``EVERY`` launches
have started, then 2, 4, 8... times as many; and once after the last. A pass
among the launches takes the machines answered so far and then lists, so a
machine missing from its listing was not too new to appear. The last pass's
listing is sent once the last create has been sent, while the last creates
are answered, so that confirming them costs no round trip after them; a
machine whose create reached the provider after that listing is not in it,
and is read back by id like any unlisted one. A listing reads every machine
of the account, so passes at a fixed interval would read N²/interval
machines in all; doubling the interval reads about 2N (each pass lists about
twice the machines it confirms).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpucloud.core.flow import Sleep
from gpucloud.core.instructions import Call, Concurrent, Gather, Op
from gpucloud.core.launch import Answered, conclude, given, read_back, record_delivered
from gpucloud.errors import GpuCloudError

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext
    from gpucloud.models import Instance

# Launches started before the first pass among them (see the module docstring).
EVERY = 256
# Fewer launches than this on a provider: each machine is read back by id as it
# is answered (a listing saves little there, and each is reported at once).
FEWEST = 8



def pass_at(position: int) -> bool:
    """Whether a pass runs once this many launches have started (EVERY, then
    twice as many, and so on)."""
    return position >= EVERY and position % EVERY == 0 and \
        (position // EVERY) & (position // EVERY - 1) == 0


# How often, and how long at most, the last pass's listing waits for the
# batch's last creates to be sent before it is.
POLL = 0.002
WAIT_FOR_SENDS = 5.0

# Turns a concluded launch (its machine, or the error it ended with) into the
# batch's item for its slot.
Finish = Callable[[int, Answered, Any], Any]


class Confirmations:
    """The launches of one batch answered and not yet confirmed (thread-safe:
    a batch's launches run in threads of Client)."""

    def __init__(self) -> None:
        self._waiting: list[tuple[int, Answered]] = []
        self._lock = threading.Lock()

    def add(self, index: int, answered: Answered) -> None:
        with self._lock:
            self._waiting.append((index, answered))

    def take(self) -> list[tuple[int, Answered]]:
        with self._lock:
            taken, self._waiting = self._waiting, []
        return taken


def listing(ctx: ClientContext, providers: list[str], all_sent: Callable[[], bool]) -> Op:
    """The listings of the last pass, fetched while the last creates are
    answered: {provider: its machines, or the error its listing ended with}.
    Sent once ``all_sent`` says every create of the batch has been sent (so it
    is booked behind them), or after ``WAIT_FOR_SENDS`` at most (an interrupted
    batch never sends the rest)."""
    waited = 0.0
    while not all_sent() and waited < WAIT_FOR_SENDS:
        yield Sleep(POLL)
        waited += POLL
    got = yield Gather([Call(p, ctx.adapter(p).list_instances()) for p in providers])
    return dict(zip(providers, got))


def confirm_pass(ctx: ClientContext, confirmations: Confirmations, finish: Finish,
                 limit: int | Callable[[], int],
                 prefetched: dict[str, Any] | None = None) -> Op:
    """Confirm every launch answered so far; ``finish`` makes each one's item.
    ``prefetched``: listings already fetched (``listing``), used instead of new
    ones where they did not fail. Returns [(slot index, item)]."""
    taken = confirmations.take()
    if not taken:
        return []
    providers = list(dict.fromkeys(a.offer.provider for _, a in taken))
    have = {p: m for p, m in (prefetched or {}).items() if not isinstance(m, BaseException)}
    fresh = [p for p in providers if p not in have]
    if fresh:
        have.update(zip(fresh, (yield Gather([Call(p, ctx.adapter(p).list_instances())
                                              for p in fresh]))))
    listed = [have[p] for p in providers]
    seen: dict[tuple[str, str], Instance] = {}
    for provider, machines in zip(providers, listed):
        if isinstance(machines, BaseException):
            if not isinstance(machines, GpuCloudError):
                raise machines  # a bug, never taken for an unlisted machine
            continue  # every machine of it is read back by id below
        seen.update(((provider, m.id), m) for m in machines)
    confirmed: list[Any] = []
    unlisted: list[Answered] = []
    for _, answered in taken:
        assert answered.instance is not None
        machine = seen.get((answered.offer.provider, answered.instance.id))
        confirmed.append(machine)
        if machine is None:
            unlisted.append(answered)
    read = iter((yield Concurrent([read_back(ctx, a) for a in unlisted], limit=limit))
                if unlisted else [])
    # The machines listed as replied, with this launch's launch id, are recorded
    # in one transaction; the rest (read by id, or refuted) each on their own.
    agreed = {id(a) for (_, a), m in zip(taken, confirmed)
              if m is not None and m.launch_id in (None, a.launch_id)}
    recorded = record_delivered(ctx, [(a, m) for (_, a), m in zip(taken, confirmed)
                                      if id(a) in agreed])
    done = []
    for (index, answered), machine in zip(taken, confirmed):
        outcome = machine if machine is not None else next(read)
        try:
            made = yield from conclude(ctx, answered, given(outcome),
                                       recorded=recorded and id(answered) in agreed)
        except GpuCloudError as exc:
            made = exc
        done.append((index, finish(index, answered, made)))
    return done


__all__ = ["Confirmations", "EVERY", "FEWEST", "confirm_pass", "listing", "pass_at"]
