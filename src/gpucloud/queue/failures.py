"""What a failed run's output says: the line worth keeping as the task's
error, and whether a retry could heal it.

Some failures cannot heal by running the task again: the executable is not
there (exit 127, "command not found" from a shell; docker run's own 127 for
"executable file not found in $PATH", per the docker run reference's exit
status list), or the image cannot be pulled (docker's "Unable to find image
... locally" followed by "pull access denied", "manifest unknown" or
"repository does not exist"). Retrying those only delays the dead letter
and spends the retries, so they go there at once.

The docker CLI ends its own errors with a pointer to its help ("See 'docker
run --help'." or, in newer versions, "Run 'docker run --help' for more
information"); the line that says what went wrong is the one docker prefixes
with its own name ("docker: Cannot connect to the Docker daemon ...").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple, Optional

from gpucloud.queue.error_line import is_noise

ERROR_CHARS = 300  # of the kept line: a docker error with an image name fits
# docker's own errors: "docker: ..." (Linux, macOS), "C:\...\docker.exe: ..." (Windows).
_DOCKER_LINE = re.compile(r"^(?:[A-Za-z]:\\.*\\)?docker(?:\.exe)?: ", re.IGNORECASE)
_NOT_PULLED = ("pull access denied", "manifest unknown", "repository does not exist")


class Failure(NamedTuple):
    error: str
    permanent: bool


def key_line(lines: Sequence[str], docker: bool) -> str:
    """The line to keep: docker's own error where the task ran under docker
    and docker printed one, else the last meaningful line."""
    kept = [line.strip() for line in lines if not is_noise(line)]
    if docker:
        own = next((line for line in kept if _DOCKER_LINE.match(line)), None)
        if own is not None:
            return own
    return kept[-1] if kept else ""


def classify(code: Optional[int], lines: Sequence[str], docker: bool = False) -> Failure:
    """The error of a run that ended with ``code`` (not 0) after printing
    ``lines`` (its last ones, secrets already replaced)."""
    line = key_line(lines, docker)[:ERROR_CHARS]
    reason = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    error = reason + (f": {line}" if line else "")
    text = "\n".join(lines).lower()
    if docker and "unable to find image" in text and any(p in text for p in _NOT_PULLED):
        return Failure(f"the image cannot be pulled (not retried): {error}", True)
    if code == 127:
        return Failure(f"the executable was not found (not retried): {error}", True)
    return Failure(error, False)


def missing_executable(argv0: str, why: str) -> Failure:
    """The task's program could not be started: it is not there."""
    return Failure(f"the executable was not found (not retried): cannot start {argv0!r}: "
                   f"{why}", True)


def missing_secret(message: str) -> Failure:
    return Failure(f"{message} where the worker runs (not retried): set it in the worker's "
                   "environment (`gpucloud queue workers add --secret NAME` sends one to "
                   "worker machines), then `gpucloud queue dead --requeue TASK`", True)


def bad_spec(message: str) -> Failure:
    return Failure(f"the task cannot run (not retried): {message}", True)
