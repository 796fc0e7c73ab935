"""Narrow terminals keep what matters: the CLI in a process of its own, its
width from $COLUMNS (stdout is a pipe there, as it is for a script), at 80 and
120 columns. `list` keeps the ref, status, GPUs, price, time left and cost
whole and leaves out the rest, least useful first; `offers` keeps the instance
type and the price whole. Without $COLUMNS a pipe gets whole lines."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud.cli import app, output

SRC = Path(__file__).resolve().parents[2] / "src"
KEPT = ["REF", "STATUS", "GPUS", "$/HOUR", "LEFT", "COST"]
FIRST_DROPPED = {"IP", "LAUNCH ID", "NAME", "AGE"}
DROP_ORDER = ["LAUNCH ID", "IP", "AGE", "NAME", "DEADLINE", "REGION"]
PRICE = re.compile(r"(\$[\d,]+\.\d{2,4}( \+ [a-z ]+\?)*|unknown)")


def gpucloud(*args: str, columns: int | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update(PYTHONPATH=str(SRC), PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    if columns is not None:
        env["COLUMNS"] = str(columns)
    done = subprocess.run([sys.executable, "-m", "gpucloud", *args], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def columns(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """The header's column names, and each row cut at the header's column starts."""
    lines = text.rstrip("\n").split("\n")
    header = lines[0]
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 2:i] == "  ")]
    ends = starts[1:] + [None]
    names = [header[a:b].strip() for a, b in zip(starts, ends)]
    rows = [dict(zip(names, (line[a:b].strip() for a, b in zip(starts, ends))))
            for line in lines[1:] if line.startswith(("sandbox/", "lambda/"))]
    return names, rows


@pytest.fixture
def machines(monkeypatch):
    """A machine with a deadline, one with a long name, one terminated: as --json has them."""
    monkeypatch.setenv("GPUCLOUD_SANDBOX_TERMINATE_SECONDS", "0")
    base = ["create", "--gpu", "h100", "--provider", "sandbox", "--yes", "--json"]
    invoke(*base, "--count", "8", "--name", "trainer", "--auto-shutdown", "4h")
    invoke(*base, "--name", "an-experiment-with-a-rather-long-descriptive-name-v2")
    gone = json.loads(invoke(*base, "--name", "gone").stdout)["instance"]
    invoke("delete", gone["ref"], "--yes")
    return {i["ref"]: i for i in json.loads(invoke("list", "--json").stdout)["instances"]}


@pytest.mark.parametrize("width", [80, 120])
def test_list_keeps_ref_status_gpus_price_left_and_cost_whole(machines, width):
    text = gpucloud("list", columns=width).stdout
    assert max(len(line) for line in text.split("\n")) <= width
    names, rows = columns(text)
    assert [n for n in names if n in KEPT] == KEPT
    missing = [n for n in output.INSTANCE_HEADERS if n not in names]
    assert set(missing) == set(DROP_ORDER[:len(missing)])  # least useful first
    if width == 80:
        assert FIRST_DROPPED <= set(missing)
    assert len(rows) == len(machines) == 3
    for row in rows:
        ref = row["REF"].removesuffix(" (sim)")
        assert row["REF"] == ref + " (sim)" and ref in machines  # the short mark, ref whole
        machine = machines[ref]
        assert row["STATUS"] == machine["status"]
        assert row["GPUS"] == f"{machine['gpu_count']}x {machine['gpu']}"
        ended = machine["status"] == "terminated"
        assert row["$/HOUR"] == ("-" if ended else output.usd(Decimal(
            machine["price_per_hour"])))
        assert re.fullmatch(r"-|\d+h\d\dm|\d+m", row["LEFT"]), row
        assert re.fullmatch(r"\$\d+\.\d\d", row["COST"]), row
        assert "…" not in "".join(row[n] for n in KEPT)


def test_list_leaves_columns_out_in_the_documented_order_at_every_width(machines):
    from gpucloud import Client

    listed = Client(providers=["sandbox"]).list()
    seen = []
    for width in range(50, 200, 3):
        names = output.instances_table(listed, width=width).split("\n")[0].split()
        order = ["LAUNCH", "IP", "AGE", "NAME", "DEADLINE", "REGION"]
        missing = [n for n in order if n not in names]
        assert missing == order[:len(missing)], width
        seen.append(len(missing))
    assert seen[0] == 6 and seen[-1] == 0  # every stage was passed through


def test_a_pipe_without_columns_gets_todays_whole_lines(machines):
    text = gpucloud("list", columns=None).stdout
    names, rows = columns(text)
    assert names == list(output.INSTANCE_HEADERS)
    assert all(r["REF"].endswith(" (simulated)") for r in rows)
    assert "an-experiment-with-a-rather-long-descriptive-name-v2" in text


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("gpu, count", [("h100", "8"), ("a100", "1"), ("l40s", "1")])
def test_offers_keep_the_instance_type_and_the_price_whole(width, gpu, count):
    query = ["offers", "--gpu", gpu, "--count", count, "--limit", "0"]
    offers = json.loads(invoke(*query, "--json").stdout)["offers"]
    text = gpucloud(*query, columns=width).stdout
    assert max(len(line) for line in text.split("\n")) <= width
    lines = text.rstrip("\n").split("\n")
    names, _ = columns(text)
    assert names[:4] == ["PROVIDER", "INSTANCE TYPE", "GPUS", "$/HOUR"]
    header = lines[0]
    start, end = header.index("INSTANCE TYPE"), header.index("GPUS")
    price_start = header.index("$/HOUR")
    types = {o["instance_type"] for o in offers}
    rows = [line for line in lines[1:] if line[start:end].strip() in types]
    assert len(rows) == len({(o["provider"], o["instance_type"], o["price_per_hour"],
                              o["spot"]) for o in offers})  # every row found, type whole
    for line in rows:
        price = re.split(r" {2,}", line[price_start:].strip())[0]
        assert PRICE.fullmatch(price), line
    if "PRICE SOURCE" not in names:  # left out: said once under the table
        assert any(line.startswith("price source") for line in lines)


def test_offers_at_82_columns_cut_regions_before_anything_else():
    # 82: the narrowest width at which the five leading columns and a cut
    # REGIONS fit the bundled 8x H100 rows (PROVIDER is as wide as "hyperstack").
    text = gpucloud("offers", "--gpu", "h100", "--count", "8", columns=82).stdout
    names, _ = columns(text)
    assert "REGIONS" in names and "PRICE SOURCE" not in names
    assert "price source: catalog 2026-11-30" in text
    wide = gpucloud("offers", "--gpu", "h100", "--count", "8", columns=120).stdout
    assert columns(wide)[0][-1] == "PRICE SOURCE" and "asia-northeast-1 +16" in wide
