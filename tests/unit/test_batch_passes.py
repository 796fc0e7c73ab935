"""Where a batch's confirmation passes run among its launches
(batch/confirm.py): the first after EVERY launches, then at twice as many each
time, so the listings read about 2N machines in all, never N² / EVERY."""

from __future__ import annotations

from gpucloud.batch.confirm import EVERY, pass_at


def test_passes_double_their_interval():
    at = [p for p in range(40 * EVERY) if pass_at(p)]
    assert at == [EVERY, 2 * EVERY, 4 * EVERY, 8 * EVERY, 16 * EVERY, 32 * EVERY]


def test_the_listings_read_about_twice_the_machines_of_the_batch():
    n = 100 * EVERY
    # A pass at position p lists about p machines (the batch's so far); the
    # last one, after every launch, lists n.
    read = sum(p for p in range(n) if pass_at(p)) + n
    assert read <= 2.5 * n
