"""One contract suite for every adapter (see harness.py)."""

from __future__ import annotations

import importlib
import pkgutil

import httpx
import pytest
import respx

from gpucloud.transport.http import RetryPolicy, Session
from gpucloud.errors import (
    AuthenticationError, InsufficientCapacityError, InternalServerError, NotFoundError,
    RateLimitError,
)
from gpucloud.models import Instance, InstanceStatus, Offer
from gpucloud.transport.tokens import TOKEN_REQUEST_EXTENSION

from . import fixtures as fixture_pkg
from .harness import ContractFixture, Route, op_flow

ERRORS = {
    "auth": AuthenticationError,
    "not_found": NotFoundError,
    "capacity": InsufficientCapacityError,
    "rate_limit": RateLimitError,
    "server_error": InternalServerError,
}


def load_fixtures() -> list[ContractFixture]:
    out = []
    for info in pkgutil.iter_modules(fixture_pkg.__path__):
        module = importlib.import_module(f"{fixture_pkg.__name__}.{info.name}")
        out.append(module.FIXTURE)
    return out


ALL = load_fixtures()


def test_every_adapter_has_a_contract_fixture():
    from gpucloud.providers.registry import BUILTIN

    assert sorted(f.name for f in ALL) == sorted(BUILTIN)


class Server:
    """respx side effect: answers from routes, checks auth and the spec."""

    def __init__(self, fixture: ContractFixture, routes: list[Route]):
        self.fixture = fixture
        self.routes = routes
        self.sent: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        if self.fixture.auth_header is not None:
            name, value = self.fixture.auth_header
            if request.extensions.get(TOKEN_REQUEST_EXTENSION):
                # A token grant authenticates with its body and carries no bearer.
                assert name not in request.headers, f"{name} sent to the token endpoint"
            else:
                assert request.headers.get(name) == value, f"{name} missing or wrong"
        if self.fixture.spec is not None:
            from tests.openapi_check import validate_request

            validate_request(self.fixture.spec, request)
        for route in self.routes:
            if route.matches(request):
                return route.response()
        raise AssertionError(f"unexpected request {request.method} {request.url}")


def run(fixture: ContractFixture, op: str, routes: list[Route]):
    provider = fixture.make_provider()
    server = Server(fixture, routes)
    with respx.mock(assert_all_called=False) as router:
        router.route(host=httpx.URL(fixture.base_url).host).mock(side_effect=server)
        session = Session(provider, sleep=lambda s: None, policy=RetryPolicy(max_retries=2))
        try:
            return session.run(op_flow(provider, fixture, op)), server
        finally:
            session.close()


@pytest.fixture(params=ALL, ids=lambda f: f.name)
def fx(request) -> ContractFixture:
    return request.param


def test_offers(fx):
    offers, server = run(fx, "offers", fx.offers_routes)
    assert len(offers) >= fx.min_offers and all(isinstance(o, Offer) for o in offers)
    assert {o.provider for o in offers} == {fx.name}
    query = fx.offers_query
    assert all(o.gpu == query.gpu for o in offers if query.gpu)
    assert all(o.gpu_count == query.count for o in offers if query.count)
    assert all(o.price_per_hour > 0 for o in offers)
    assert server.sent


def test_create(fx):
    instance, server = run(fx, "create", fx.create_routes)
    assert isinstance(instance, Instance) and instance.provider == fx.name
    assert instance.id == fx.created_id
    assert any(r.method in ("POST", "PUT") for r in server.sent)


def test_list(fx):
    instances, _ = run(fx, "list", fx.list_routes)
    assert {i.id for i in instances} == fx.listed_ids


def test_get(fx):
    instance, _ = run(fx, "get", fx.get_routes)
    assert instance.id == fx.instance_id and instance.ref == f"{fx.name}/{fx.instance_id}"


def test_delete(fx):
    result, server = run(fx, "delete", fx.delete_routes)
    assert result is None
    assert server.sent


def test_status_mapping(fx):
    assert fx.statuses, "a fixture must list its provider's statuses"
    for raw, expected in fx.statuses.items():
        instance, _ = run(fx, "get", fx.status_routes(raw))
        assert instance.status == expected, raw


def test_unknown_status_is_unknown_not_a_crash(fx):
    instance, _ = run(fx, "get", fx.status_routes("SOMETHING_NEW"))
    assert instance.status == InstanceStatus.UNKNOWN


@pytest.mark.parametrize("kind", sorted(ERRORS))
def test_error_mapping(fx, kind):
    if kind in fx.no_errors:
        assert kind not in fx.errors
        pytest.skip(f"{fx.name} has no {kind} error: {fx.no_errors[kind]}")
    case = fx.errors[kind]
    with pytest.raises(ERRORS[kind]) as info:
        run(fx, case.op, case.routes)
    assert info.value.provider == fx.name
    assert fx.secret not in str(info.value) and fx.secret not in repr(info.value)


@pytest.mark.parametrize("key", ["sweep-7", "my sweep/1"])
def test_create_carries_the_batch_key_beside_the_launch_id(fx, key):
    # Where the launch id travels (tags, labels, env, description), the batch key
    # travels too: in the very request that carries the launch id.
    import dataclasses
    import json as jsonlib

    def with_batch(provider):
        return fx.make_spec(provider).model_copy(update={"batch": key})

    _, server = run(dataclasses.replace(fx, make_spec=with_batch), "create", fx.create_routes)
    launch_id = with_batch(fx.make_provider()).launch_id
    [launch] = [r for r in server.sent if launch_id.encode() in r.content]
    body = jsonlib.dumps(jsonlib.loads(launch.content))
    # Verda's description keeps only characters its reader stops at.
    expected = key.replace(" ", "_").replace("/", "_") if fx.name == "verda" else key
    assert expected in body, body
    if fx.name == "kubernetes":  # a label where the key is a label value, else an annotation
        meta = jsonlib.loads(launch.content)["metadata"]
        where = "labels" if key == "sweep-7" else "annotations"
        assert meta[where]["gpucloud.dev/batch"] == key
