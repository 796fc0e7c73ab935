"""The launches in flight of a context: removed by identity, in the order sent."""

from gpucloud.core.context import InFlight
from gpucloud.models import Attempt


def _attempt(launch_id: str = "gl-1") -> Attempt:
    return Attempt(provider="sandbox", instance_type="h100", region="r", outcome="launching",
                   launch_id=launch_id)


def test_a_settled_attempt_goes_and_an_equal_one_stays():
    first, twin, other = _attempt(), _attempt(), _attempt("gl-2")
    assert first == twin and first is not twin
    flights = InFlight()
    for attempt in (first, other, twin):
        flights.append(attempt)
    flights.discard(first)
    assert [a for a in flights] == [other, twin]
    assert list(flights)[1] is twin
    flights.discard(first)  # already gone: nothing else goes
    assert len(flights) == 2


def test_iterating_is_a_snapshot_while_launches_settle():
    attempts = [_attempt(f"gl-{i}") for i in range(5)]
    flights = InFlight()
    for attempt in attempts:
        flights.append(attempt)
    seen = []
    for attempt in flights:
        flights.discard(attempt)  # another thread's launch ending meanwhile
        seen.append(attempt)
    assert seen == attempts and len(flights) == 0
