"""The contract suite's harness: one set of tests, one fixture module per provider.

Adding a provider means adding ``tests/contract/fixtures/<provider>.py`` that
defines ``FIXTURE = ContractFixture(...)``, not tests. ``test_contract.py``
runs every check below for every fixture module it finds:

* offers, create, list, get and delete, each driven through the real driver
  (``gpucloud.transport.http.Session``) with respx answering at the HTTP transport;
* every request carries the provider's auth header (``auth_header``) and, when
  ``spec`` is set, validates against that OpenAPI file;
* every raw status in ``statuses`` maps to our InstanceStatus;
* errors: ``auth``, ``not_found``, ``capacity``, ``rate_limit`` and
  ``server_error`` map to AuthenticationError, NotFoundError,
  InsufficientCapacityError, RateLimitError and InternalServerError.

Routes are canned exchanges. A route's ``path`` is exact, or a regular
expression when it starts with ``^``. When several routes match a request the
first listed wins, so list the error route before a general one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from gpucloud.providers.base import OfferQuery, Provider
from gpucloud.models import InstanceSpec, InstanceStatus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass
class Route:
    method: str
    path: str
    status: int = 200
    json: Any = None
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def matches(self, request: httpx.Request) -> bool:
        if request.method != self.method:
            return False
        if self.path.startswith("^"):
            return re.fullmatch(self.path, request.url.path) is not None
        return request.url.path == self.path

    def response(self) -> httpx.Response:
        if self.text is not None:
            return httpx.Response(self.status, text=self.text, headers=self.headers)
        if self.json is None:
            return httpx.Response(self.status, headers=self.headers)
        return httpx.Response(self.status, json=self.json, headers=self.headers)


@dataclass
class ErrorCase:
    op: str  # "offers" | "create" | "list" | "get" | "delete"
    routes: list[Route]  # setup routes and the failing one


@dataclass
class ContractFixture:
    name: str
    make_provider: Callable[[], Provider]  # with a fake credential
    base_url: str  # respx answers only this host
    auth_header: tuple[str, str] | None  # (header, exact value) on every request; None: no auth
    offers_query: OfferQuery
    offers_routes: list[Route]
    min_offers: int  # at least this many offers for offers_query
    make_spec: Callable[[Provider], InstanceSpec]  # what create() is asked to launch
    create_routes: list[Route]
    created_id: str
    list_routes: list[Route]
    listed_ids: set[str]
    instance_id: str  # used by get() and delete()
    get_routes: list[Route]
    delete_routes: list[Route]
    # Routes under which get(instance_id) answers with a given raw status.
    status_routes: Callable[[str], list[Route]]
    statuses: dict[str, InstanceStatus]
    errors: dict[str, ErrorCase]
    spec: Path | None = None  # OpenAPI file every request must validate against
    secret: str = "contract-secret-value"  # must never appear in error texts
    # Error kinds this provider cannot produce, with the reason (a test says so).
    no_errors: dict[str, str] = field(default_factory=dict)


def op_flow(provider: Provider, fixture: ContractFixture, op: str) -> Any:
    if op == "offers":
        return provider.offers(fixture.offers_query)
    if op == "create":
        return provider.create(fixture.make_spec(provider))
    if op == "list":
        return provider.list_instances()
    if op == "get":
        return provider.get(fixture.instance_id)
    if op == "delete":
        return provider.delete(fixture.instance_id)
    raise ValueError(op)
