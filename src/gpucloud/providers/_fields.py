"""Checks for fields of a provider's JSON, shared by the adapters.

A reply is data from outside: a wrong type raises TypeError/ValueError, which
the driver turns into APIResponseValidationError (never exit 1).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def integer(value: Any) -> int:
    if not is_int(value):
        raise TypeError(f"expected an integer, got {value!r}")
    return int(value)


def money(value: Any, *, strings: bool = False) -> Decimal:
    """A price, USD. `strings`: the provider's contract also sends prices as
    decimal strings (elsewhere a string price is a malformed reply)."""
    # JSON numbers arrive as floats: through str() (their shortest repr,
    # "0.44"), never float arithmetic, so no binary rounding gets into money.
    if not is_number(value) and not (strings and isinstance(value, str)):
        raise TypeError(f"expected a price, got {value!r}")
    amount = Decimal(str(value))
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"invalid price {value!r}")
    return amount


__all__ = ["integer", "is_int", "is_number", "money"]
