"""The argument types the SDK's methods share (Client and AsyncClient).

* durations (``auto_shutdown``): a ``timedelta`` or a string such as "4h",
  "90m", "1h30m", "2d";
* money (``max_cost``, ``max_price``): ``Decimal``, a decimal string or an
  int, in USD (never a float: 0.1 is not a price);
* an absolute deadline (``until``): an aware ``datetime`` or ISO-8601 text
  with a zone ("2026-12-01T18:00Z"); give it or ``auto_shutdown``, not both.
  Neither: ``[defaults] auto_shutdown`` of config.toml applies, if set;
  ``auto_shutdown="never"`` opts out of that default;
* ``hours`` of an estimate: a number of hours or a duration;
* a machine (``ref``): an ``Instance``, its "provider/id", its name or a
  unique prefix of its id;
* a job (``spec``): a JobSpec, a dict or the path of a job YAML file; a job
  reference (``ref``): a Job, "provider/id", its name or a unique id prefix.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Literal, Union

if TYPE_CHECKING:  # a forward reference: importing the client must not load pydantic
    from gpucloud.models import Instance, InstanceStatus

Duration = Union[timedelta, str]
Money = Union[Decimal, str, int]
Hours = Union[Decimal, int, str, timedelta]
Ref = Union["Instance", str]
Deadline = Union[datetime, str]
Status = Literal["pending", "running", "stopping", "stopped", "terminating", "terminated"]
# Client.list(status=...): a status, "running,stopped", or several of either.
StatusFilter = Union[str, "InstanceStatus", Iterable[Union[str, "InstanceStatus"]]]


def split_ref(ref: Ref) -> tuple[str, str]:
    """(provider, id) of an Instance or a "provider/id"; SpecError for any other text."""
    if not isinstance(ref, str):
        from gpucloud.models import Instance  # a ref that is no str comes from pydantic-land

        if isinstance(ref, Instance):
            return ref.provider, ref.id
    text = str(ref)
    provider, sep, ident = text.partition("/")
    if not sep or not provider or not ident:
        from gpucloud.errors import SpecError

        raise SpecError(f"invalid instance reference {text!r}",
                        hint="use provider/id as shown by `gpucloud list`, e.g. lambda/0920582c")
    return provider, ident


def needs_lookup(ref: Ref) -> bool:
    """True for a bare name or id prefix; False for an Instance or provider/id
    (a "/" always means provider/id, so a mistyped provider is an error, not a search)."""
    if not isinstance(ref, str):
        from gpucloud.models import Instance

        if isinstance(ref, Instance):
            return False
    return "/" not in str(ref)
