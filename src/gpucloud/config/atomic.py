"""Writing a file so that a reader sees the old one or the new one, never half.

One helper for every file gpucloud replaces in place (ssh_config, the keyring
verdict, parsed catalogs): a temporary file in the same directory (so the
rename stays on one filesystem), then ``os.replace``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data`; `mode` (e.g. 0o600) is set before the rename,
    so the file never exists with looser permissions. Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["write_atomic"]
