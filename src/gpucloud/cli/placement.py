"""Where a machine of a batch landed, and why it moved there.

A launch that finds no capacity (or an offer refused, or a quota reached)
fails over to the next offer (core/launch.py); each machine's own attempts say
which offers were passed over. The batch's lines name them, so that machines
spread over regions or providers are no surprise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_WHY = {"no_capacity": "no capacity", "offer_refused": "offer refused",
        "quota_exceeded": "quota reached"}


def landed(instance: Any, status: str | None = None) -> str:
    """`sandbox/sbx-1 in sim-east-1 (sandbox sim.1xH100)`; with `status`,
    `sandbox/sbx-1 (pending) in ...`, the shape of a single create's line."""
    where = f" in {instance.region}" if instance.region else ""
    what = " ".join(p for p in (instance.provider, instance.instance_type) if p)
    state = f" ({status})" if status else ""
    return f"{instance.ref}{state}{where} ({what})"


def moves(attempts: Sequence[Any], instance: Any) -> str | None:
    """`moved: no capacity in sim-west-1, no capacity in sim-eu-1`: the offers this
    machine's launch passed over before it landed (None when it took the first)."""
    passed = []
    for attempt in attempts:
        if attempt.outcome != "failed" or attempt.error_code not in _WHY:
            continue
        place = attempt.region if attempt.provider == instance.provider \
            else f"{attempt.provider} {attempt.region}"
        passed.append(f"{_WHY[attempt.error_code]} in {place}")
    return "moved: " + ", ".join(passed) if passed else None


def line(item: Any) -> str:
    """A created machine of a batch: where it landed, and why there."""
    text = landed(item.instance)
    moved = moves(item.attempts, item.instance)
    return f"{text}; {moved}" if moved else text
