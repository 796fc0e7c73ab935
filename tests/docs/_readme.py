"""Reading the manual for the docs tests: README.md and every page under docs/
(in the site's reading order), their example blocks, sections and tables.

A section moved from README to a page stays tested: every reader here looks
at all the pages."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"


@dataclass
class Example:
    line: int  # where the command is, for messages
    args: list[str]  # after "gpucloud"
    output: list[str]  # the lines the page shows under it
    page: str = "README.md"  # relative to the repository root


def nav_pages() -> list[Path]:
    """The docs pages in mkdocs.yml's nav, in order (what a reader reads next)."""
    import yaml

    found: list[Path] = []

    def walk(node: object) -> None:
        if isinstance(node, str) and node.endswith(".md"):
            found.append(DOCS / node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)

    walk(yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))["nav"])
    return found


def pages() -> list[Path]:
    """README.md, then the nav's pages, then any page under docs/ the nav leaves
    out: the examples run in this order, one sandbox for all of them."""
    ordered = [README, *nav_pages()]
    rest = sorted(p for p in DOCS.rglob("*.md") if p not in ordered)
    return ordered + rest


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def manual() -> str:
    """Every page's text, one after the other."""
    return "\n".join(page.read_text(encoding="utf-8") for page in pages())


def examples(text: str | None = None, page: str = "README.md") -> list[Example]:
    """Every `    $ gpucloud ...` line and the indented lines after it (up to a
    blank line): of `text`, or else of every page of the manual."""
    if text is None:
        return [e for p in pages() for e in examples(p.read_text(encoding="utf-8"), name(p))]
    lines = text.split("\n")
    found = []
    for number, line in enumerate(lines):
        if not line.startswith("    $ gpucloud "):
            continue
        shown = []
        for following in lines[number + 1:]:
            if not following.startswith("    ") or following.startswith("    $ "):
                break
            shown.append(following[4:])
        found.append(Example(number + 1, shlex.split(line[len("    $ gpucloud "):]), shown,
                             page))
    return found


def _headings(text: str) -> list[tuple[int, int, str]]:
    """(line index, level, title) of every Markdown heading outside code fences
    (a `# comment` in a fenced TOML block is no heading)."""
    out, fence = [], False
    for number, line in enumerate(text.split("\n")):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        found = re.match(r"(#{1,6}) (.+)$", line)
        if found and not fence:
            out.append((number, len(found.group(1)), found.group(2).strip()))
    return out


def section(title: str, text: str | None = None) -> str:
    """The body of the heading `title` (any level) up to the next heading of the
    same or a higher level: in `text`, or in whichever page of the manual has it."""
    texts = [text] if text is not None else [p.read_text(encoding="utf-8") for p in pages()]
    for body in texts:
        heads = _headings(body)
        for at, (start, level, heading) in enumerate(heads):
            if heading != title:
                continue
            lines = body.split("\n")
            end = next((line for line, lvl, _ in heads[at + 1:] if lvl <= level), len(lines))
            return "\n".join(lines[start + 1:end])
    raise KeyError(f"no section {title!r} in the manual")


def json_table(text: str | None = None) -> dict[str, set[str] | None]:
    """`command` -> its documented top-level keys; None for "the instance's fields"."""
    rows: dict[str, set[str] | None] = {}
    for line in section("JSON output", text).split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("command", "---"):
            continue
        name = cells[0].strip("`")
        rows[name] = None if "instance's fields" in cells[1] else set(
            re.findall(r"`([a-z_]+)`", cells[1]))
    return rows


def instance_fields(text: str | None = None) -> set[str]:
    sentence = section("JSON output", text).split("An instance has the fields", 1)[1]
    return set(re.findall(r"`([a-z_]+)`", sentence.split(".\n", 1)[0]))
