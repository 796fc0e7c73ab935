"""The line of a task's error that says what failed.

A failed `docker run` ends its output with a pointer to the usage text
("Run 'docker run --help' for more information", "See 'docker run --help'.")
or with the client's own log line about the wait it gave up ("ERRO[0000]
error waiting for container: ..."); the line that says what failed comes
before them. Those lines, blank lines and a Python traceback's header are
noise: `queue status` shows the first line that is not, and the worker keeps
the last such line of a task's output for its error.
"""

from __future__ import annotations

import re

_NOISE = re.compile(
    r"(?:^|:\s)(?:Run|See) '[^']*--help'(?: for more information)?\.?$"  # docker CLI
    r"|^ERRO\[\d+\] error waiting for container"                          # docker CLI log
    r"|^Usage:\s"                                                        # a usage text
    r"|^Traceback \(most recent call last\):$"                           # Python
    r"|^[\W_]*$")                                                        # blank, rules


def is_noise(line: str) -> bool:
    return bool(_NOISE.search(line.strip()))


def first_meaningful(text: str) -> str:
    """The first line of ``text`` that says what failed; the first non-blank
    line when every line is noise; "" for no text."""
    lines = [line.strip() for line in (text or "").splitlines()]
    for line in lines:
        if not is_noise(line):
            return line
    return next((line for line in lines if line), "")
