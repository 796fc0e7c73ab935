"""A moved deadline kept in a machine's *name*: `` gc-until:20261201T180000Z``.

Lambda cannot change tags after launch and RunPod restarts a pod whose env
changes (tests/fixtures/{lambda,runpod}/SOURCE.txt), so ``extend`` there
renames the machine instead: the user's name, then this marker. Reads take
the later of the original copy (tag, env) and the marker; ``Instance.name``
shows the user's part only, so nobody sees the marker in ``gpucloud list``.

Names are user-editable: a marker that does not parse is ignored (never an
error, never a later deadline), and a rename that drops the marker can only
make the reaper act earlier (at the original deadline), never later.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

MARKER = "gc-until:"
_FORMAT = "%Y%m%dT%H%M%SZ"  # compact: the name has room for little (Lambda: 64)
_TOKEN = re.compile(r"(?:^|\s)" + re.escape(MARKER) + r"(\S*)")


def format_marker(deadline: datetime) -> str:
    return MARKER + deadline.astimezone(timezone.utc).strftime(_FORMAT)


def parse_marker_value(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, _FORMAT).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def split_name(name: str | None) -> tuple[str | None, datetime | None]:
    """(the user's part of a name, the latest valid marker in it)."""
    if not name:
        return name or None, None
    if MARKER not in name:  # most names: no marker to look for (a listing reads every one)
        return name, None
    found = [parse_marker_value(m.group(1)) for m in _TOKEN.finditer(name)]
    valid = [d for d in found if d is not None]
    user = " ".join(_TOKEN.sub(" ", name).split()) if found else name
    return user or None, max(valid) if valid else None


def mark_name(user_name: str | None, deadline: datetime, max_len: int | None = None) -> str:
    """The user's name cut to fit, then the marker (the marker is never cut)."""
    marker = format_marker(deadline)
    user = (user_name or "").strip()
    if max_len is not None:
        user = user[:max(0, max_len - len(marker) - 1)].rstrip()
    return f"{user} {marker}" if user else marker


def latest(*moments: datetime | None) -> datetime | None:
    """The latest of the copies that parsed; None when none did."""
    valid = [m for m in moments if m is not None]
    return max(valid) if valid else None


__all__ = ["MARKER", "format_marker", "latest", "mark_name", "parse_marker_value",
           "split_name"]
