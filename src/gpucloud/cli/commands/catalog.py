"""Commands that cost nothing: offers, estimate, gpus, providers."""

from __future__ import annotations

from typing import Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import app
from gpucloud.cli.notices import QUIET, show_warnings




@app.command()
def offers(
    gpu: str = params.GPU,
    count: int = params.COUNT,
    provider: Optional[str] = params.PROVIDER,
    region: Optional[str] = params.REGION,
    spot: bool = typer.Option(False, "--spot", help="Spot/interruptible prices."),
    max_price: Optional[str] = typer.Option(None, "--max-price", metavar="USD",
                                            help="Highest USD per hour for the whole machine."),
    limit: int = typer.Option(20, "--limit", min=0, metavar="N",
                              help="Rows to show (0: all). Regions at one price share a row."),
    quiet: bool = QUIET,
    json_output: bool = params.JSON,
) -> None:
    """Compare prices for COUNT x GPU machines across providers, cheapest first."""
    from gpucloud.client import Client
    from gpucloud.catalog.pricing import unknown_parts

    client = Client()
    # Rows as the SDK's offers() has them before they become Offer objects: all the
    # table and --json need, without importing pydantic for catalog-only rows.
    found = client._offer_rows(gpu=gpu, count=count, provider=provider, region=region,
                               spot=spot, max_price=max_price)
    if json_output:
        # `unknown` names the parts whose price is not known, as an estimate does:
        # a price_per_hour of "0" with ["GPU instance"] is no price, not a free machine.
        output.emit_json({"offers": [{**output.dump(o), "unknown": list(unknown_parts(o))}
                                     for o in found],
                          "warnings": client.warnings})
        return
    show_warnings(client, quiet)
    if not found:
        output.err(f"no offers for {count}x {gpu}"
                   + (f" on {provider}" if provider else "") + (f" in {region}" if region else ""))
        return
    groups = output.group_offers(found)
    shown = groups if limit == 0 else groups[:limit]
    output.out(output.offers_table(shown))
    if len(shown) < len(groups):
        output.note(f"... {len(groups) - len(shown)} more rows (--limit 0 shows all; "
                   "--json lists every region)")
    unknown = output.unknown_price_note([o for o, _ in shown])
    if unknown:
        output.note(unknown)
    if any(o.source == "catalog" for o, _ in shown):
        output.note("catalog rows are published list prices; set a provider's credentials "
                   "for live prices and availability")


@app.command()
def estimate(
    gpu: str = params.GPU,
    count: int = params.COUNT,
    hours: str = typer.Option("1h", "--hours", metavar="DURATION",
                              help="How long the machine runs, e.g. 72h, 90m, 1h30m, 2d."),
    provider: Optional[str] = params.PROVIDER,
    region: Optional[str] = params.REGION,
    disk_gb: Optional[int] = typer.Option(None, "--disk-gb", min=1, metavar="GB",
                                          help="Disk size, where billed."),
    quiet: bool = QUIET,
    json_output: bool = params.JSON,
) -> None:
    """Estimate the cost of the cheapest matching machine over --hours."""
    from gpucloud.client import Client
    from gpucloud.catalog.pricing import duration_hours, parse_duration

    # The same durations as --auto-shutdown; a bare "72" is refused with the forms.
    span = duration_hours(parse_duration(hours))
    client = Client()
    result = client.estimate(gpu=gpu, count=count, hours=span, provider=provider,
                             region=region, disk_gb=disk_gb)
    if json_output:
        output.emit_json({**output.dump(result), "warnings": client.warnings})
        return
    show_warnings(client, quiet)
    output.out(output.estimate_text(result))


@app.command()
def gpus(json_output: bool = params.JSON) -> None:
    """List the GPU names gpucloud knows (aliases resolve to these)."""
    from gpucloud.catalog.gpus import GPUS

    if json_output:
        output.emit_json({"gpus": [{"name": g.name, "vendor": g.vendor, "memory_gb": g.memory_gb}
                                   for g in GPUS]})
        return
    output.out(output.table(["GPU", "VENDOR", "MEMORY"],
                            [[g.name, g.vendor, f"{g.memory_gb} GB"] for g in GPUS]))
    output.note('a bare "a100" means A100-40GB; ask for a100-80gb for the larger card')


# The table's short words for each capability (the JSON keeps the field names).
CAPABILITY_WORDS = {"spot": "spot", "stop_start": "stop/start", "custom_disk": "disk size",
                    "needs_ssh_key": "needs ssh key",
                    "native_shutdown": "deadline held by provider",
                    "self_guard": "deadline guard on machine", "jobs": "jobs",
                    "volumes": "volumes",
                    "shared_volumes": "volumes on every node",
                    "multi_node_retries": "multi-node retries"}


def _capability_words(capabilities: dict[str, bool | str] | None) -> str:
    if capabilities is None:
        return "-"
    words = [CAPABILITY_WORDS.get(k, k) for k, v in capabilities.items() if v is True]
    if capabilities.get("multi_node", "none") != "none":
        words.append(f"multi-node ({capabilities['multi_node']})")
    return ", ".join(words) or "-"


@app.command()
def providers(json_output: bool = params.JSON) -> None:
    """Known providers, whether credentials are found, and where from."""
    from gpucloud.client import Client
    from gpucloud.config.credentials import NO_KEYRING_ADVICE

    client = Client()
    statuses = client.providers()
    problem = client.keyring_problem
    if json_output:
        output.emit_json({"providers": [output.dump(s) for s in statuses],
                          "keyring_problem": problem})
        return
    output.out(output.table(
        ["PROVIDER", "NAME", "CREDENTIALS", "FROM", "CATALOG AS OF", "CAPABILITIES", "NOTE"],
        [[s.name, s.display_name, "yes" if s.credentials else "no", s.source or "-",
          s.catalog_as_of or "-", _capability_words(s.capabilities),
          s.hint or ("simulated, nothing billed" if s.simulated else "")]
         for s in statuses], shrink=(1, 6)))
    if problem:
        output.note(f"note: the system keyring is unusable here ({problem}): "
                    + NO_KEYRING_ADVICE)
