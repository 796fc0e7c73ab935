"""Free objects of an account that a launch needs first (a registered SSH key,
an environment): the one found, else one made.

The launches of a batch (``create --instances N``, a multi-node job's nodes)
run at once, so on a new account several find none and each makes one. A
provider that keeps names unique refuses all makes but the first; a batch
must not fail, and roll back the machines already made, over a key its own
launches raced to register. So a make refused with a client error (the name
taken: 400, 409 or 422) is followed by one more look, and the object the
other launch made is used; found nothing again, the refusal stands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gpucloud.errors import APIStatusError
from gpucloud.providers.base import Flow

T = TypeVar("T")
TAKEN = (400, 409, 422)  # how providers refuse a name already in use


def found_or_made(find: Callable[[], Flow[T | None]], make: Callable[[], Flow[T]]) -> Flow[T]:
    """``find()``'s object, else ``make()``'s; a refused make looks once more."""
    found = yield from find()
    if found is not None:
        return found
    try:
        return (yield from make())
    except APIStatusError as refused:
        if refused.status_code not in TAKEN:
            raise
        again = yield from find()
        if again is None:
            raise
        return again


__all__ = ["TAKEN", "found_or_made"]
