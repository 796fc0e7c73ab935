"""Bounds past which a figure is a typo or a garbled reply, not a real one.

A module of its own, importing nothing of gpucloud's: the models, the pricing
rules and the catalog parser all check against these without importing each
other (the catalog must not load pydantic; see catalog/offer.py).
"""

from __future__ import annotations

from decimal import Decimal

# Beyond these, a number is a typo, not a plan (and would overflow datetimes).
MAX_AMOUNT = Decimal(10) ** 9
MAX_HOURS = Decimal(24 * 365 * 10)
# No machine costs this much per hour: a larger figure is a garbled reply.
MAX_PRICE_PER_HOUR = Decimal(10) ** 6

__all__ = ["MAX_AMOUNT", "MAX_HOURS", "MAX_PRICE_PER_HOUR"]
