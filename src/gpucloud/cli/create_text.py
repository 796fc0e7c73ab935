"""What `create` says: the plan and its price, the waits, and an interrupted create's
report (shared with `submit` and `queue workers add`)."""

from __future__ import annotations

from typing import Any

from gpucloud.catalog import pricing
from gpucloud.cli import output
from gpucloud.cli.app import fail


def _unknown(plan: Any) -> str:
    """Which part of the plan's price is not known, to say next to "unknown"."""
    return f"price unknown for: {', '.join(plan.estimate.unknown)}"


def _hourly(plan: Any) -> str:
    """The price per machine for the confirmation prompt; never "-" or $0."""
    if plan.estimate.price_per_hour is None:
        return f"at an unknown price per hour ({_unknown(plan)})"
    return f"at {output.usd(plan.estimate.price_per_hour)}/hour each"


def _total(plan: Any) -> str:
    """What all the machines of a batch cost together, for its confirmation."""
    if plan.instances == 1:
        return ""
    hourly = (f"{output.usd(plan.total_per_hour)}/hour" if plan.total_per_hour is not None
              else "an unknown price per hour")
    window = f", {output.usd(plan.total)} over the window" if plan.total is not None else ""
    return f" (TOTAL for {plan.instances} machines: {hourly}{window})"


def plan_text(plan: Any) -> str:
    o = plan.offer
    lines = ["Plan:", output.estimate_text(plan.estimate)]
    per_hour = (f"{output.usd(plan.total_per_hour)}/h" if plan.total_per_hour is not None
                else f"unknown per hour ({_unknown(plan)})")
    if plan.instances > 1:
        lines.append(f"  x {plan.instances} machines = {per_hour}")
    if plan.total is not None:
        lines.append(f"  total over the window ({plan.hours_basis.replace('_', '-')}): "
                     f"{output.usd(plan.total)} USD")
    elif plan.hours_basis == "per_hour":
        lines.append(f"  total: {per_hour} until deleted (no --auto-shutdown or --max-cost)")
    else:
        lines.append(f"  total over the window: unknown ({_unknown(plan)})")
    if plan.shutdown_at:
        left = output.span(plan.shutdown_at - output.utcnow())
        lines.append(f"  deadline: {output.iso(plan.shutdown_at)} (in {left}); the reaper "
                     "terminates the machine then (`gpucloud reap`)")
    else:
        lines.append("  deadline: none (runs until deleted)")
    lines.extend(f"  note: {n}" for n in plan.notes)
    if plan.alternatives:
        lines.append("Next cheapest:")
        lines.extend(f"  {a.provider} {a.instance_type} {a.region}  {output.offer_price(a, '/h')}"
                     for a in plan.alternatives[:3])
        tried = plan.alternatives[:MAX_SHOWN_FALLBACKS]
        known = [a.price_per_hour for a in tried if not pricing.unknown_parts(a)]
        bound = ", ".join(([f"up to {output.usd(max(known))}/h"] if known else [])
                          + (["some at a price not known"] if len(known) < len(tried) else []))
        lines.append(f"  if an offer has no capacity, the next is tried (at most "
                     f"{MAX_SHOWN_FALLBACKS + 1} launches, {bound})")
    if o.simulated:
        lines.append("SANDBOX: a simulated cloud; no real GPU is created and nothing is billed.")
    return "\n".join(lines)


MAX_SHOWN_FALLBACKS = 2  # launcher.MAX_ATTEMPTS - 1, without importing the launcher


def wait_all(client: Any, made: list[Any], wait: bool, timeout: int, as_json: bool) -> None:
    for index, instance in enumerate(made if wait else ()):
        if not as_json:
            output.err(f"waiting for {instance.ref} to be running (at most {timeout} s)...")
        made[index] = client.wait(instance, until="running", timeout=timeout)


def _interrupted(made: list[Any], in_flight: list[Any], as_json: bool) -> None:
    """Ctrl-C during create: name every machine that exists or may exist."""
    refs = " ".join(i.ref for i in made)
    parts = []
    if made:
        parts.append(f"{len(made)} machine(s) were created and are running: {refs}")
    if in_flight:
        parts.append("launch(es) in flight may have created a machine: " + ", ".join(
            f"{a.provider} launch id {a.launch_id}" for a in in_flight))
    if not parts:
        fail(130, "interrupted", "interrupted: no machine was created", None, as_json)
    hints = []
    if made:
        hints.append(f"delete with: gpucloud delete {refs}")
    if in_flight:  # reconcile finds a machine by its launch id and records it
        hints.append("run `gpucloud reconcile` to find and record what they launched")
    for provider in sorted({a.provider for a in in_flight}):
        ids = ", ".join(a.launch_id for a in in_flight if a.provider == provider)
        hints.append(f"look for launch id {ids} in `gpucloud list --provider {provider}`")
    if not as_json:
        for instance in made:
            output.err(f"exists: {instance.ref} (launch id {instance.launch_id or '-'})")
        for attempt in in_flight:
            named = (f"{attempt.provider}/{attempt.instance_id}, the id the create reply "
                     "named, not yet read back; " if attempt.instance_id else "")
            output.err(f"may exist: {attempt.provider} {attempt.instance_type} in "
                       f"{attempt.region} ({named}launch id {attempt.launch_id})")
    fail(130, "interrupted", "interrupted: " + "; ".join(parts), "; ".join(hints), as_json,
         {"instances": [output.dump(i) for i in made],
          "in_flight": [output.dump(a) for a in in_flight]})
