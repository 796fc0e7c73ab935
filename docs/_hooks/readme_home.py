"""The site's home page is README.md itself, so the two cannot drift.

README links to pages as `docs/NAME.md` (right on a repository's front page);
the site serves them from its root, so the prefix is dropped here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != "index.md":
        return markdown
    readme = Path(config.config_file_path).parent / "README.md"
    return readme.read_text(encoding="utf-8").replace("](docs/", "](")
