"""The project says things in its own words: no code comment, docstring, test,
script or page cites a document a reader of the repository cannot open (a
design note or a contracts summary kept elsewhere, "the seed") or a tracker's
issue by number. It states the rule or the fact itself, and cites public
sources (an API description, an NVIDIA page, owner/repo#N, a URL) by name.

docs/ and README.md are also held to the manual's own, stricter list in
test_site.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs._readme import ROOT

SCANNED = ("src", "tests", "scripts", "bench", "examples", "providers", "docs", ".ci",
           "README.md", "pyproject.toml", "Dockerfile", "mkdocs.yml")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules"}
THIS = Path(__file__).resolve()  # it spells the patterns out

# Letters only around words, so that test names (the_seeds_hint) are found too.
CITATION = re.compile(r"(?<![a-z])the[\s_]+seeds?(?![a-z])|(?<![a-z])seed\s+§"
                      r"|\bDESIGN\.md\b|\bCONTRACTS\.md\b|(?<![a-z])issues?[\s_]+\d+(?!\d)", re.I)
# A public issue is cited by where it is: a URL or owner/repo#N on the same line.
PUBLIC_ISSUE = re.compile(r"://|\b[\w.-]+/[\w.-]+#\d+")


def citations(text: str) -> list[tuple[int, str]]:
    """(line, what) for each citation in ``text``; an issue number is allowed on
    a line that names a public repository's issue (URL or owner/repo#N)."""
    lines = text.split("\n")
    found = []
    for hit in CITATION.finditer(text):
        number = text.count("\n", 0, hit.start()) + 1
        if hit.group(0).lower().startswith("issue") and PUBLIC_ISSUE.search(lines[number - 1]):
            continue
        found.append((number, " ".join(hit.group(0).split())))
    return found


def files() -> list[Path]:
    out = []
    for name in SCANNED:
        top = ROOT / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        for path in candidates:
            if (path.is_file() and path.resolve() != THIS
                    and not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts)):
                out.append(path)
    return out


@pytest.mark.parametrize("text,expected", [
    ("# the seed (§4): below 30% is worth acting on", [(1, "the seed")]),
    ('"""The seed\'s §8.3 hint."""', [(1, "The seed")]),
    ("def test_top_says_the_seeds_hint():", [(1, "the_seeds")]),
    ("def test_issue_7_item_3():", [(1, "issue_7")]),
    ("the seeds' fix", [(1, "the seeds")]),
    ("# (CONTRACTS.md section 4)\n# DESIGN.md, \"Credentials\"",
     [(1, "CONTRACTS.md"), (2, "DESIGN.md")]),
    ('"""Batch create (issue 10, item 1) against"""', [(1, "issue 10")]),
    ("ended (issue\n10, item 4): no request", [(1, "issue 10")]),
    ("see NVIDIA/nvidia-docker#1252 (issue 1252 there)", []),
    ("https://github.com/apache/apisix/issues/7489", []),
    ("random.seed(7); same seed, same failures; seeded by SEED", []),
    ("error trackers; an item 0 of args", []),
])
def test_the_patterns_find_citations_and_leave_public_sources(text, expected):
    assert citations(text) == expected


def test_nothing_in_the_repository_cites_documents_or_issues_it_does_not_hold():
    found = []
    scanned = files()
    assert any(p.name == "top.py" for p in scanned)  # the scan reaches src/
    for path in scanned:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary: not prose
        found += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in citations(text)]
    assert found == []
