"""The shell lines gpucloud runs on an owned host, and how their answers read.

Everything gpucloud keeps on a host lives in its ``dir`` (``~/.gpucloud``):

    lock/          the allocation. mkdir(2) is atomic: of two users who run
                   ``mkdir lock`` at once, exactly one succeeds, so two
                   allocations never get the same host, whoever's computer
                   they come from.
    lock/info      key=value lines: launch_id, deadline, owner, name, batch,
                   created (written to info.tmp, then renamed into place)
    lock/job.pid   the session of the job runner gpucloud started (setsid)
    jobs/<launch>/ the runner's script, status, exit status and log; kept
                   after release, so a job's log outlives its allocation

Every line below is POSIX sh with values quoted by shlex: nothing that comes
from config.toml or a job file is ever read by the remote shell as code.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from gpucloud.catalog.gpu_list import LIST_COMMAND
from gpucloud.providers._jobscript import CONTAINER_NAME, EndAction

# Exit statuses of the scripts (ssh itself exits 255 on its own failures).
FAILED = 2  # the host could not do it (a directory it cannot write)
HELD = 3  # the lock is taken
OTHER = 4  # the lock holds another launch (or none)
MOVED = 5  # the deadline moved since the caller read it
SMI_EXIT = "gpucloud-nvidia-smi-exit="
INFO_KEYS = ("launch_id", "deadline", "owner", "name", "batch", "created")


def dir_word(directory: str) -> str:
    """The directory as a shell word: ``~/x`` becomes "$HOME/x" (settings.py
    allows plain characters only, so the double quotes hold it whole)."""
    if directory.startswith("~/"):
        return '"$HOME/' + directory[2:] + '"'
    return shlex.quote(directory)


def _clean(value: str) -> str:
    """One info line's value: no newline can start a line of its own."""
    return "".join(c for c in value if c >= " " and c != "\x7f")


def info_lines(info: Mapping[str, str | None]) -> list[str]:
    return [f"{key}={_clean(info.get(key) or '')}" for key in INFO_KEYS]


def parse_info(text: str) -> tuple[str, dict[str, str]]:
    """(state, info) from an answer: a ``state=`` line, then key=value lines."""
    state, info = "", {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        if key == "state" and not state:
            state = value.strip()
        elif key in INFO_KEYS:
            info[key] = value
    return state, info


def read(directory: str) -> str:
    d = dir_word(directory)
    return (f'd={d}; if [ -d "$d/lock" ]; then echo state=locked; '
            f'cat "$d/lock/info" 2>/dev/null; else echo state=free; fi')


def allocate(directory: str, info: Mapping[str, str | None]) -> str:
    """Take the lock, write who holds it, then list the GPUs (nvidia-smi -L).
    The record holds no secret and is readable by all: team members with
    accounts of their own share one directory (``dir``) and must see who
    holds the host."""
    d = dir_word(directory)
    lines = " ".join(shlex.quote(line) for line in info_lines(info))
    return "\n".join([
        f"d={d}",
        f'mkdir -p "$d" || exit {FAILED}',
        f'mkdir "$d/lock" 2>/dev/null || {{ echo state=held; cat "$d/lock/info" 2>/dev/null; '
        f"exit {HELD}; }}",
        "umask 022",
        f"printf '%s\\n' {lines} >\"$d/lock/info.tmp\" && "
        f'mv -f "$d/lock/info.tmp" "$d/lock/info" || {{ rm -rf "$d/lock"; exit {FAILED}; }}',
        "echo state=locked",
        f"{LIST_COMMAND} 2>&1",
        f'echo "{SMI_EXIT}$?"',
    ])


def _guards(launch_id: str | None, deadline: str | None) -> list[str]:
    out = []
    if launch_id is not None:
        line = shlex.quote(f"launch_id={_clean(launch_id)}")
        out.append(f'grep -qxF {line} "$d/lock/info" 2>/dev/null || '
                   f"{{ echo state=other; exit {OTHER}; }}")
    if deadline is not None:
        line = shlex.quote(f"deadline={_clean(deadline)}")
        out.append(f'grep -qxF {line} "$d/lock/info" 2>/dev/null || '
                   f"{{ echo state=moved; exit {MOVED}; }}")
    return out


def release(directory: str, launch_id: str | None = None, deadline: str | None = None) -> str:
    """End what gpucloud started there (the runner's whole session: a job's
    command under `timeout` has a process group of its own, a session it
    shares; then the job's container), then remove the lock. The machine
    stays on. ``launch_id``/``deadline``: release only if the lock still
    says so (the reaper's conditional release)."""
    d = dir_word(directory)
    return "\n".join([
        f"d={d}",
        '[ -d "$d/lock" ] || { echo state=free; exit 0; }',
        *_guards(launch_id, deadline),
        'p=$(cat "$d/lock/job.pid" 2>/dev/null)',
        'case "$p" in',
        "  ''|*[!0-9]*) ;;",
        "  *) for s in TERM KILL; do",
        '       pkill -"$s" -s "$p" 2>/dev/null; kill -"$s" -"$p" 2>/dev/null',
        '       n=0; while [ "$n" -lt 10 ] && pgrep -s "$p" >/dev/null 2>&1; do '
        "sleep 1; n=$((n + 1)); done",
        "     done ;;",
        "esac",
        f"if command -v docker >/dev/null 2>&1; then docker rm -f {CONTAINER_NAME} "
        ">/dev/null 2>&1; fi",
        'rm -rf "$d/lock"',
        "echo state=released",
    ])


def set_deadline(directory: str, launch_id: str, deadline: str) -> str:
    d = dir_word(directory)
    line = shlex.quote(f"deadline={_clean(deadline)}")
    return "\n".join([
        f"d={d}",
        '[ -d "$d/lock" ] || { echo state=free; exit %d; }' % OTHER,
        *_guards(launch_id, None),
        "umask 022",
        f'{{ grep -v "^deadline=" "$d/lock/info"; printf "%s\\n" {line}; }} '
        f'>"$d/lock/info.tmp" && mv -f "$d/lock/info.tmp" "$d/lock/info" || exit {FAILED}',
        'echo state=locked; cat "$d/lock/info"',
    ])


def start_job(directory: str, launch_id: str) -> str:
    """Store the runner read from stdin (it may hold the job's secrets: never
    on a command line, mode 600) and start it detached, in a session of its
    own that `release` ends as a whole."""
    d = dir_word(directory)
    return "\n".join([
        f'd={d}; j="$d"/jobs/{shlex.quote(_clean(launch_id))}',
        *_guards(launch_id, None),
        "umask 077",
        f'mkdir -p "$j" && cat >"$j/run.sh" || exit {FAILED}',
        'GPUCLOUD_STATE_DIR="$j" setsid sh "$j/run.sh" </dev/null >/dev/null 2>&1 &',
        'echo "$!" >"$d/lock/job.pid"',
        "echo state=started",
    ])


def release_end(directory: str, launch_id: str) -> EndAction:
    """A job's end on an owned host: give the host back (never power it off)."""
    d = dir_word(directory)
    line = shlex.quote(f"launch_id={_clean(launch_id)}")
    return EndAction("releases this host (removes the lock gpucloud took on it)",
                     f'gc_d={d}\ngrep -qxF {line} "$gc_d/lock/info" 2>/dev/null && '
                     'rm -rf "$gc_d/lock"')


__all__ = ["FAILED", "HELD", "INFO_KEYS", "MOVED", "OTHER", "SMI_EXIT", "allocate",
           "dir_word", "info_lines", "parse_info", "read", "release",
           "release_end", "set_deadline", "start_job"]
