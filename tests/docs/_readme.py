"""Reading README.md for the docs tests: its example blocks and its JSON table."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass
class Example:
    line: int  # where the command is, for messages
    args: list[str]  # after "gpucloud"
    output: list[str]  # the lines the README shows under it


def examples(text: str | None = None) -> list[Example]:
    """Every `    $ gpucloud ...` line and the indented lines after it (up to a blank line)."""
    lines = (README.read_text() if text is None else text).split("\n")
    found = []
    for number, line in enumerate(lines):
        if not line.startswith("    $ gpucloud "):
            continue
        shown = []
        for following in lines[number + 1:]:
            if not following.startswith("    ") or following.startswith("    $ "):
                break
            shown.append(following[4:])
        found.append(Example(number + 1, shlex.split(line[len("    $ gpucloud "):]), shown))
    return found


def section(title: str, text: str | None = None) -> str:
    body = (README.read_text() if text is None else text).split(f"\n## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0]


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
