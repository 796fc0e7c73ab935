"""Who is acting: a user name and a host name, recorded on every row of the
state (launch intents, cost-ledger and volume-ledger rows) and used to split
budgets and costs per user.

The user is ``GPUCLOUD_USER`` when set, else the operating system's login
name; the host is the machine's host name. Both are LABELS, never access
control: anyone can set ``GPUCLOUD_USER`` to any name. In team mode the
database's own roles decide who may read or write the state; a per-user
budget here keeps honest people within their share, it stops no one who
sets another name.

A project (``--project``, ``project=``) is a label of the same kind, given
per request; ``check_project`` is the one rule for its form.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from gpucloud.errors import SpecError, option

USER_ENV = "GPUCLOUD_USER"
# A project name: short, and safe in a file name, a shell and a config key.
PROJECT_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")
PROJECT_FORM = "1 to 40 of a-z, 0-9, '-', '_' and '.', starting with a letter or digit"


@dataclass(frozen=True)
class Identity:
    user: str
    host: str


def who() -> Identity:
    """This process's user (GPUCLOUD_USER, else the OS user) and host name."""
    return Identity(user=current_user(), host=current_host())


def current_user() -> str:
    given = os.environ.get(USER_ENV, "").strip()
    if given:
        return given
    import getpass

    try:
        # LOGNAME, USER, LNAME, USERNAME, then the password database.
        return getpass.getuser()
    except (KeyError, OSError, ImportError):
        # A container running as a uid with no passwd entry and no USER set:
        # the uid is the one stable name there is.
        getuid = getattr(os, "getuid", None)
        return f"uid-{getuid()}" if getuid is not None else "unknown"


def current_host() -> str:
    import socket

    try:
        return socket.gethostname() or "unknown"
    except OSError:
        return "unknown"


def check_project(name: object) -> str:
    """The project name, or SpecError (exit 2) saying what a name looks like."""
    if not isinstance(name, str) or not PROJECT_RE.fullmatch(name):
        raise SpecError(f"project name {name!r} is not valid",
                        hint=f"a project name is {PROJECT_FORM}, e.g. "
                             f"{option('project', '--project', repr('vision'), 'vision')}")
    return name


__all__ = ["Identity", "PROJECT_FORM", "USER_ENV", "check_project", "current_host",
           "current_user", "who"]
