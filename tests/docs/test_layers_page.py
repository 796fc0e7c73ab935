"""docs/design/layers.md states the import rules the test enforces: its table
is LAYERS row for row, and each rule the test reports is on the page."""

from __future__ import annotations

import re

from tests.docs._readme import DOCS
from tests.unit import test_import_cycles as rules

PAGE = DOCS / "design" / "layers.md"


def _page_rows(text: str) -> dict[str, frozenset[str]]:
    table = text.split("| Layer | May import |")[1].split("\n\n")[0]
    rows: dict[str, frozenset[str]] = {}
    for line in table.splitlines()[2:]:
        layer, allowed = (cell.strip() for cell in line.strip("|").split("|"))
        rows[layer.strip("`")] = frozenset(re.findall(r"`([a-z-]+)`", allowed))
    return rows


def test_the_page_table_is_the_test_table() -> None:
    assert _page_rows(PAGE.read_text(encoding="utf-8")) == rules.LAYERS


def test_the_page_table_check_sees_a_difference() -> None:
    text = PAGE.read_text(encoding="utf-8").replace(
        "| `transport` | `errors`, `kernel` |", "| `transport` | `errors`, `kernel`, `providers` |")
    assert _page_rows(text)["transport"] == {"errors", "kernel", "providers"}
    assert _page_rows(text) != rules.LAYERS


def test_the_page_names_each_rule() -> None:
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    for phrase in ("transport never imports providers", "a provider never imports another provider",
                   "the CLI goes through the client", "reached through the registry"):
        assert phrase in text, phrase
    for package in {rules.layer_of(m) for m in rules.import_graph()} - {"root", "kernel"}:
        assert f"| `{package}" in text or f"`{package}.py`" in text, package
