"""What a queue and its tasks are called: the task states and the rule for a
queue's name. Apart from the models (pydantic) so that a command answering
without a server (an untouched embedded queue) imports neither."""

from __future__ import annotations

import re

STATES = ("pending", "running", "succeeded", "failed", "dead", "cancelled")
# A task that runs no more; `failed` waits for its retry.
ENDED = ("succeeded", "dead", "cancelled")
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def check_queue_name(name: str) -> None:
    from gpucloud.errors import SpecError

    if not _QUEUE_NAME.match(name):
        raise SpecError(f"{name!r} is not a queue name",
                        hint="letters, digits, '.', '_' and '-', at most 64")
