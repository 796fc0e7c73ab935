"""What the CLI prints for people: provider text cannot drive the terminal,
`list` says how old each machine is, how long it has left and what it has cost,
and tables fit the terminal."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud.cli import app, output
from gpucloud.models import Instance, InstanceStatus

EVIL = "evil\x1b[31m\nerror: forged\u202e"


def invoke(*args, input=None):
    return CliRunner().invoke(app, list(args), input=input)


def create(*extra):
    result = invoke("create", "--gpu", "h100", "--provider", "sandbox", "--yes", "--json", *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["instance"]


def columns(text):
    """Rows of a table as dicts, cut at the header's column starts."""
    lines = text.rstrip("\n").split("\n")
    header = lines[0]
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 2:i] == "  ")]
    names = [header[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
    return [dict(zip(names, (line[a:b].strip() for a, b in zip(starts, starts[1:] + [None]))))
            for line in lines[1:]]


def test_clean_escapes_controls_and_keeps_text():
    assert output.clean("a\x1b[31mb\nc\td\x7f\u202e") == "a\\x1b[31mb\\nc\\td\\x7f\\u202e"
    assert output.clean("H100 · 80 GB … ok") == "H100 · 80 GB … ok"
    assert output.clean(output.clean("\x1b")) == "\\x1b"


def test_a_hostile_machine_name_cannot_drive_the_terminal():
    made = create("--name", EVIL)
    listed = invoke("list")
    assert listed.exit_code == 0, listed.output
    assert "\x1b" not in listed.output and "\u202e" not in listed.output
    assert len(listed.stdout.rstrip("\n").split("\n")) == 2  # header + one row: nothing forged
    assert "evil\\x1b[31m\\nerror: forged" in listed.stdout
    shown = invoke("get", made["ref"])
    assert "\x1b" not in shown.output and "error: forged" not in shown.stdout.split("\n")
    # --json keeps the data as it is (JSON escapes it)
    data = json.loads(invoke("get", made["ref"], "--json").stdout)
    assert data["name"] == EVIL


def test_a_hostile_provider_error_message_is_one_escaped_line(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "lambda-key")
    with respx.mock(assert_all_mocked=True) as router:
        router.get("https://cloud.lambda.ai/api/v1/instances/abc").mock(
            return_value=httpx.Response(404, json={"error": {
                "code": "global/object-does-not-exist", "message": "gone\x1b[2J\nerror: forged"}}))
        result = invoke("get", "lambda/abc")
    assert result.exit_code == 5
    assert "\x1b" not in result.stderr
    lines = result.stderr.rstrip("\n").split("\n")
    assert [line.split(":")[0] for line in lines] == ["error", "hint"]
    assert "\\x1b[2J\\nerror: forged" in lines[0]


def test_list_shows_age_time_left_cost_ip_and_launch_id(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_TERMINATE_SECONDS", "0")
    kept = create("--auto-shutdown", "4h")
    gone = create()
    assert invoke("delete", gone["ref"], "--yes").exit_code == 0
    rows = {r["REF"].split(" ")[0]: r for r in columns(invoke("list").stdout)}
    assert list(next(iter(rows.values()))) == [
        "REF", "NAME", "STATUS", "GPUS", "REGION", "$/HOUR", "AGE", "DEADLINE", "LEFT", "COST",
        "IP", "LAUNCH ID"]
    row = rows[kept["ref"]]
    assert row["STATUS"] == "running" and row["$/HOUR"].startswith("$")
    assert row["AGE"].endswith("s") and row["LEFT"] in ("3h59m", "4h00m")
    assert re.fullmatch(r"\d\d-\d\d \d\d:\d\dZ", row["DEADLINE"])
    assert row["COST"].startswith("$") and row["IP"] == kept["ip"]
    assert row["LAUNCH ID"] == kept["launch_id"] and row["LAUNCH ID"].startswith("gc-")
    ended = rows[gone["ref"]]
    # What it cost from the ledger: up for a moment at $2.49/h, it rounds to nothing.
    assert ended["STATUS"] == "terminated" and ended["$/HOUR"] == "-" and ended["COST"] == "$0.00"


def test_cost_so_far_is_price_times_age_in_decimal():
    now = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    machine = Instance(provider="p", id="1", status=InstanceStatus.RUNNING,
                       price_per_hour=Decimal("2.10"), created_at=now - timedelta(minutes=90),
                       shutdown_at=now + timedelta(hours=2, minutes=5))
    assert output.cost_so_far(machine, now) == Decimal("3.15")
    assert output.age(machine, now) == "1h30m" and output.time_left(machine, now) == "2h05m"
    row = columns(output.instances_table([machine], now))[0]
    assert (row["AGE"], row["DEADLINE"], row["LEFT"], row["COST"]) == (
        "1h30m", "12-01 14:05Z", "2h05m", "$3.15")
    late = machine.model_copy(update={"shutdown_at": now - timedelta(minutes=1)})
    assert output.time_left(late, now) == "due"
    unpriced = machine.model_copy(update={"price_per_hour": None})
    assert output.cost_so_far(unpriced, now) is None  # unknown, never $0
    text = output.instance_text(machine, now)
    assert "cost so far    $3.15 (price x age)" in text and "age            1h30m" in text


@pytest.mark.parametrize("width", [60, 90, 120])
def test_tables_fit_columns(monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    create("--name", "a-machine-name-that-is-far-too-long-for-any-reasonable-table-" * 2)
    for args in (["list"], ["offers", "--gpu", "h100", "--count", "8"], ["providers"]):
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        table = [line for line in result.stdout.split("\n") if line]
        assert max(len(line) for line in table) <= width, args
    ref = columns(invoke("list").stdout)[0]["REF"]
    assert ref.startswith("sandbox/sbx-") and "…" not in ref  # what users copy stays whole


def test_a_long_name_is_cut_with_an_ellipsis_first(monkeypatch):
    monkeypatch.setenv("COLUMNS", "150")
    made = create("--name", "x" * 100)
    row = columns(invoke("list").stdout)[0]
    assert row["NAME"].endswith("…") and row["REF"].startswith(made["ref"])
    assert row["LAUNCH ID"] == made["launch_id"]  # the columns that identify stay whole


def test_without_columns_or_a_terminal_lines_are_whole(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    create("--name", "y" * 100)
    assert "y" * 100 in invoke("list").stdout


@pytest.mark.parametrize("hours, expected", [("72h", "72"), ("90m", "1.5"), ("2d", "48"),
                                             ("1h30m", "1.5")])
def test_estimate_hours_take_durations(hours, expected):
    result = invoke("estimate", "--gpu", "h100", "--provider", "sandbox", "--hours", hours,
                    "--json")
    assert result.exit_code == 0, result.output
    assert Decimal(json.loads(result.stdout)["hours"]) == Decimal(expected)


def test_a_bare_number_for_a_duration_shows_the_forms():
    for args in (["estimate", "--gpu", "h100", "--provider", "sandbox", "--hours", "4"],
                 ["create", "--gpu", "h100", "--provider", "sandbox", "--auto-shutdown", "4",
                  "--dry-run"]):
        result = invoke(*args)
        assert result.exit_code == 2
        assert "no unit" in result.stderr and "4h, 90m, 1h30m or 2d" in result.stderr
