"""Each example in the README and the docs pages is run (against the sandbox, booting as slowly
as it does for a user, and the bundled catalog) and its output compared, by
shape, with what the page shows: a table's header exactly, the number of
columns of every row and the statuses in its STATUS column; other lines by
indentation, first word and the status a line states (`created REF (pending)`,
`status  running`, `REF: stopped`). Prices, ids, times and row counts may
differ; a status may not."""

from __future__ import annotations

import re
import shlex

import pytest
from typer.testing import CliRunner

from gpucloud.cli import app
from gpucloud.models import InstanceStatus
from tests.cli._subprocess import gpucloud
from tests.docs._readme import README, examples

GAP = re.compile(r" {2,}")
HEADER = re.compile(r"[A-Z$/]+( [A-Z$/]+)*( {2,}[A-Z$/]+( [A-Z$/]+)*)+")
STATUSES = {s.value for s in InstanceStatus}
# Lines that state a machine's status: create's and a batch's "created REF
# (running)", a `status` field of get/create, stop's "REF: stopped".
STATUS_LINE = (re.compile(r"created \S+ \((\w+)\)"), re.compile(r"status {2,}(\w+)"),
               re.compile(r"\S+: (\w+)"))


def cells(line: str) -> list[str]:
    return GAP.split(line.strip())


def status_of(line: str) -> str | None:
    for pattern in STATUS_LINE:
        found = pattern.fullmatch(line.strip())
        if found and found.group(1) in STATUSES:
            return found.group(1)
    return None


def skeleton(line: str) -> tuple[int, str, str | None]:
    """Indentation, first word (ids and numbers blurred: sbx-d10c... -> sbx-#) and
    the status the line states, if it states one."""
    stripped = line.lstrip(" ")
    word = re.sub(r"\d", "0", re.sub(r"[0-9a-f]{8,}", "#", stripped.split(" ")[0]))
    return len(line) - len(stripped), word, status_of(line)


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
        column = header.index("STATUS") if "STATUS" in header else None
        return {"header": header, "rows": [len(cells(r)) for r in rows],
                "statuses": sorted({cells(r)[column] for r in rows}) if column is not None
                else [],
                "rest": [skeleton(r) for r in rest]}
    return {"header": None, "rows": [], "statuses": [], "rest": [skeleton(r) for r in lines]}


def test_the_readme_has_examples_with_output():
    found = examples()
    assert len([e for e in found if e.output]) >= 5
    assert {e.args[0] for e in found} >= {"offers", "estimate", "create", "list", "get",
                                          "costs"}
    # The docs pages' examples are run too, after README's (they go on with its machines).
    readme = [e for e in found if e.page == "README.md"]
    assert readme and found[:len(readme)] == readme
    assert {e.page for e in found} >= {"README.md", "docs/costs.md", "docs/batch.md"}


def test_the_quick_start_makes_a_virtual_environment_first():
    quick = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    venv = quick.index("python3 -m venv .venv && . .venv/bin/activate")
    assert venv < quick.index("pip install")


def test_the_quick_start_sets_a_deadline_and_shows_how_to_delete(tmp_path):
    """Its create has --auto-shutdown, the next line deletes what it made, and
    both work as written (in a process of their own, as a reader runs them)."""
    quick = README.read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    lines = [line.strip() for line in quick.split("\n")]
    at = next(i for i, line in enumerate(lines) if "gpucloud create" in line)
    create = shlex.split(lines[at].split("&& ", 1)[1])
    delete = shlex.split(lines[at + 1].split("#", 1)[0])
    assert create[:2] == ["gpucloud", "create"] and "--auto-shutdown" in create
    assert create[create.index("--auto-shutdown") + 1] == "1h"
    assert delete[:2] == ["gpucloud", "delete"]
    home = tmp_path / "reader"
    home.mkdir()
    made = gpucloud(*create[1:], home=home)
    assert made.returncode == 0, made.stderr
    ref = re.search(r"^created (sandbox/\S+) \(pending\)$", made.stdout, re.M)
    assert ref, made.stdout
    assert "deadline: " in made.stdout
    gone = gpucloud(*delete[1:], home=home)
    assert gone.returncode == 0, gone.stderr
    assert f"deleting {ref.group(1)}" in gone.stdout + gone.stderr


def test_every_readme_example_produces_output_of_the_shape_shown(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # piped: whole lines, as in the README
    # The sandbox boots as it does for a reader (2 s): a create without --wait
    # shows a machine still pending, and the README must show that too.
    monkeypatch.delenv("GPUCLOUD_SANDBOX_BOOT_SECONDS", raising=False)
    runner = CliRunner()
    for example in examples():
        where = f"{example.page} line {example.line}: gpucloud {' '.join(example.args)}"
        result = runner.invoke(app, example.args)
        assert result.exit_code == 0, (where, result.output)
        actual = result.stdout.rstrip("\n").split("\n") if result.stdout.strip() else []
        want, got = shape(example.output), shape(actual)
        assert got["header"] == want["header"], where
        if want["header"] is not None:
            assert set(want["rows"]) == {len(want["header"])}, (where, "README row shape")
            assert got["rows"] and set(got["rows"]) == {len(got["header"])}, (where, actual)
        assert got["statuses"] == want["statuses"], (where, actual)
        assert got["rest"] == want["rest"], (where, actual)


@pytest.mark.parametrize("text, expected", [
    ("A  B C\n1  2 3\nnote here",
     {"header": ["A", "B C"], "rows": [2], "statuses": [], "rest": [(0, "note", None)]}),
    ("Plan:\n  total  $1", {"header": None, "rows": [], "statuses": [],
                            "rest": [(0, "Plan:", None), (2, "total", None)]}),
    ("p/sbx-d10c6261e812: up",
     {"header": None, "rows": [], "statuses": [], "rest": [(0, "p/sbx-#:", None)]}),
    ("p/sbx-d10c6261e812: stopped",
     {"header": None, "rows": [], "statuses": [], "rest": [(0, "p/sbx-#:", "stopped")]}),
    ("created p/sbx-d10c6261e812 (pending)\nstatus         pending\nnote: still running",
     {"header": None, "rows": [], "statuses": [],
      "rest": [(0, "created", "pending"), (0, "status", "pending"), (0, "note:", None)]}),
    ("REF  STATUS   AGE\np/a  running  1s\np/b  stopped  2s",
     {"header": ["REF", "STATUS", "AGE"], "rows": [3, 3], "statuses": ["running", "stopped"],
      "rest": []}),
])
def test_shape(text, expected):
    assert shape(text.split("\n")) == expected
