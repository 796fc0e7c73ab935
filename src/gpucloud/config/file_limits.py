"""How much of a user's file gpucloud reads, and how deeply it may nest.

A configuration or job file is small; one that is not is a mistake (a log or
a disk image named by accident) or an attack, and reading it whole first would
already cost the memory. So a file is read up to its limit and no further.
Parsed data is measured without recursion: a structure 100,000 levels deep
must be refused, not crash the code that measures it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

MIB = 1024 * 1024


class InputLimitError(ValueError):
    """A file passes a limit; the message names the limit."""


def read_limited(path: Union[str, Path], max_bytes: int) -> str:
    """The file's UTF-8 text; InputLimitError past ``max_bytes``, having read
    one byte more at most. OSError and UnicodeDecodeError as open/decode raise."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputLimitError(f"larger than {size_text(max_bytes)}, the limit for this file")
    return data.decode("utf-8")


def depth_of(data: Any, limit: int) -> None:
    """InputLimitError as soon as dicts and lists in ``data`` nest deeper than
    ``limit`` (checked without recursion, so any depth is safe to check)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            raise InputLimitError(f"nested deeper than {limit} levels, the limit")
        stack.extend((child, depth + 1) for child in children)


def size_text(n: int) -> str:
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n:,} bytes"


__all__ = ["MIB", "InputLimitError", "depth_of", "read_limited", "size_text"]
