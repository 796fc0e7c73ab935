"""Moving a Verda machine's deadline: two alternating instance tags.

Verda has no call that changes a description (neither SDK has an instance
update), so the description keeps the create's deadline. The Go SDK
(verdacloud-sdk-go pkg/verda/tags.go, tags_types.go, instances_types.go) adds
and deletes instance tags: ``POST /instances/{id}/tags {"key", "value"}`` and
``DELETE /instances/{id}/tags/{key}``; ``Instance.tags`` is ``[{id, key,
value}]``; an existing key answers 409 (delete it first). Not in the Python SDK
and not verified live (tests/fixtures/verda/SOURCE.txt).

Two keys alternate: the new deadline is written to the free key first, then
the older key is deleted, so at every moment a copy no earlier than the old
deadline exists. Reads take the latest of the description and both tags.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from gpucloud.errors import NotFoundError
from gpucloud.providers.adapter_calls import AdapterCalls
from gpucloud.providers.base import Flow, format_utc, parse_utc

if TYPE_CHECKING:
    import httpx

    from gpucloud.models import Instance

UNTIL_KEYS = ("gpucloud-until-a", "gpucloud-until-b")


class Verda(AdapterCalls, Protocol):
    """What moving a deadline needs of the adapter (adapter.py imports this module)."""

    def get(self, instance_id: str) -> Flow[Instance]: ...

    def _body(self, response: httpx.Response, expected: type) -> Any: ...


def tag_deadlines(raw_tags: Any) -> dict[str, datetime | None]:
    """Our deadline tags of an instance body; anything garbled is ignored (tags
    are user-editable and only ever move a deadline later)."""
    found: dict[str, datetime | None] = {}
    for tag in raw_tags if isinstance(raw_tags, list) else ():
        if isinstance(tag, dict) and tag.get("key") in UNTIL_KEYS:
            found[tag["key"]] = parse_utc(tag.get("value"))
    return found


def set_deadline(provider: Verda, instance: Instance, shutdown_at: datetime
                 ) -> Flow[Instance]:
    path = f"/instances/{quote(instance.id, safe='')}"
    response = yield provider.request("GET", path)
    current = tag_deadlines(provider._body(response, dict).get("tags"))
    free = [k for k in UNTIL_KEYS if k not in current]
    if free:
        key = free[0]
    else:  # both set (an earlier delete failed): replace the earlier one
        key = min(UNTIL_KEYS, key=lambda k: (current[k] is not None, current[k] or 0))
        yield from _delete_tag(provider, path, key)
    value = format_utc(shutdown_at)
    response = yield provider.request("POST", f"{path}/tags", kind="idempotent",
                                      json={"key": key, "value": value})
    if response.status_code == 409:
        # A repeat of our own POST that had gone through is success; else refuse.
        again = yield provider.request("GET", path)
        if tag_deadlines(provider._body(again, dict).get("tags")).get(key) != parse_utc(value):
            raise provider.map_error(response)
    else:
        provider.raise_for_error(response)
    for other in UNTIL_KEYS:
        if other != key and other in current:
            yield from _delete_tag(provider, path, other)
    updated: Instance = yield from provider.get(instance.id)
    return updated


def _delete_tag(provider: Verda, path: str, key: str) -> Flow[None]:
    response = yield provider.request("DELETE", f"{path}/tags/{quote(key, safe='')}",
                                      kind="idempotent")
    if response.is_error:
        error = provider.map_error(response)
        if not isinstance(error, NotFoundError):  # already gone is what we wanted
            raise error


__all__ = ["UNTIL_KEYS", "set_deadline", "tag_deadlines"]
