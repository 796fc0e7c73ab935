"""Free objects of an account that a launch needs first (a registered SSH key,
an environment): the one found, else one made; and how a registered key is
recognised (by its type and body, never its comment).

The launches of a batch (``create --instances N``, a multi-node job's nodes)
run at once, so on a new account several find none and each makes one. A
provider that keeps names unique refuses all makes but the first; a batch
must not fail, and roll back the machines already made, over a key its own
launches raced to register. So a make refused with a client error (the name
taken: 400, 409 or 422) is followed by one more look, and the object the
other launch made is used; found nothing again, the refusal stands.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from gpucloud.errors import APIStatusError, ConfigurationError
from gpucloud.providers.base import Flow

T = TypeVar("T")
TAKEN = (400, 409, 422)  # how providers refuse a name already in use


def found_or_made(find: Callable[[], Flow[T | None]], make: Callable[[], Flow[T]]) -> Flow[T]:
    """``find()``'s object, else ``make()``'s; a refused make looks once more."""
    found = yield from find()
    if found is not None:
        return found
    try:
        return (yield from make())
    except APIStatusError as refused:
        if refused.status_code not in TAKEN:
            raise
        again = yield from find()
        if again is None:
            raise
        return again


def key_fields(public_key: str | None) -> tuple[str, ...]:
    """What identifies a public key: "ssh-ed25519 AAAA... comment" without the
    comment, which is free text and often changed."""
    return tuple(public_key.split()[:2]) if isinstance(public_key, str) else ()


def key_name(fields: tuple[str, ...]) -> str:
    """The name gpucloud registers a key under when given none: the same for
    that key on every computer, so each finds the one registered."""
    return "gpucloud-" + hashlib.sha256(" ".join(fields).encode()).hexdigest()[:16]


def key_id_among(keys: Iterable[Mapping[str, Any]], fields: tuple[str, ...],
                 text: str) -> str | None:
    """The id of the registered key (an entry with an ``id``) whose public key,
    under ``text``, is ``fields``; None when none is."""
    return next((str(k["id"]) for k in keys if key_fields(k.get(text)) == fields), None)


def key_id_named(keys: Iterable[Mapping[str, Any]], name: str | None, provider: str) -> str:
    """The id of the registered key named ``name`` (or with that id)."""
    for key in keys:
        if name in (key.get("name"), key.get("id")):
            return str(key["id"])
    raise ConfigurationError(f"no SSH key named {name!r} is registered with {provider}",
                             hint="pass the path of a public key file to register it")


__all__ = ["TAKEN", "found_or_made", "key_fields", "key_id_among", "key_id_named", "key_name"]
