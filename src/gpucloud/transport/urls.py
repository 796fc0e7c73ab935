"""Request URLs, parsed once while they are asked again.

Parsing a URL is the better part of building an ``httpx.Request``, and the
same URL is often asked twice or more in a row: the reaper reads a machine
and then deletes it, extend reads then writes it, a wait polls it. An
``httpx.URL`` is immutable, so one parsed URL serves every request for it.
Only the latest few are kept: a machine's requests follow each other.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx


@functools.lru_cache(maxsize=64)
def parsed(url: str) -> httpx.URL:
    """`url` as httpx parses it (httpx is loaded when a request is built)."""
    import httpx

    return httpx.URL(url)


__all__ = ["parsed"]
