"""The version of the state's schema this gpucloud writes, in both stores.

A version is a step of store_schema.MIGRATIONS (the team database records the
steps applied; the local file keeps the number in SQLite's user_version). A
store of a newer version is refused before anything is read or written: an
older gpucloud must not write rows a newer one would misread.
"""

from __future__ import annotations

from gpucloud.errors import StateError

VERSION = 1


def too_new(found: int, where: str) -> StateError:
    return StateError(
        f"{where} has schema version {found}, newer than this gpucloud knows "
        f"({VERSION})", path=where,
        hint="upgrade gpucloud (pip install -U gpucloud) on this computer; an older "
             "gpucloud must not write to a newer schema")


__all__ = ["VERSION", "too_new"]
