"""Cost estimates: pure functions over Decimal. No I/O, no floats.

An estimate is for one machine of one offer over a number of hours. Totals
are rounded to the cent (half up) for display; budget checks compare the
exact amounts.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from gpucloud.errors import SpecError, option
from gpucloud.catalog.limits import MAX_AMOUNT, MAX_HOURS

CENT = Decimal("0.01")
HOURS_PER_MONTH = Decimal(730)  # the usual cloud convention for GB-month prices;
# a provider with another convention says so (Offer.hours_per_month, its catalog).



def to_decimal(value: Any, what: str = "amount", limit: Decimal = MAX_AMOUNT) -> Decimal:
    """Money or hours from user input; floats go through str() so 0.1 stays 0.1."""
    if isinstance(value, Decimal):
        result = value
    else:
        try:
            result = Decimal(str(value).strip().lstrip("$"))
        except (InvalidOperation, ValueError) as exc:
            raise SpecError(f"invalid {what}: {value!r}",
                            hint="use a number such as 200 or 12.5") from exc
    if not result.is_finite():
        raise SpecError(f"invalid {what}: {value!r}", hint="use a finite number")
    if abs(result) > limit:
        raise SpecError(f"{what} {value} is out of range", hint=f"use at most {limit:,}")
    return result


def money(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


MACHINE = "GPU instance"  # the name of the machine's part in estimates


def _month(offer: Any) -> Decimal:
    return Decimal(offer.hours_per_month) if offer.hours_per_month else HOURS_PER_MONTH


def machine_price(offer: Any) -> Decimal | None:
    """The machine's hourly price without storage billed apart; None when not
    known: a live price of 0 is a provider that did not say, not a free machine."""
    machine: Decimal | None = offer.price_per_hour if offer.price_per_hour > 0 else None
    if machine is not None and offer.disk_price_per_gb_month is not None:
        # price_per_hour already holds the storage for offer.disk_gb: take it out.
        machine -= offer.disk_price_per_gb_month * (offer.disk_gb or 0) / _month(offer)
        machine = machine if machine > 0 else None  # storage alone: machine unpriced
    return machine


def _disk_size(offer: Any, disk_gb: int | None) -> int:
    return disk_gb if disk_gb is not None else (offer.disk_gb or 0)


def _unknown_disk(offer: Any, disk_gb: int | None) -> str | None:
    """The disk part's name when the provider bills it apart at a rate not known here."""
    if offer.disk_price_per_gb_month is not None or not offer.disk_billed_apart:
        return None
    size = _disk_size(offer, disk_gb)
    return f"disk ({size} GB)" if size else "disk"


def unknown_parts(offer: Any, disk_gb: int | None = None) -> tuple[str, ...]:
    """The hourly parts of `offer` whose price is not known (an estimate's
    ``unknown``), machine first; empty for a fully priced offer."""
    disk = _unknown_disk(offer, disk_gb)
    return tuple(part for part in (MACHINE if machine_price(offer) is None else None, disk)
                 if part is not None)


def estimate(offer: Any, hours: Any = 1, *, disk_gb: int | None = None) -> Any:
    """CostEstimate for running `offer` for `hours`: the machine, the disk where billed
    apart, and usage charges (per GB ...) as lines of their own, outside the total.

    A part whose price is not known is None and named in ``unknown`` (see
    ``unknown_parts``).
    """
    from gpucloud.models import CostEstimate, CostLine

    hours_d = to_decimal(hours, "hours", MAX_HOURS)
    if hours_d <= 0:
        raise SpecError(f"hours must be positive, got {hours}",
                        hint=f"e.g. {option('hours', '--hours', '72', '72h')}")
    # What the offer itself says about its price (a quote its parts do not add up to).
    notes: list[str] = list(getattr(offer, "notes", ()))
    unknown = unknown_parts(offer, disk_gb)
    machine = machine_price(offer)
    disk_line = None
    size = _disk_size(offer, disk_gb)
    month = _month(offer)
    if offer.disk_price_per_gb_month is not None:
        # The storage for the size asked for, in place of what price_per_hour held.
        rate = offer.disk_price_per_gb_month
        disk_per_hour = rate * size / month
        disk_line = CostLine(component=f"disk ({size} GB)", price_per_hour=disk_per_hour,
                             total=money(disk_per_hour * hours_d))
        notes.append("storage is billed apart from the machine, at "
                     f"${rate}/GB-month ({month} h months)")
    elif offer.disk_billed_apart:
        disk_line = CostLine(component=_unknown_disk(offer, disk_gb) or "disk",
                             price_per_hour=None, total=None)
        notes.append(f"{offer.provider} bills storage apart; its price is not in this data")
    if machine is None:
        notes.append(f"{offer.provider} reported no price for {offer.instance_type}")
    lines = [CostLine(component=MACHINE, price_per_hour=machine,
                      total=money(machine * hours_d) if machine is not None else None)]
    if disk_line is not None:
        lines.append(disk_line)
    for usage in offer.usage_prices:
        lines.append(CostLine(component=usage.component, price_per_hour=None, total=None,
                              unit_price=usage.price, unit=f"{usage.unit} {usage.component}"))
    if offer.usage_prices:
        notes.append("charges by use (" + ", ".join(
            f"${u.price}/{u.unit} {u.component}" for u in offer.usage_prices)
            + ") are billed as used and are not in the total")
    per_hour: Decimal | None = None
    if not unknown:
        per_hour = sum((line.price_per_hour for line in lines
                        if line.price_per_hour is not None), Decimal(0))
    if offer.source == "catalog":
        notes.append(f"catalog price as of {offer.as_of or 'unknown date'}; live prices may differ")
    if offer.simulated:
        notes.append("simulated cloud: nothing is billed")
    return CostEstimate(offer=offer, hours=hours_d, price_per_hour=per_hour,
                        total=money(per_hour * hours_d) if per_hour is not None else None,
                        breakdown=tuple(lines), notes=tuple(notes), unknown=unknown)


def hours_for_budget(price_per_hour: Decimal, budget: Decimal) -> Decimal:
    """How long a machine can run before its spend reaches `budget`."""
    if price_per_hour <= 0:
        raise SpecError("cannot derive a deadline from a budget for a free machine")
    return budget / price_per_hour


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|s)", re.IGNORECASE)
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


DURATION_FORMS = "use a number with a unit (d, h, m, s): e.g. 4h, 90m, 1h30m or 2d"


def parse_duration(text: Any) -> timedelta:
    """"4h", "90m", "1h30m", "2d"; a number (not a string) is hours."""
    try:
        result = _duration(text)
    except OverflowError:
        raise SpecError(f"duration {text!r} is out of range", hint="use at most 10 years") from None
    if result <= timedelta(0):
        raise SpecError(f"duration must be positive, got {text!r}", hint="e.g. 4h")
    if result > timedelta(hours=int(MAX_HOURS)):
        raise SpecError(f"duration {text!r} is out of range", hint="use at most 10 years")
    return result


def _duration(text: Any) -> timedelta:
    if isinstance(text, timedelta):
        result = text
    elif isinstance(text, (int, float, Decimal)):
        result = timedelta(hours=float(text))
    else:
        raw = str(text).strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(\.\d+)?", raw):
            # "4" could be hours, minutes or days: text must say which.
            raise SpecError(f"duration {text!r} has no unit", hint=DURATION_FORMS)
        if raw and _DURATION.sub("", raw) == "":
            seconds = sum(Decimal(n) * _UNIT_SECONDS[u.lower()] for n, u in _DURATION.findall(raw))
            result = timedelta(seconds=float(seconds))
        else:
            raise SpecError(f"invalid duration {text!r}", hint=DURATION_FORMS)
    return result


def duration_hours(delta: timedelta) -> Decimal:
    return Decimal(int(delta.total_seconds())) / Decimal(3600)
