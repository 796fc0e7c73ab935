"""An `ssh` first on PATH that records each call's arguments and standard
input and answers as a multi-node job's start command does ("started").
CONSTRUCTED: no VM cloud's machine is reachable from a test; the requests to
the cloud are the real subject, the ssh start only what gpucloud hands it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake on PATH; the directory where call N leaves N.argv and N.stdin."""
    calls = tmp_path / "ssh-calls"
    calls.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ssh"
    fake.write_text(f'#!/bin/sh\nn=$(ls {calls} | wc -l)\nprintf "%s\\n" "$@" '
                    f'>{calls}/$n.argv\ncat >{calls}/$n.stdin\necho started\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return calls


def scripts(calls: Path) -> list[str]:
    """What each ssh call was given on its standard input, in call order."""
    return [p.read_text() for p in sorted(calls.glob("*.stdin"), key=lambda p: int(p.stem))]
