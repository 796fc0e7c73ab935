"""Where a batch's confirmation passes run among its launches
(batch/confirm.py): the first after EVERY launches, then at twice as many each
time, so the listings read about 2N machines in all, never N² / EVERY; and how
the last pass's listing waits for the last create to be sent."""

from __future__ import annotations

from gpucloud.batch.confirm import EVERY, FOLLOW, POLL, pass_at, until_sent


def test_passes_double_their_interval():
    at = [p for p in range(40 * EVERY) if pass_at(p)]
    assert at == [EVERY, 2 * EVERY, 4 * EVERY, 8 * EVERY, 16 * EVERY, 32 * EVERY]


def test_the_listings_read_about_twice_the_machines_of_the_batch():
    n = 100 * EVERY
    # A pass at position p lists about p machines (the batch's so far); the
    # last one, after every launch, lists n.
    read = sum(p for p in range(n) if pass_at(p)) + n
    assert read <= 2.5 * n


def test_the_last_listing_looks_often_only_once_the_last_create_is_near():
    """FOLLOW between looks while more creates are left than went out in the
    last wait, POLL from then on: within POLL of the last create without a
    wake-up every POLL over the whole batch."""
    left = iter([1000, 990, 980, 30, 20, 12, 5, 1, 0])
    flow = until_sent(lambda: next(left))
    waits = [item.seconds for item in flow]
    # 1000 -> 990 -> 980 -> 30 (950 went: near) -> POLL on, even when fewer go.
    assert waits == [FOLLOW, FOLLOW, FOLLOW, POLL, POLL, POLL, POLL, POLL]
    assert list(until_sent(lambda: 0)) == []  # every create sent: no wait at all
