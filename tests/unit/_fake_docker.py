"""A stand-in `docker` on the PATH that prints what the real docker CLI printed
(tests/fixtures/docker/, with their sources) and exits as the real one does."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DOCKER = FIXTURES / "docker"
NO_DAEMON_RUN = FIXTURES / "nvidia-smi" / "real" / "docker_no_daemon_stderr.txt"


def install(bin_dir: Path, *, info_rc: int = 0, info_out: Optional[Path] = None,
            info_err: Optional[Path] = None, run_rc: int = 0,
            run_err: Optional[Path] = None) -> Path:
    """Write bin_dir/docker: `docker info` prints info_out/info_err and exits
    info_rc; `docker run` prints run_err on stderr and exits run_rc; anything
    else (`docker rm`) succeeds silently. Calls are appended to bin_dir/calls."""
    def cat(path: Optional[Path]) -> str:
        return f"cat {shlex.quote(str(path))}" if path is not None else ":"

    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "docker"
    script.write_text(f"""#!/bin/sh
echo "$1" >> {shlex.quote(str(bin_dir / "calls"))}
case "$1" in
  info) {cat(info_out)}; {cat(info_err)} >&2; exit {info_rc} ;;
  run) {cat(run_err)} >&2; exit {run_rc} ;;
  *) exit 0 ;;
esac
""")
    script.chmod(0o755)
    return script


def calls(bin_dir: Path) -> list[str]:
    path = bin_dir / "calls"
    return path.read_text().split() if path.exists() else []
