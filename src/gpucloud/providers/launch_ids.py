"""Launch ids: the one mark that makes a machine gpucloud's.

Every launch gets ``gc-`` (a machine) or ``gj-`` (a job) and 10 lowercase hex
digits (5 random bytes), generated on the client before the request is sent and
put on the machine (tags, env, labels, description). The reaper, reconcile and
``extend`` act only on a machine whose launch id has exactly this form: tags,
env and labels are editable by anyone with the account, so a blank, truncated
or merely similar value ("gc-1", "gc-<html>") marks a foreign machine that
gpucloud never touches.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from gpucloud.core.flow import JOB_PREFIX

MACHINE_PREFIX = "gc-"
HEX_DIGITS = 10  # secrets.token_hex(5)
_FORMAT = re.compile(r"g[cj]-[0-9a-f]{%d}" % HEX_DIGITS)


def new_launch_id(job: bool = False) -> str:
    return (JOB_PREFIX if job else MACHINE_PREFIX) + secrets.token_hex(HEX_DIGITS // 2)


def is_gpucloud(launch_id: Any) -> bool:
    """True only for a launch id gpucloud could have generated."""
    return isinstance(launch_id, str) and _FORMAT.fullmatch(launch_id) is not None


__all__ = ["HEX_DIGITS", "MACHINE_PREFIX", "is_gpucloud", "new_launch_id"]
