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
and is read back by id like any unlisted one (when several are missing, the
last pages are read once more after every launch has ended instead). Once
the last create is sent, the launches whose machines are in the full pages
read already are confirmed while the last creates are answered
(``listed_early``), so the last pass is left only the rest. A listing reads every machine
of the account, so passes at a fixed interval would read N²/interval
machines in all; doubling the interval reads about 2N (each pass lists about
twice the machines it confirms).

A listing in pages (``Provider.list_page``) is read one page after another,
a round trip each: at 500 ms, 3,000 machines in pages of 500 would be 3 s
after the last create. So once a pass has seen the listing come in pages,
the pages are read as they fill, alongside the launches (``following``): a
page followed by another is read once (a provider that pages by creation,
oldest first, as the sandbox and most keyset-paged APIs do, puts every later
machine on a later page); the last page so far is read again once as many
creates as it lacked have been answered. The last pass's listing is an
operation of its own, beside those reads: it reads on from the full pages
read so far a step after the last create has been sent, not once the page
being read then comes back (a round trip later, most of the time at 500/s),
unless that page is due to come back full (it moves where the pages after
it start).
A provider that orders its pages otherwise loses nothing but time: a machine
not in the pages read is read back by id, as any unlisted machine is. The
last pass's listing stops at a full page once every launch the batch sent
to the provider is in the pages read (by its launch id): the pages after it
can hold only machines made later, none of them this batch's, and when the
batch's machines fill a whole number of pages the empty page after them
would be one more round trip after the last create.
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
    from gpucloud.core.flow import Flow
    from gpucloud.models import Instance
    from gpucloud.providers.base import Provider

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


# How often the last pass's listing looks whether the batch's last create has
# been sent, once it is near; how long at most the confirmation of the full
# pages (listed_early), started after the last launch, waits for it, and the
# last listing for a page due to come back full.
POLL = 0.002
WAIT_FOR_SENDS = 5.0
# How often the reads of the pages as they fill look whether a page may have
# filled, and the last pass's listing whether the last create is near.
FOLLOW = 0.02
# Launches answered and missing from the last listing that make it read its
# last pages again rather than read each back by id.
REREAD = 2

# Turns a concluded launch (its machine, or the error it ended with) into the
# batch's item for its slot.
Finish = Callable[[int, Answered, Any], Any]


class Confirmations:
    """The launches of one batch answered and not yet confirmed (thread-safe:
    a batch's launches run in threads of Client)."""

    def __init__(self) -> None:
        self._waiting: list[tuple[int, Answered]] = []
        self._lock = threading.Lock()
        # The largest page read that another page followed: the listing
        # comes in pages of (about) this many (0: not seen to page).
        self.page_size = 0
        self.answered = 0  # launches added so far: machines the provider has made
        # Per provider: the machines of the full pages read so far (by passes
        # and the last pass's listing), and the cursor of the page after them.
        self._read: dict[str, tuple[list[Instance], str | None]] = {}
        # Per provider: the launch ids of every create sent to it.
        self._sent: dict[str, set[str]] = {}
        # Providers whose listing failed while the creates were sent, and how:
        # the last pass reads their machines back by id.
        self.failed: dict[str, BaseException] = {}
        # Providers whose last page so far ``following`` is reading again, as
        # many creates as it lacked answered since: it comes back full, and
        # the pages after it start where it ends.
        self.filling: set[str] = set()
        # Set when the batch is interrupted: launches never started will never
        # be sent, and the listings beside them stop (a thread still waiting
        # for them would keep the process from exiting).
        self.abandoned = False

    def sending(self, provider: str, launch_id: str) -> None:
        """A create carrying ``launch_id`` is about to be sent to ``provider``."""
        with self._lock:
            self._sent.setdefault(provider, set()).add(launch_id)

    def all_listed(self, provider: str, machines: list[Instance]) -> bool:
        """Whether every launch sent to the provider so far is among ``machines``
        (by launch id): a refused create's launch id never is, and a provider
        that does not echo launch ids never says so."""
        with self._lock:
            wanted = set(self._sent.get(provider, ()))
        if len(machines) < len(wanted):
            return False
        return wanted <= {m.launch_id for m in machines}

    def read(self, provider: str) -> tuple[list[Instance], str | None]:
        """The listing's full pages read so far (a copy) and where it goes on."""
        with self._lock:
            machines, cursor = self._read.get(provider, ([], None))
            return list(machines), cursor

    def advance(self, provider: str, at: str | None, page: list[Instance],
                following: str) -> None:
        """A page read at cursor ``at`` that ``following`` comes after: a full
        page, kept unless another reader has kept it already."""
        with self._lock:
            self.page_size = max(self.page_size, len(page))
            machines, cursor = self._read.get(provider, ([], None))
            if cursor == at:
                self._read[provider] = ([*machines, *page], following)

    def add(self, index: int, answered: Answered) -> None:
        with self._lock:
            self._waiting.append((index, answered))
            self.answered += 1

    def unlisted(self, provider: str, machines: list[Instance]) -> int:
        """How many launches answered and waiting on ``provider`` are not among
        ``machines`` under their replied ids."""
        ids = {m.id for m in machines}
        with self._lock:
            return sum(1 for _, a in self._waiting if a.offer.provider == provider
                       and a.instance is not None and a.instance.id not in ids)

    def take(self) -> list[tuple[int, Answered]]:
        with self._lock:
            taken, self._waiting = self._waiting, []
        return taken

    def put_back(self, taken: list[tuple[int, Answered]]) -> None:
        """Launches taken and left for a later pass (not answered anew)."""
        with self._lock:
            self._waiting[:0] = taken


def pages(adapter: Provider, provider: str, confirmations: Confirmations, *,
          until_found: bool = False) -> Flow[list[Instance]]:
    """A provider's listing: the full pages read already by this batch (kept
    in ``confirmations``), then the pages after them to the last, each full
    one kept for the next reader. ``until_found`` (the last pass, every create
    sent): no page is read after one that completes the batch's launches."""
    machines, cursor = confirmations.read(provider)
    while True:
        page, following = yield from adapter.list_page(cursor)
        machines.extend(page)
        if following is None:
            return machines
        confirmations.advance(provider, cursor, page, following)
        if until_found and confirmations.all_listed(provider, machines):
            return machines
        cursor = following


def following(ctx: ClientContext, providers: list[str], unsent: Callable[[], int],
              confirmations: Confirmations) -> Op:
    """The listing's pages read as they fill, while the batch's creates are
    sent: runs beside the launches from the start. Once the listing is seen
    to come in pages, a full page is read once, and the last page so far again
    once as many creates as it lacked have been answered. Ends once every
    create is sent: the last pass's listing (``listing``) goes on from the
    pages read. A provider whose listing fails here is left to that listing's
    verdict (``Confirmations.failed``)."""
    failed = confirmations.failed
    refill: set[str] = set()  # the last page so far is due to be full when read again
    while unsent() > 0 and not confirmations.abandoned:
        size = confirmations.page_size
        followed = [p for p in providers if p not in failed]
        if not size or not followed:
            yield Sleep(FOLLOW)
            continue
        for provider in followed:
            if unsent() <= 0:
                break
            made = confirmations.answered
            _, cursor = confirmations.read(provider)
            if provider in refill:
                confirmations.filling.add(provider)
            try:
                page, next_cursor = yield Call(provider, ctx.adapter(provider).list_page(cursor))
                if next_cursor is not None:
                    confirmations.advance(provider, cursor, page, next_cursor)
                    refill.discard(provider)
                    continue
            except GpuCloudError as exc:
                failed[provider] = exc
                continue
            finally:
                confirmations.filling.discard(provider)
            # The last page so far: read again once it may have filled, when as
            # many more creates as it lacked have been answered (sent is not
            # enough: a create sent is made half a round trip later), and a
            # tenth of a page more: counted from before the read was sent,
            # the answers put it on the very moment the page fills, and read
            # one machine short it would be read again a round trip later.
            refill.discard(provider)
            due = size - len(page) + size // 10
            while 0 < unsent() and confirmations.answered - made < due:
                yield Sleep(FOLLOW)
            if unsent() > 0:
                refill.add(provider)
    return None


def until_sent(unsent: Callable[[], int]) -> Flow[None]:
    """Waits until every create of the batch has been sent: FOLLOW at a time
    while more are left than went out in the last wait, POLL from then on (so
    the last listing goes within POLL of the last create, without waking
    every POLL over a batch of minutes)."""
    left, near = unsent(), False
    while left > 0:
        yield Sleep(POLL if near else FOLLOW)
        now = unsent()
        near = near or now <= left - now
        left = now


def listing(ctx: ClientContext, providers: list[str], unsent: Callable[[], int],
            confirmations: Confirmations, running: Callable[[], int] = lambda: 0) -> Op:
    """The listings of the last pass, fetched while the last creates are
    answered: {provider: its machines, or the error its listing ended with}.
    Runs beside the launches from the start, apart from ``following``: it
    sends its listing a step (FOLLOW) after ``unsent`` says every create of
    the batch has been sent (so it is booked behind them). Of the pages
    ``following`` may be reading then, it waits only for one due to come back
    full (``Confirmations.filling``, WAIT_FOR_SENDS at most); waiting for any
    other would put up to a round trip between the last create and the last
    listing. It goes on from the full pages read so far."""
    yield from until_sent(lambda: 0 if confirmations.abandoned else unsent())
    if confirmations.abandoned:
        return {}
    # The last creates' threads may go out a moment after the one that said
    # so; a listing a step behind them misses none (a machine it misses costs
    # a round trip after the last answer: read back, or the pages again).
    yield Sleep(FOLLOW)
    # A page on its way that comes back full moves the start of the pages
    # after it: read here from before it, it would be a round trip more. It
    # was sent earlier, so its answer is due sooner than a read sent now.
    waited = 0.0
    while any(p in confirmations.filling for p in providers) and waited < WAIT_FOR_SENDS:
        yield Sleep(POLL)
        waited += POLL
    failed = dict(confirmations.failed)
    rest = [p for p in providers if p not in failed]
    got = yield Gather([Call(p, pages(ctx.adapter(p), p, confirmations, until_found=True))
                        for p in rest])
    out: dict[str, Any] = dict(failed)
    out.update(zip(rest, got))
    # A create sent just before the last page was read can reach the provider
    # after it (its thread slower to go out than the listing's): a machine
    # missing here is read back by id, a request each against the rate. When
    # several are missing, the pages after the full ones are read once more
    # after every launch of the batch has ended (``running``), one request.
    while running() > 0 and not confirmations.abandoned:
        yield Sleep(FOLLOW)
    again = [p for p in rest if not isinstance(out[p], BaseException)
             and confirmations.unlisted(p, out[p]) >= REREAD]
    if again:
        got = yield Gather([Call(p, pages(ctx.adapter(p), p, confirmations,
                                          until_found=True)) for p in again])
        out.update((p, m) for p, m in zip(again, got) if not isinstance(m, BaseException))
    return out


def listed_early(ctx: ClientContext, confirmations: Confirmations, finish: Finish,
                 limit: int | Callable[[], int], unsent: Callable[[], int]) -> Op:
    """The launches answered by the time the batch's last create is sent whose
    machines are in the full pages read already, each under its replied id
    with its own launch id, confirmed while the last creates are answered: the
    last pass after them is left the rest, so that its CPU (recording some
    thousands of machines) is not all spent after the last answer. Any other
    launch is left to the last pass, which lists and reads back as always.
    Returns [(slot index, item)], as a pass does."""
    waited = 0.0
    while unsent() > 0 and waited < WAIT_FOR_SENDS:
        yield Sleep(POLL)
        waited += POLL
    if unsent() > 0:
        return []
    taken = confirmations.take()
    kept = {p: confirmations.read(p)[0]
            for p in dict.fromkeys(a.offer.provider for _, a in taken)}
    seen = {(p, m.id): m for p, machines in kept.items() for m in machines}
    ready: list[tuple[int, Answered]] = []
    rest: list[tuple[int, Answered]] = []
    for entry in taken:
        answered = entry[1]
        assert answered.instance is not None
        machine = seen.get((answered.offer.provider, answered.instance.id))
        found = machine is not None and machine.launch_id == answered.launch_id
        (ready if found else rest).append(entry)
    confirmations.put_back(rest)
    return (yield from confirm_pass(ctx, confirmations, finish, limit, prefetched=kept,
                                    taken=ready))


def confirm_pass(ctx: ClientContext, confirmations: Confirmations, finish: Finish,
                 limit: int | Callable[[], int],
                 prefetched: dict[str, Any] | None = None,
                 taken: list[tuple[int, Answered]] | None = None) -> Op:
    """Confirm every launch answered so far; ``finish`` makes each one's item.
    ``prefetched``: listings already fetched (``listing``), used instead of new
    ones where they did not fail. ``taken``: these launches (taken from
    ``confirmations`` already) instead. Returns [(slot index, item)]."""
    if taken is None:
        taken = confirmations.take()
    if not taken:
        return []
    providers = list(dict.fromkeys(a.offer.provider for _, a in taken))
    have = {p: m for p, m in (prefetched or {}).items() if not isinstance(m, BaseException)}
    fresh = [p for p in providers if p not in have]
    if fresh:
        have.update(zip(fresh, (yield Gather([Call(p, pages(ctx.adapter(p), p, confirmations))
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
    # together; the rest (read by id, or refuted) each on their own.
    agreed = {id(a) for (_, a), m in zip(taken, confirmed)
              if m is not None and m.launch_id in (None, a.launch_id)}
    recorded = record_delivered(ctx, [(a, m) for (_, a), m in zip(taken, confirmed)
                                      if id(a) in agreed])
    done = []
    for (index, answered), machine in zip(taken, confirmed):
        outcome = machine if machine is not None else next(read)
        try:
            made = yield from conclude(ctx, answered, given(outcome),
                                       recorded=id(answered) in recorded)
        except GpuCloudError as exc:
            made = exc
        done.append((index, finish(index, answered, made)))
    return done


__all__ = ["Confirmations", "EVERY", "FEWEST", "confirm_pass", "following", "listed_early",
           "listing", "pages", "pass_at", "until_sent"]
