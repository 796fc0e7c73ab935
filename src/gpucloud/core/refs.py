"""Which machine a user means: ``provider/id``, a machine's name, or a unique
prefix of its id.

Only ``provider/id`` names a machine without asking anyone; a name or a
prefix is looked up in the listing of every provider in scope
(``instances.lookup``). Ambiguity is
never resolved by guessing (the wrong machine could be deleted next): it is
an error that lists the candidates. A machine already terminated (or being
terminated) is a candidate only when no machine still up matches, so a name
reused after a delete names the new machine, not an ambiguity with the old.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucloud.errors import NotFoundError, SpecError
from gpucloud.models import Instance, InstanceStatus
from gpucloud.types import needs_lookup

_GONE = (InstanceStatus.TERMINATED, InstanceStatus.TERMINATING)

FORMS = "provider/id, a machine's name, or a unique prefix of its id"


def resolve(ref: str, instances: Sequence[Instance], searched: Sequence[str]) -> Instance:
    """The one machine `ref` names among `instances`: an exact name or id first,
    then an id prefix."""
    ref = str(ref)
    up = [i for i in instances if i.status not in _GONE]
    matches = _matches(ref, up) or _matches(ref, instances)
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(f"{i.ref} ({i.name or 'no name'}, {i.status.value})"
                          for i in matches[:10])
        raise SpecError(f"{ref!r} matches {len(matches)} machines: {shown}",
                        hint="name the machine by its provider/id (REF in `gpucloud list`)")
    where = ", ".join(searched) or "no provider"
    raise NotFoundError(f"no machine named {ref!r} or with an id starting with it ({where})",
                        provider=",".join(searched), status_code=404,
                        hint=f"`gpucloud list` shows the machines; refer to one by {FORMS}")


def _matches(ref: str, instances: Sequence[Instance]) -> list[Instance]:
    exact = [i for i in instances if ref in (i.name, i.id)]
    return exact or [i for i in instances if i.id.startswith(ref)]


def not_found_hint(ref: str) -> str:
    """For a provider's 404 on a machine: what the user can do next."""
    return (f"{ref} is not there (deleted, or terminated long enough ago to be forgotten); "
            "`gpucloud list` shows the machines that exist")


__all__ = ["FORMS", "needs_lookup", "not_found_hint", "resolve"]
