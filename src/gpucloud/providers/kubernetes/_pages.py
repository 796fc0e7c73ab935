"""Lists in chunks: `limit` and `continue`, as the Kubernetes API defines them
("Retrieving large results sets in chunks",
https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks).

A list of 40,000 pods is tens of megabytes of JSON, and twice that parsed: each
page is folded into the caller's accumulator and dropped before the next one is
asked for, so memory is one page plus what the caller keeps, not the whole list.

A continue token outlives its list by minutes only (the API server's etcd
compaction, 5 minutes by default): a later page is then ``410 Gone`` with
reason ``Expired``. What was folded so far is thrown away and the list starts
again from the first page, once; a second expiry gets one unpaginated list,
which cannot expire mid-way. client-go's pager (k8s.io/client-go,
tools/pager/pager.go) falls back to that full list at the first expiry; paging
again first keeps memory bounded in the usual case, where the second pass is
quick enough. Like that pager, an Expired answer to a first page (no continue
token) is an error, and the page size is 500.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import httpx

from gpucloud.providers.base import Flow
from gpucloud.providers.kubernetes import _wire as wire

PAGE_SIZE = 500  # client-go's pager default (tools/pager/pager.go defaultPageSize)
PAGED_RESTARTS = 1  # then one unpaginated list: see the module's docstring

A = TypeVar("A")


class Lister(Protocol):
    page_size: int | None

    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None
                ) -> httpx.Request: ...

    def _body(self, response: httpx.Response) -> Any: ...


def fold(lister: Lister, path: str, params: dict[str, str], start: Callable[[], A],
         add: Callable[[A, list[dict[str, Any]]], None]) -> Flow[A]:
    """GET the list at `path` page by page; `add(acc, items)` folds each page
    into `acc`, made by `start()` (again on a restart). Returns the last `acc`."""
    restarts = 0
    limit = lister.page_size
    while True:
        acc, token = start(), ""
        while True:
            response = yield lister.request("GET", path, params=_query(params, limit, token))
            if token and _expired(response):
                break
            sent, token = token, _fold_page(lister, response, acc, add)
            del response  # the page goes before the next one comes
            if not token or not limit:
                return acc
            if token == sent:  # a server that would have us loop forever
                raise ValueError("the API server sent back the continue token it was given")
        restarts += 1
        limit = limit if restarts <= PAGED_RESTARTS else None


def items(lister: Lister, path: str, params: dict[str, str]) -> Flow[list[dict[str, Any]]]:
    """Every item of the list, for the short lists that are kept whole anyway
    (gpucloud's own pods and jobs)."""
    return (yield from fold(lister, path, params, list, list.extend))


def _query(params: dict[str, str], limit: int | None, token: str) -> dict[str, str]:
    query = dict(params)
    if limit:
        query["limit"] = str(limit)
        if token:
            query["continue"] = token
    return query


def _fold_page(lister: Lister, response: httpx.Response, acc: A,
               add: Callable[[A, list[dict[str, Any]]], None]) -> str:
    """Fold one page; its continue token ("" on the last page). Its own function
    so the parsed page is gone when it returns, not kept by the flow's frame."""
    body = lister._body(response)
    # httpx's Client binds each response's stream to the response (BoundSyncStream:
    # a reference cycle), so a read page would wait for the cyclic garbage
    # collector, and tens of pages' bytes pile up before it runs. An empty stream
    # in its place breaks the cycle: the page's bytes go with the last reference.
    response.stream = httpx.ByteStream(b"")
    add(acc, wire.items(body))
    token = wire.meta(body).get("continue") or ""
    if not isinstance(token, str):
        raise TypeError("metadata.continue is not a string")
    return token


def _expired(response: httpx.Response) -> bool:
    """410 with reason Expired (k8s.io/apimachinery errors.IsResourceExpired
    reads the reason)."""
    if response.status_code != 410:
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("reason") == "Expired"


__all__ = ["PAGE_SIZE", "fold", "items"]
