"""Every adapter maps its error replies through one table (its ``_wire.ERRORS``
rows and ``error_fields``), applied by ``Provider.map_error``: a row added to
the table changes the mapping, and without the table the provider's own
codes fall back to the generic status mapping. The bodies are minimal ones in
each provider's documented error shape (constructed: only their shape and
code matter here; the per-provider error tests use recorded bodies)."""

from __future__ import annotations

import re

import httpx
import pytest

from gpucloud.catalog.bundled import load_catalogs
from gpucloud.errors import (
    APIStatusError,
    ConflictError,
    InsufficientCapacityError,
    PermissionDeniedError,
    QuotaExceededError,
)
from gpucloud.providers.error_table import ErrorFields, ErrorRule
from gpucloud.providers.registry import BUILTIN, adapter_class

CATALOGS = load_catalogs()
KUBE_QUOTA = (403, {"kind": "Status", "message": 'pods "x" is forbidden: exceeded quota: gpus',
                    "reason": "Forbidden"})
# name -> (status, body) the provider's table maps to a class the status alone would not.
REPLIES = {
    "lambda": (400, {"error": {"code": "instance-operations/launch/insufficient-capacity",
                               "message": "Not enough capacity"}}),
    "vastai": (400, {"success": False, "error": "no_such_ask", "msg": "ask 1 is not available"}),
    "runpod": (402, {"title": "Payment Required", "detail": "balance too low"}),
    "verda": (400, {"code": "insufficient_funds", "message": "Not enough funds"}),
    "kubernetes": KUBE_QUOTA,
    "coreweave": KUBE_QUOTA,
    "sandbox": (409, {"error": {"code": "capacity_exhausted", "message": "no capacity"}}),
    # Shadeform documents no error body: rows go by status and words (_wire.ERRORS).
    "shadeform": (400, {"error": "name must be unique"}),
    "ssh": (409, {"error": {"code": "held", "message": "box1 is allocated"}}),
    "hyperstack": (400, {"status": False, "message": "Flavor n3-H100x1 is out of stock",
                         "error_reason": "bad_request"}),
    "fluidstack": (400, {"message": "instance type h100-hgx-80gb.8x is out of stock"}),
}
EXPECTED = {"lambda": InsufficientCapacityError, "vastai": InsufficientCapacityError,
            "runpod": QuotaExceededError, "verda": QuotaExceededError,
            "kubernetes": QuotaExceededError, "coreweave": QuotaExceededError,
            "sandbox": InsufficientCapacityError, "shadeform": ConflictError,
            "ssh": InsufficientCapacityError, "hyperstack": InsufficientCapacityError,
            "fluidstack": InsufficientCapacityError}
GENERIC = {400: APIStatusError, 402: APIStatusError, 403: PermissionDeniedError,
           409: ConflictError}


def _reply(status: int, body: object) -> httpx.Response:
    request = httpx.Request("POST", "https://api.example.test/v1/thing")
    return httpx.Response(status, json=body, request=request)


def _provider(name: str, **table: object):
    cls = adapter_class(name)
    subclass = type(f"Tabled{cls.__name__}", (cls,), dict(table))
    return subclass(CATALOGS[name])


def test_every_builtin_provider_has_a_reply_here():
    assert set(REPLIES) == set(BUILTIN)


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_the_table_maps_the_providers_own_codes(name):
    error = _provider(name).map_error(_reply(*REPLIES[name]))
    assert type(error) is EXPECTED[name]


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_without_its_rows_the_status_alone_decides(name):
    status, body = REPLIES[name]
    error = _provider(name, errors=()).map_error(_reply(status, body))
    assert type(error) is GENERIC[status]


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_a_row_added_first_wins(name):
    cls = adapter_class(name)
    row = ErrorRule(status=REPLIES[name][0], error=ConflictError, hint="a row of this test")
    error = _provider(name, errors=(row, *cls.errors)).map_error(_reply(*REPLIES[name]))
    assert type(error) is ConflictError and error.hint == "a row of this test"


def test_a_row_matches_only_when_every_condition_holds():
    reply = _reply(400, {})
    fields = ErrorFields(code="x", text="the words")
    assert ErrorRule(status=400, code="x", text=re.compile("words")).matches(reply, fields)
    assert not ErrorRule(status=400, code="y").matches(reply, fields)
    assert not ErrorRule(status=(401, 403), code="x").matches(reply, fields)
    assert not ErrorRule(text=re.compile("words"), unless=re.compile("the")).matches(reply, fields)
    assert ErrorRule(code=(None, "z")).matches(reply, ErrorFields())
    assert not ErrorRule(text=re.compile("")).matches(reply, ErrorFields())
    assert not ErrorRule(request=lambda r: r.method == "GET").matches(reply, fields)


def test_a_hint_template_takes_the_adapters_fields_and_a_providers_hint_is_kept_as_is():
    row = ErrorRule(status=400, hint="in namespace {namespace}")
    provider = _provider("sandbox", errors=(row,),
                         hint_fields=lambda self: {"namespace": "team-a"})
    assert provider.map_error(_reply(400, {})).hint == "in namespace team-a"
    lam = _provider("lambda", errors=())
    suggested = lam.map_error(_reply(400, {"error": {"code": "c", "message": "m",
                                                      "suggestion": "use {braces}"}}))
    assert suggested.hint == "use {braces}"
