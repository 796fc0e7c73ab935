"""The manual is a site: README.md is its home page and a short one, every page
under docs/ is in mkdocs.yml's nav, links between pages resolve, and no page
cites documents a reader cannot open."""

from __future__ import annotations

import re

from tests.docs._readme import DOCS, README, ROOT, manual, nav_pages, pages, section

# Documents and trackers outside the repository: a page states the rule or the
# fact itself instead of pointing at them.
CITATIONS = re.compile(r"\bthe seeds?\b|\bseed §|DESIGN\.md|CONTRACTS\.md|\bissue \d+\b"
                       r"|\bitem \d+\b|/work/", re.I)
LINK = re.compile(r"\]\(([^)#\s]+\.md)(#[^)\s]*)?\)")


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = nav_pages()
    assert [p for p in nav if not p.exists()] == []
    assert len(nav) == len(set(nav))
    assert sorted(set(DOCS.rglob("*.md")) - set(nav)) == []


def test_readme_is_a_front_page_of_at_most_250_lines():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for heading in ("Quick start", "A five-minute tour", "Commands", "The manual"):
        assert section(heading, text).strip(), heading


def test_the_commands_table_names_every_top_level_command():
    from typer.testing import CliRunner

    from gpucloud.cli import app

    top = CliRunner().invoke(app, ["--help"]).stdout.split("Commands:")[1].split("\n\n")[0]
    commands = {line.split()[0] for line in top.splitlines()
                if line.startswith("  ") and not line.startswith("   ")}
    table = section("Commands", README.read_text(encoding="utf-8"))
    named = set(re.findall(r"`gpucloud ([a-z-]+)", table)) | set(re.findall(r", `(\S+?)`", table))
    assert commands - named == set()


def test_links_between_pages_resolve():
    broken = []
    for page in pages():
        for target, _anchor in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).resolve().exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_no_page_cites_documents_outside_the_repository():
    found = []
    for page in pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
            hit = CITATIONS.search(line)
            if hit:
                found.append(f"{page.relative_to(ROOT)}:{number}: {hit.group(0)}")
    assert found == []


def test_each_provider_page_says_what_the_provider_guarantees():
    for provider in ("lambda", "runpod", "vastai", "verda", "hyperstack", "fluidstack"):
        text = (DOCS / "providers" / f"{provider}.md").read_text(encoding="utf-8")
        body = next(section(title, text) for title in re.findall(r"^## (What .+ guarantees)$",
                                                                text, re.M))
        assert "unverified" in body and "bill" in body, provider


def test_the_manual_is_all_of_it():
    text = manual()
    assert "# Errors and exit codes" in text and "## Quick start" in text
