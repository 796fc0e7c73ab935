"""How adapters write and read times in tags, labels and env: ISO-8601 UTC,
to the second, with "Z"."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any


def format_utc(moment: datetime) -> str:
    """ISO-8601 UTC with "Z", to the second: how deadlines travel in tags, labels
    and env (short, and sorts as text). A naive time is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc(value: Any) -> datetime | None:
    """An ISO-8601 time read back from a provider, aware UTC; None for anything
    else (tags and labels are user-editable, so never crash)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)
