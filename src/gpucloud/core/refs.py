"""Which machine a user means: ``provider/id``, a machine's name, or a unique
prefix of its id.

Only ``provider/id`` names a machine without asking anyone; a name or a
prefix is looked up in the listing of every provider in scope. Ambiguity is
never resolved by guessing (the wrong machine could be deleted next): it is
an error that lists the candidates. A machine already terminated (or being
terminated) is a candidate only when no machine still up matches, so a name
reused after a delete names the new machine, not an ambiguity with the old.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from gpucloud.errors import NotFoundError, SpecError
from gpucloud.models import Instance, InstanceStatus

_GONE = (InstanceStatus.TERMINATED, InstanceStatus.TERMINATING)

FORMS = "provider/id, a machine's name, or a unique prefix of its id"


def needs_lookup(ref: Any) -> bool:
    """True for a bare name or id prefix; False for an Instance or provider/id
    (a "/" always means provider/id, so a mistyped provider is an error, not a search)."""
    return not isinstance(ref, Instance) and "/" not in str(ref)


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


def lookup(engine: Any, ref: Any) -> Generator[Any, Any, Any]:
    """An engine operation: `ref` itself when it is an Instance or provider/id,
    else the one machine its name or id prefix names in every provider's listing."""
    if not needs_lookup(ref):
        return ref
    listed = yield from engine.list()
    searched = [n for n in engine.ctx.scope(None, listing=True) if engine.ctx.can_call(n)]
    return resolve(ref, listed, searched)


def not_found_hint(ref: str) -> str:
    """For a provider's 404 on a machine: what the user can do next."""
    return (f"{ref} is not there (deleted, or terminated long enough ago to be forgotten); "
            "`gpucloud list` shows the machines that exist")


__all__ = ["FORMS", "lookup", "needs_lookup", "not_found_hint", "resolve"]
