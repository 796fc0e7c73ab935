"""List chunking: `limit` and `continue` on every list, and continue tokens
that expire.

As the API server (k8s.io/apiserver, pkg/storage/continue.go and
pkg/storage/etcd3/errors.go):

* a page is at most `limit` items of the filtered list in key order
  (namespace/name, or name for cluster-wide objects); when more remain, its
  metadata.continue is base64url (no padding) of
  ``{"v":"meta.k8s.io/v1","rv":<list resourceVersion>,"start":"<last key>\\0"}``,
  and metadata.remainingItemCount is set when the list has no selector;
* a token etcd has compacted past (``Cluster.compact``, or the
  ``Knobs.expire_continue`` knob) is ``410 Gone``, reason ``Expired``, with the
  apiserver's "inconsistent continue" message and a token of rv -1 that would
  go on from the next key at the latest version (handleCompactedErrorForPaging);
* a token that does not decode is ``400 BadRequest`` "invalid continue token:
  ..." and resourceVersion with continue is refused (pkg/storage/interfaces.go).

Not emulated: a continued list is read from the current state, not from a
snapshot at the token's resourceVersion (the real server's pages are one
consistent list). The tests that need that property do not change the cluster
between pages.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .objects import ApiError, bad_request

# k8s.io/apiserver pkg/storage/etcd3/errors.go, inconsistentContinue.
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list.")


def key(item: dict[str, Any]) -> str:
    meta = item["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def encode(start: str, rv: int) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start},
                     separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(token: str) -> tuple[str, int]:
    """(start key, resourceVersion) of a continue token, or the 400 the server sends."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except ValueError as exc:
        raise bad_request(f"invalid continue token: continue key is not valid: {exc}") from exc
    if not isinstance(data, dict) or data.get("v") != "meta.k8s.io/v1":
        raise bad_request("invalid continue token: continue key is not valid: server does not "
                          "recognize this encoded version")
    rv, start = data.get("rv"), data.get("start")
    if not isinstance(rv, int) or rv == 0:
        raise bad_request("invalid continue token: continue key is not valid: incorrect "
                          "encoded start resourceVersion (version meta.k8s.io/v1)")
    if not isinstance(start, str) or not start:
        raise bad_request("invalid continue token: continue key is not valid: encoded start "
                          "key empty (version meta.k8s.io/v1)")
    return start, rv


def expired(start: str) -> ApiError:
    """The 410 for a compacted token: the Status body the apiserver sends, with
    metadata.continue set to a token that would go on inconsistently."""
    return ApiError({"kind": "Status", "apiVersion": "v1",
                     "metadata": {"continue": encode(start, -1)}, "status": "Failure",
                     "message": INCONSISTENT_CONTINUE, "reason": "Expired", "code": 410})


def page(items: list[dict[str, Any]], query: dict[str, str], rv: int, compacted: int,
         selected: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The page of the (filtered) `items` a query asks for, and its list metadata.
    `compacted`: tokens from before this resourceVersion are gone."""
    token = query.get("continue") or ""
    raw_limit = query.get("limit") or "0"
    try:
        limit = int(raw_limit)
    except ValueError:
        raise bad_request(f'limit: Invalid value: "{raw_limit}"') from None
    items = sorted(items, key=key)  # etcd's key order
    if token:
        if query.get("resourceVersion"):
            raise bad_request("specifying resource version is not allowed when using continue")
        start, token_rv = decode(token)
        if 0 < token_rv < compacted:
            raise expired(start)
        items = [i for i in items if key(i) >= start]
        rv = token_rv if token_rv > 0 else rv  # later pages belong to the first one's list
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if limit > 0 and len(items) > limit:
        meta["continue"] = encode(key(items[limit - 1]) + "\x00", rv)
        if not selected:
            meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    return items, meta
