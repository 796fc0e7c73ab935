"""Rendering: plain aligned tables for people, one JSON document for scripts.

Money is printed as a decimal string, times as ISO-8601 UTC. Everything a
provider sends (names, statuses, error messages) passes through ``clean``
before it reaches a terminal: a machine named ``"\\x1b[2J"`` must not clear
the user's screen, and a name with a newline must not forge a table row.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

# C0/C1 controls and DEL, line/paragraph separators, and the bidi overrides
# that can make text read differently from what it is.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
ELLIPSIS = "…"


def clean(value: Any) -> str:
    """One printable line: control characters become visible escapes (\\x1b, \\n)."""
    text = "" if value is None else str(value)
    return _UNSAFE.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}")
                       if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, default=_default) + "\n")


def emit_json_stream(key: str, items: Iterable[Any], rest: Callable[[], dict[str, Any]]) -> None:
    """The document emit_json({key: [dump(i) for i in items], **rest()}) prints,
    byte for byte, written item by item as `items` come: nothing holds them all,
    nor the whole text. `rest` is asked once the items are done (a listing's
    warnings are known then).

    Should `items` fail part way, what was written is closed as a document
    still: the items so far and the error beside them (`{"KEY": [...], "error":
    {...}}`, the shape of an error that leaves something behind), then the
    exit code of that error."""
    encode = json.JSONEncoder(default=_default).encode  # as json.dumps(..., default=)
    write = sys.stdout.write
    write("{" + encode(key) + ": [")
    separator = ""
    try:
        for item in items:
            write(separator + encode(dump(item)))
            separator = ", "
    except BaseException as exc:
        _close_with_error(exc)
        raise
    tail = rest()
    write("]" + "".join(f", {encode(k)}: {encode(v)}" for k, v in tail.items()) + "}\n")


def _close_with_error(exc: BaseException) -> None:
    """End a streamed document with the error that cut it short, and exit with
    its code (as the CLI's one error handler would, had nothing been written)."""
    from gpucloud.errors import GpuCloudError, exit_code_for

    if isinstance(exc, BrokenPipeError):
        return  # the reader went away: nothing to close (the handler exits 141)
    if isinstance(exc, GpuCloudError):
        code, name, message, hint = exit_code_for(exc), exc.code, exc.message, exc.hint
    elif isinstance(exc, KeyboardInterrupt):
        code, name, message, hint = 130, "interrupted", "interrupted", None
    else:  # a bug
        import logging

        if logging.getLogger("gpucloud").isEnabledFor(logging.DEBUG):
            return  # the handler lets its traceback through
        code, name, message = 1, "internal", f"internal error: {type(exc).__name__}: {exc}"
        hint = "this is a bug in gpucloud; rerun with --debug for the traceback"
    error = {"code": name, "message": message, "hint": hint, "exit_code": code}
    sys.stdout.write("], " + json.dumps("error") + ": " + json.dumps(error) + "}\n")
    sys.stdout.flush()
    import typer

    raise typer.Exit(code) from exc


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return iso(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dump(model: Any) -> Any:
    if hasattr(model, "as_json"):  # a CatalogOffer: an Offer's JSON without pydantic
        return model.as_json()
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


def terminal_width() -> int | None:
    """Columns to fit tables into: $COLUMNS when set, else the terminal's; None
    when stdout is not a terminal (a pipe gets whole lines)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        import shutil

        return shutil.get_terminal_size().columns
    return None


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
          shrink: Sequence[int] = (), keep: Sequence[int] = (), width: int | None = None,
          drop: Sequence[int] = ()) -> str:
    """Aligned columns, two spaces apart, fitted to `width` (default: the
    terminal's) as columns.py lays them out: the `shrink` columns (free text
    such as names) are cut first, then the `drop` columns are left out in that
    order, then any column but the `keep` ones (what users copy, like a ref) is
    cut, all with an ellipsis; a line that still does not fit is cut at the edge."""
    return _fitted(headers, rows, shrink, keep, width, drop)[0]


def _fitted(headers: Sequence[str], rows: Sequence[Sequence[Any]], shrink: Sequence[int],
            keep: Sequence[int], width: int | None, drop: Sequence[int]) -> tuple[str, list[int]]:
    """The table's text and the columns it shows."""
    from gpucloud.cli.columns import layout

    cells = [[clean(h) for h in headers]] + [[clean(c) for c in r] for r in rows]
    natural = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    limit = terminal_width() if width is None else width
    shown, widths = (layout(natural, headers, limit, shrink, keep, drop) if limit
                     else (list(range(len(headers))), dict(enumerate(natural))))
    lines = ["  ".join(_cut(row[i], widths[i]).ljust(widths[i]) for i in shown).rstrip()
             for row in cells]
    if limit:
        lines = [_cut(line, limit) for line in lines]
    return "\n".join(lines), shown


def fits(headers: Sequence[str], rows: Sequence[Sequence[Any]], width: int | None) -> bool:
    """Whether every column fits whole in `width` (None: no limit)."""
    if not width:
        return True
    cells = [list(map(clean, headers))] + [[clean(c) for c in r] for r in rows]
    natural = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return sum(natural) + 2 * (len(natural) - 1) <= width


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + ELLIPSIS


def out(text: str = "") -> None:
    """Lines on stdout. Each line is cleaned as well, so no escape sequence gets
    through whatever built the text; the cells of a table are cleaned before
    layout, so a newline inside a value cannot forge a row."""
    sys.stdout.write("\n".join(clean(line) for line in text.split("\n")) + "\n")


def note(text: str) -> None:
    """A sentence on stdout, wrapped to the terminal's width like the tables."""
    width = terminal_width()
    if width:
        import textwrap

        text = "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text
    out(text)


def err(text: str) -> None:
    """One line on stderr (messages quote providers, so it is cleaned whole)."""
    sys.stderr.write(clean(text) + "\n")


def warn(text: str) -> None:
    err(f"warning: {text}")


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


def offer_price(offer: Any, unit: str = "") -> str:
    """An offer's hourly price as far as it is known: "unknown" when the machine's
    is (a live price of 0), "$16.00 + disk?" when a part billed apart is."""
    from gpucloud.catalog.pricing import MACHINE, unknown_parts

    unknown = unknown_parts(offer)
    if MACHINE in unknown:
        return "unknown"
    return " + ".join([usd(offer.price_per_hour) + unit]
                      + [part.split(" (")[0] + "?" for part in unknown])


def unknown_price_note(offers: Sequence[Any]) -> str | None:
    """What the table's unknown marks mean, for the marks it shows."""
    from gpucloud.catalog.pricing import MACHINE, unknown_parts

    unknown = [unknown_parts(o) for o in offers]
    parts = []
    if any(MACHINE in u for u in unknown):
        parts.append("unknown: the provider gave no price (0 is not a free machine)")
    if any(u and MACHINE not in u for u in unknown):
        parts.append('"+ disk?": storage is billed apart at a rate not in this data')
    if not parts:
        return None
    return "; ".join(parts) + ". These offers come after every fully priced one."


def offers_table(groups: Sequence[tuple[Any, list[str]]], width: int | None = None) -> str:
    """At a width the instance type (what `create` launches) and the price stay
    whole: the region list is cut first, then PRICE SOURCE and REGIONS are left
    out (a line under the table then names the price sources), then the
    provider, GPUs and availability are cut."""
    limit = terminal_width() if width is None else width
    text, shown = _fitted(
        ["PROVIDER", "INSTANCE TYPE", "GPUS", "$/HOUR", "AVAILABLE", "REGIONS", "PRICE SOURCE"],
        [[o.provider, o.instance_type, f"{o.gpu_count}x {o.gpu}", offer_price(o),
          availability(o), regions[0] + (f" +{len(regions) - 1}" if len(regions) > 1 else ""),
          offer_source(o)] for o, regions in groups],
        shrink=(5,), keep=(1, 3), width=limit or 0, drop=(6, 5))
    if 6 in shown or not groups:
        return text
    sources = list(dict.fromkeys(offer_source(o) for o, _ in groups))
    said = (f"price source: {sources[0]}" if len(sources) == 1
            else f"price sources: {', '.join(sources)} (--json gives each row's)")
    import textwrap

    return "\n".join([text, *textwrap.wrap(said, limit or len(said), break_on_hyphens=False)])


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


def span(delta: timedelta) -> str:
    """A duration as people read it: 45s, 12m, 3h05m, 2d04h."""
    seconds = max(0, int(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m" if minutes else f"{secs}s"


def _now() -> datetime:
    return datetime.now(timezone.utc)


utcnow = _now


def deadline(i: Any) -> str | None:
    """A deadline, short enough for a table column: 12-01 18:00Z."""
    if i.shutdown_at is None or _ended(i):
        return None
    return i.shutdown_at.astimezone(timezone.utc).strftime("%m-%d %H:%MZ")


def _ended(i: Any) -> bool:
    return i.status.value == "terminated"


def age(i: Any, now: datetime | None = None) -> str | None:
    return span((now or _now()) - i.created_at) if i.created_at else None


def time_left(i: Any, now: datetime | None = None) -> str | None:
    """Until the deadline; "due" once it has passed on a machine still up."""
    if i.shutdown_at is None or _ended(i):
        return None
    left = i.shutdown_at - (now or _now())
    return span(left) if left > timedelta(0) else "due"


def cost_so_far(i: Any, now: datetime | None = None) -> Decimal | None:
    """Hourly price x age: what a machine still up has cost since it was created
    (an upper bound for one that was stopped for a while). None when unknown."""
    if i.price_per_hour is None or i.created_at is None or _ended(i):
        return None
    seconds = max(0, int(((now or _now()) - i.created_at).total_seconds()))
    return (i.price_per_hour * seconds / 3600).quantize(Decimal("0.01"))


def hourly(i: Any) -> str:
    """A terminated machine bills nothing more: it shows no hourly price."""
    return "-" if _ended(i) else usd(i.price_per_hour)


# `list` at a width: what a reader acts on stays whole; the rest is left out,
# least useful first (columns.py). LAUNCH ID only matters to reconcile, IP to
# ssh (which takes the ref), AGE says less than LEFT and COST, the ref names a
# machine as well as its NAME, LEFT says what DEADLINE does, REGION last.
INSTANCE_HEADERS = ("REF", "NAME", "STATUS", "GPUS", "REGION", "$/HOUR", "AGE", "DEADLINE",
                    "LEFT", "COST", "IP", "LAUNCH ID")
_INSTANCE_KEEP = (0, 2, 3, 5, 8, 9)
_INSTANCE_DROP = (11, 10, 6, 1, 7, 4)
SIMULATED_MARK, SIMULATED_SHORT = " (simulated)", " (sim)"


def cost(i: Any, now: datetime | None = None) -> Decimal | None:
    """A machine still up: its cost so far; a terminated one: what it cost in
    all, as the cost ledger has it (None when the ledger does not know)."""
    return getattr(i, "final_cost", None) if _ended(i) else cost_so_far(i, now)


def instances_table(instances: Sequence[Any], now: datetime | None = None,
                    width: int | None = None) -> str:
    now = now or _now()
    limit = terminal_width() if width is None else width

    def rows(mark: str) -> list[list[Any]]:
        return [[i.ref + (mark if i.simulated else ""), i.name or "-", i.status.value,
                 f"{i.gpu_count}x {i.gpu}" if i.gpu_count else (i.gpu or "-"), i.region or "-",
                 hourly(i), age(i, now) or "-", deadline(i) or "-", time_left(i, now) or "-",
                 usd(cost(i, now)), i.ip or "-", i.launch_id or "-"] for i in instances]

    found = rows(SIMULATED_MARK)
    if not fits(INSTANCE_HEADERS, found, limit):
        found = rows(SIMULATED_SHORT)
    return table(INSTANCE_HEADERS, found, shrink=(1, 4), keep=_INSTANCE_KEEP,
                 width=limit or 0, drop=_INSTANCE_DROP)


def _ssh_endpoint(i: Any) -> str | None:
    """user@host:port for machines reached over ssh (`gpucloud ssh REF` logs in)."""
    c = i.connection
    if c is None or c.method != "ssh":
        return None
    return f"{c.user}@{c.host}:{c.port}  (gpucloud ssh {i.ref})"


def instance_text(i: Any, now: datetime | None = None) -> str:
    now = now or _now()
    cost = cost_so_far(i, now)
    fields = [
        ("ref", i.ref), ("name", i.name),
        ("status", i.status.value + (f" ({i.provider_status})" if i.provider_status
                                     and i.provider_status != i.status.value else "")),
        ("gpus", f"{i.gpu_count}x {i.gpu}" if i.gpu_count else i.gpu),
        ("instance type", i.instance_type), ("region", i.region),
        ("price", f"{usd(i.price_per_hour)}/h"
         if i.price_per_hour is not None and not _ended(i) else None),
        ("ip", i.ip), ("ssh", _ssh_endpoint(i)),
        ("created at", iso(i.created_at)), ("age", age(i, now)),
        ("shutdown at", iso(i.shutdown_at)), ("time left", time_left(i, now)),
        ("cost so far", f"{usd(cost)} (price x age)" if cost is not None else None),
        ("launch id", i.launch_id),
    ]
    text = "\n".join(f"{k:<14} {clean(v)}" for k, v in fields if v is not None)
    if i.simulated:
        text += "\nnote           simulated machine (sandbox): no real GPU, nothing billed"
    return text
