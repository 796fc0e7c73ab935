"""Each example in the README is run (against the sandbox and the bundled
catalog) and its output compared, by shape, with what the README shows: a
table's header exactly and the number of columns of every row; other lines by
indentation and first word. Prices, ids, times and row counts may differ."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from gpucloud.cli import app
from tests.docs._readme import README, examples

GAP = re.compile(r" {2,}")
HEADER = re.compile(r"[A-Z$/]+( [A-Z$/]+)*( {2,}[A-Z$/]+( [A-Z$/]+)*)+")


def cells(line: str) -> list[str]:
    return GAP.split(line.strip())


def skeleton(line: str) -> tuple[int, str]:
    """Indentation and first word, ids and numbers blurred (sbx-d10c... -> sbx-#)."""
    stripped = line.lstrip(" ")
    word = re.sub(r"\d", "0", re.sub(r"[0-9a-f]{8,}", "#", stripped.split(" ")[0]))
    return len(line) - len(stripped), word


def shape(lines: list[str]) -> dict:
    """A table (header columns, rows' column counts) and the other lines' skeletons."""
    if lines and HEADER.fullmatch(lines[0]):
        header = cells(lines[0])
        rows = []
        for line in lines[1:]:
            if len(cells(line)) < 2:
                break
            rows.append(line)
        rest = lines[1 + len(rows):]
        return {"header": header, "rows": [len(cells(r)) for r in rows],
                "rest": [skeleton(r) for r in rest]}
    return {"header": None, "rows": [], "rest": [skeleton(r) for r in lines]}


def test_the_readme_has_examples_with_output():
    found = examples()
    assert len([e for e in found if e.output]) >= 5
    assert {e.args[0] for e in found} >= {"offers", "estimate", "create", "list", "get"}


def test_the_quick_start_makes_a_virtual_environment_first():
    quick = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    venv = quick.index("python3 -m venv .venv && . .venv/bin/activate")
    assert venv < quick.index("pip install")


def test_every_readme_example_produces_output_of_the_shape_shown(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # piped: whole lines, as in the README
    runner = CliRunner()
    for example in examples():
        where = f"README.md line {example.line}: gpucloud {' '.join(example.args)}"
        result = runner.invoke(app, example.args)
        assert result.exit_code == 0, (where, result.output)
        actual = result.stdout.rstrip("\n").split("\n") if result.stdout.strip() else []
        want, got = shape(example.output), shape(actual)
        assert got["header"] == want["header"], where
        if want["header"] is not None:
            assert set(want["rows"]) == {len(want["header"])}, (where, "README row shape")
            assert got["rows"] and set(got["rows"]) == {len(got["header"])}, (where, actual)
        assert got["rest"] == want["rest"], (where, actual)


@pytest.mark.parametrize("text, expected", [
    ("A  B C\n1  2 3\nnote here", {"header": ["A", "B C"], "rows": [2], "rest": [(0, "note")]}),
    ("Plan:\n  total  $1", {"header": None, "rows": [], "rest": [(0, "Plan:"), (2, "total")]}),
    ("p/sbx-d10c6261e812: up", {"header": None, "rows": [], "rest": [(0, "p/sbx-#:")]}),
])
def test_shape(text, expected):
    assert shape(text.split("\n")) == expected
