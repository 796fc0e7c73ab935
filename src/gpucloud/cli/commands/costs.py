"""`gpucloud costs`: a month's spend from the cost ledger."""

from __future__ import annotations

import enum
from typing import Any, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import app


class By(str, enum.Enum):
    provider = "provider"
    instance = "instance"
    name = "name"
    user = "user"
    project = "project"
    task = "task"


def _amount(value: Any) -> str:
    return output.usd(value) if value is not None else "unknown"


def _hours(value: Any) -> str:
    return f"{value:.2f}"


def costs_table(report: Any) -> str:
    if report.by == "instance":
        return output.table(
            ["INSTANCE", "NAME", "STATUS", "$/HOUR", "HOURS RUN", "HOURS STOPPED", "SPENT",
             "PROJECTED", "TOTAL"],
            [[line.key + (" (simulated)" if line.simulated else ""),
              line.name or "-", line.status or "-",
              _amount(line.price_per_hour), _hours(line.running_hours),
              _hours(line.stopped_hours), _amount(line.spent), _amount(line.projected),
              _amount(line.total)] for line in report.lines],
            shrink=(1,), keep=(0,))
    return output.table(
        [report.by.upper(), "MACHINES", "HOURS RUN", "HOURS STOPPED", "SPENT", "PROJECTED",
         "TOTAL"],
        [[line.key, str(len(line.instances)), _hours(line.running_hours),
          _hours(line.stopped_hours), _amount(line.spent), _amount(line.projected),
          _amount(line.total)] for line in report.lines],
        shrink=(0,) if report.by == "name" else ())


def volumes_table(report: Any) -> str:
    """Storage: one line per volume, billed by the GB-month (in the totals)."""
    return output.table(
        ["VOLUME", "NAME", "SIZE", "STATUS", "$/GB-MONTH", "HOURS", "SPENT", "PROJECTED",
         "TOTAL"],
        [[v.ref + (" (simulated)" if v.simulated else ""), v.name, f"{v.size_gb} GB",
          v.status, output.usd(v.price_per_gb_month, 3) if v.price_per_gb_month is not None
          else "unknown", _hours(v.hours), _amount(v.spent), _amount(v.projected),
          _amount(v.total)] for v in report.volumes],
        shrink=(1,), keep=(0,))


def summary_text(report: Any) -> str:
    lines = [f"{report.month} (UTC) as of {output.iso(report.at)}: spent "
             f"{_amount(report.spent)}, projected {_amount(report.projected)}, total "
             f"{_amount(report.total)} {report.currency}"]
    if report.unknown:
        lines.append(f"  known part: spent {output.usd(report.spent_known)}, projected "
                     f"{output.usd(report.projected_known)}; price unknown for "
                     f"{', '.join(report.unknown)}")
    if report.budget is not None:
        lines.append(f"  monthly budget {output.usd(report.budget)}: "
                     f"{_share(report)} spent or projected")
    lines.extend(f"  note: {n}" for n in report.notes)
    return "\n".join(lines)


def _share(report: Any) -> str:
    from decimal import Decimal

    used = report.spent_known + report.projected_known
    share = f"{(used * 100 / report.budget).quantize(Decimal('0.1'))} %"
    return share if not report.unknown else f"at least {share}"


@app.command()
def costs(
    month: Optional[str] = typer.Option(None, "--month", metavar="YYYY-MM",
                                        help="The month (UTC), e.g. 2026-11; default: this one."),
    by: By = typer.Option(By.instance, "--by", metavar="|".join(b.value for b in By),
                          help="One line per provider, per machine, per machine name, per "
                               "user who launched it (GPUCLOUD_USER), per --project, or "
                               "per queue task that launched it."),
    json_output: bool = params.JSON,
) -> None:
    """Spend this month (or --month): so far, and projected for what still runs.

    From the cost ledger (every start, stop, termination and price gpucloud
    has seen, and every volume, billed by the GB-month), after a listing of
    the providers. Unknown prices are shown as
    unknown, never as zero.
    """
    from gpucloud.client import Client

    client = Client()
    report = client.costs(month=month, by=by.value)
    if json_output:
        output.emit_json(output.dump(report))
        return
    for warning in report.warnings:
        output.warn(warning)
    if report.lines:
        output.out(costs_table(report))
    elif not report.volumes:
        output.err(f"no machine ran or is projected to run in {report.month}")
    if report.volumes:
        output.out(("\n" if report.lines else "") + "Storage (volumes):")
        output.out(volumes_table(report))
    output.out(summary_text(report))
