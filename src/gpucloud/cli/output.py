"""Rendering: plain aligned tables for people, one JSON document for scripts.

Money is printed as a decimal string, times as ISO-8601 UTC.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any


def emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, default=_default) + "\n")


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return iso(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dump(model: Any) -> Any:
    return model.model_dump(mode="json")


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def usd(value: Decimal | None, places: int = 2) -> str:
    """Dollars with cents; more places only where cents would hide the amount."""
    if value is None:
        return "-"
    while places < 4 and value != value.quantize(Decimal(1).scaleb(-places)):
        places += 1
    return f"${value:,.{places}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    sys.stderr.write(text + "\n")


def offer_source(offer: Any) -> str:
    if offer.simulated:
        return "simulated"
    if offer.source == "catalog":
        return f"catalog {offer.as_of or ''}".strip()
    return "live"


def availability(offer: Any) -> str:
    return {True: "yes", False: "no", None: "?"}[offer.available]


def group_offers(offers: Sequence[Any]) -> list[tuple[Any, list[str]]]:
    """Offers that differ only by region, as (first offer, regions) in price order."""
    groups: dict[tuple[Any, ...], tuple[Any, list[str]]] = {}
    for o in offers:
        key = (o.provider, o.instance_type, o.price_per_hour, o.available, o.source, o.spot)
        groups.setdefault(key, (o, []))[1].append(o.region)
    return list(groups.values())


def offers_table(groups: Sequence[tuple[Any, list[str]]]) -> str:
    return table(
        ["PROVIDER", "INSTANCE TYPE", "GPUS", "$/HOUR", "AVAILABLE", "REGIONS", "PRICE SOURCE"],
        [[o.provider, o.instance_type, f"{o.gpu_count}x {o.gpu}", usd(o.price_per_hour),
          availability(o), regions[0] + (f" +{len(regions) - 1}" if len(regions) > 1 else ""),
          offer_source(o)] for o, regions in groups])


def estimate_text(estimate: Any) -> str:
    o = estimate.offer
    hours = _hours(estimate.hours)
    lines = [f"{o.gpu_count}x {o.gpu} on {o.provider} ({o.instance_type}, {o.region})"
             + ("  [SIMULATED]" if o.simulated else "")]
    for line in estimate.breakdown:
        if line.unit is not None:  # billed by use: its own unit, outside the total
            lines.append(f"  {line.component:<20} {usd(line.unit_price)}/{line.unit}  "
                         "(billed as used, not in the total)")
            continue
        lines.append(f"  {line.component:<20} {_per_hour(line.price_per_hour)}  "
                     f"x {hours} h = {_amount(line.total)}")
    lines.append(f"  {'total':<20} {_per_hour(estimate.price_per_hour)}  "
                 f"x {hours} h = {_amount(estimate.total)} {estimate.currency}")
    if estimate.unknown:
        lines.append(f"  price unknown for: {', '.join(estimate.unknown)}")
    lines.extend(f"  note: {n}" for n in estimate.notes)
    return "\n".join(lines)


def _per_hour(value: Decimal | None) -> str:
    return f"{usd(value)}/h" if value is not None else "unknown"


def _amount(value: Decimal | None) -> str:
    return usd(value) if value is not None else "unknown"


def _hours(value: Decimal) -> str:
    places = "0.01" if value >= 1 else "0.0001"
    text = f"{value.quantize(Decimal(places))}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def instances_table(instances: Sequence[Any]) -> str:
    return table(
        ["REF", "NAME", "STATUS", "GPUS", "REGION", "$/HOUR", "SHUTDOWN AT"],
        [[i.ref + (" (simulated)" if i.simulated else ""), i.name, i.status.value,
          f"{i.gpu_count}x {i.gpu}" if i.gpu_count else (i.gpu or "-"), i.region,
          usd(i.price_per_hour), iso(i.shutdown_at) or "-"] for i in instances])


def instance_text(i: Any) -> str:
    fields = [
        ("ref", i.ref), ("name", i.name),
        ("status", i.status.value + (f" ({i.provider_status})" if i.provider_status
                                     and i.provider_status != i.status.value else "")),
        ("gpus", f"{i.gpu_count}x {i.gpu}" if i.gpu_count else i.gpu),
        ("instance type", i.instance_type), ("region", i.region),
        ("price", f"{usd(i.price_per_hour)}/h" if i.price_per_hour is not None else None),
        ("ip", i.ip), ("created at", iso(i.created_at)), ("shutdown at", iso(i.shutdown_at)),
        ("launch id", i.launch_id),
    ]
    text = "\n".join(f"{k:<14} {v}" for k, v in fields if v is not None)
    if i.simulated:
        text += "\nnote           simulated machine (sandbox): no real GPU, nothing billed"
    return text
