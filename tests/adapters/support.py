"""What the provider adapter tests share, parameterised by provider.

Each provider's tests answer at the HTTP transport with respx, with bodies
kept as JSON files in tests/fixtures/<provider>; where the provider publishes
an OpenAPI document, every request the adapter sends is validated against it
(tests/openapi_check.py) and must carry the account's Bearer key; flows run
through the real driver (retries, pacing, auth). A provider's own module
(_lambda_support.py, _runpod_support.py, ...) holds what only it has: its
constants, its fixture bodies' shapes, its routes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from gpucloud.models import InstanceSpec, Offer
from gpucloud.transport.http import Session
from tests.openapi_check import SpecCheckedAPI

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


class Fixtures:
    """A provider's fixture folder, tests/fixtures/<provider>."""

    def __init__(self, provider: str) -> None:
        self.path = FIXTURES / provider

    def file(self, name: str) -> Any:
        """The JSON file ``name`` (with its suffix), freshly read: a test may change it."""
        return json.loads((self.path / name).read_text())

    def body(self, name: str) -> Any:
        return self.file(f"{name}.json")

    def changed(self, name: str, /, *at: str, **changes: Any) -> Any:
        """The body ``name`` with ``changes`` made in the object at the keys ``at``."""
        raw = self.body(name)
        holder = raw
        for key in at:
            holder = holder[key]
        holder.update(changes)
        return raw


def replies(*, error_content_type: str | None = None) -> Callable[..., Any]:
    """A provider's ``reply(status, payload, *, text, headers)``: a factory of
    answers, so that a route answering several times never reuses a Response.
    No payload is an empty body; ``error_content_type``: a 4xx/5xx JSON body
    goes with that content type (RunPod's RFC 9457 problem+json)."""

    def reply(status: int = 200, payload: Any = None, *, text: str | None = None,
              headers: dict[str, str] | None = None) -> Any:
        def build(request: httpx.Request) -> httpx.Response:
            if text is not None:
                return httpx.Response(status, text=text, headers=headers)
            if payload is None:
                return httpx.Response(status, headers=headers)
            if error_content_type is not None and status >= 400:
                return httpx.Response(status, content=json.dumps(payload).encode(), headers={
                    "content-type": error_content_type, **(headers or {})})
            return httpx.Response(status, json=payload, headers=headers)
        return build
    return reply


@contextmanager
def checked_routes(base_url: str, spec: Path, key: str) -> Iterator[Any]:
    """respx routes under ``base_url`` (a request to anything else fails), each
    request checked against the OpenAPI document ``spec`` as it is answered;
    on leaving, no request broke the spec and every one carried ``Bearer <key>``."""
    checked = type("FakeAPI", (SpecCheckedAPI,), {"spec": spec})
    with respx.mock(base_url=base_url, assert_all_called=False,
                    assert_all_mocked=True) as router:
        fake = checked(router)
        yield fake
    assert not fake.violations
    for request in fake.requests:
        assert request.headers["Authorization"] == f"Bearer {key}"


def checked_api(base_url: str, spec: Path, key: str) -> Any:
    """The ``api`` fixture of a provider with an OpenAPI document (checked_routes)."""

    @pytest.fixture(name="api")
    def api_fixture() -> Any:
        with checked_routes(base_url, spec, key) as fake:
            yield fake
    return api_fixture


def provider_fixture(build: Callable[[], Any]) -> Any:
    """The ``provider`` fixture: the adapter ``build`` makes, with test credentials."""

    @pytest.fixture(name="provider")
    def provider() -> Any:
        return build()
    return provider


@pytest.fixture(name="sleeps")
def sleeps_fixture() -> list[float]:
    """The pauses the driver asked for (backoff, Retry-After, pacing), none slept."""
    return []


@pytest.fixture(name="run")
def run_fixture(provider: Any, sleeps: list[float]) -> Any:
    """Runs one of the provider's flows through the real driver."""
    session = Session(provider, sleep=sleeps.append)
    yield session.run
    session.close()


def instance_spec(offer: dict[str, Any], changes: dict[str, Any], **fields: Any
                  ) -> InstanceSpec:
    """An InstanceSpec of a live, available ``offer``; ``changes`` replace ``fields``."""
    sold = Offer(**offer, source="live", available=True)
    return InstanceSpec(**{"offer": sold, **fields, **changes})
