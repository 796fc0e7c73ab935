"""Hostile replies, per adapter: HTML on a 200, a nesting bomb, null where an
object belongs, wrong types ("tags": 5), numbers too large for a price or a
date. Each must come out as APIResponseValidationError (exit 10), never as
another exception (exit 1), and a create must never report a machine for them.
respx answers at the HTTP transport; flows run through the real driver."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from gpucloud.transport.http import Session
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.lambdalabs.adapter import LambdaProvider
from gpucloud.providers.runpod.adapter import RunPodProvider
from gpucloud.providers.vastai import VastProvider
from gpucloud.providers.verda import VerdaProvider
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from gpucloud.errors import APIResponseValidationError, exit_code_for
from tests.adapters import _lambda_support as lam
from tests.adapters import _runpod_support as rp
from tests.adapters import _vastai_support as vast
from tests.adapters import _verda_support as verda

CATALOGS = load_catalogs()
BOMB = "[" * 100_000 + "]" * 100_000
HUGE = 10 ** 400  # a JSON integer no price, count or timestamp can be

# Bodies wrong for every adapter and every operation.
EVERYWHERE: dict[str, tuple[str, str]] = {
    "html on a 200": ("<!DOCTYPE html><html><body>Down for maintenance</body></html>",
                      "text/html"),
    "nesting bomb": (BOMB, "application/json"),
    "null": ("null", "application/json"),
    "a number": ("5", "application/json"),
    "a list of numbers": ("[5]", "application/json"),
    "infinity": ("1e999", "application/json"),
}


def _with(data: Any, path: list[Any], value: Any) -> Any:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


def _lambda_bodies() -> dict[str, list[Any]]:
    types = lam.body("list_instance_types_200")
    first = next(iter(types["data"]))
    listed = lam.body("list_instances_200")
    one = lam.body("get_instance_200")
    return {
        "offers": [
            _with(types, ["data", first, "instance_type"], 5),
            _with(types, ["data", first], None),
            _with(types, ["data", first, "instance_type", "price_cents_per_hour"], HUGE),
            _with(types, ["data", first, "regions_with_capacity_available"], [None]),
            {"data": None},
        ],
        "list": [_with(listed, ["data", 0, "tags"], 5), _with(listed, ["data", 0], None),
                 {"data": {"not": "a list"}}],
        "get": [_with(one, ["data", "tags"], 5), _with(one, ["data", "tags"], [5]),
                _with(one, ["data", "id"], 5), {"data": None}],
        "create": [{"data": {"instance_ids": [5]}}, {"data": {"instance_ids": None}},
                   {"data": None}, {"data": {"instance_ids": [{"id": "x"}]}}],
    }


def _runpod_bodies() -> dict[str, list[Any]]:
    gpus = rp.body("v2_list_gpu_types_200_gpus")
    pods = rp.body("v2_list_pods_200_pods")
    pod = rp.body("v2_get_pod_200_pod")
    return {
        "offers": [_with(gpus, ["gpus", 0, "price"], 5), _with(gpus, ["gpus", 0], None),
                   _with(gpus, ["gpus", 0, "price", "secure"], HUGE),
                   _with(gpus, ["gpus", 0, "dataCenters"], [5]), {"gpus": 5}],
        "list": [_with(pods, ["pods", 0, "id"], 5), _with(pods, ["pods", 0], None),
                 _with(pods, ["pods", 0, "env"], 5), {"pods": None}],
        "get": [_with(pod, ["id"], 5), _with(pod, ["status"], None), _with(pod, ["env"], [5]),
                _with(pod, ["env"], "GPUCLOUD_LAUNCH_ID=x")],
        "create": [_with(pod, ["id"], 5), _with(pod, ["id"], None), {"id": ["x"]}],
    }


def _vast_bodies() -> dict[str, list[Any]]:
    offers = {"offers": [vast.example_offer()]}
    shown = vast.show()
    page = vast.page([1], None)
    return {
        "offers": [_with(offers, ["offers", 0, "num_gpus"], "8"),
                   _with(offers, ["offers", 0, "dph_base"], HUGE),
                   _with(offers, ["offers", 0, "storage_cost"], -1),
                   _with(offers, ["offers", 0], None), {"offers": 5}],
        "list": [_with(page, ["instances", 0, "id"], "1"), _with(page, ["instances", 0], None),
                 _with(page, ["instances", 0, "start_date"], HUGE), {"instances": 5}],
        "get": [_with(shown, ["instances", "id"], None),
                _with(shown, ["instances", "label"], 5),
                _with(shown, ["instances", "start_date"], 1e300),
                {"instances": [5]}],
        "create": [{"success": True, "new_contract": "1234568"}, {"success": True},
                   {"success": True, "new_contract": None}, {"new_contract": [1]}],
    }


def _verda_bodies() -> dict[str, list[Any]]:
    types = verda.body("list_instance_types_200")
    listed = verda.body("list_instances_200_sdk_fixture")
    one = verda.body("get_instance_200_sdk_fixture")
    return {
        "offers": [_with(types, [0, "price_per_hour"], {"usd": 1}), _with(types, [0], None),
                   _with(types, [0, "price_per_hour"], "1e999"),
                   _with(types, [0, "gpu"], 5), {"not": "a list"}],
        "list": [_with(listed, [0, "id"], 5), _with(listed, [0], None), {"not": "a list"}],
        "get": [_with(one, ["id"], 5), _with(one, ["status"], None), [one],
                _with(one, ["description"], {"launch": 5})],
        "create": [{"id": 5}, "not-a-uuid", ["deadc0de-a5d2-4972-ae4e-d429115d055b"]],
    }


ADAPTERS: dict[str, dict[str, Any]] = {
    "lambda": dict(cls=LambdaProvider, base=lam.API, bodies=_lambda_bodies,
                   spec=lambda: lam.make_spec(), instance=lam.INSTANCE_ID),
    "runpod": dict(cls=RunPodProvider, base=rp.API, bodies=_runpod_bodies,
                   spec=lambda: rp.make_spec(), instance=rp.POD_ID),
    "vastai": dict(cls=VastProvider, base=vast.API, bodies=_vast_bodies,
                   spec=lambda: vast.make_spec(), instance=vast.SHOWN),
    "verda": dict(cls=VerdaProvider, base=verda.API, bodies=_verda_bodies,
                  spec=lambda: verda.make_spec(ssh_public_key=None, ssh_key_name="laptop"),
                  instance=verda.INSTANCE_ID),
}
OPERATIONS = ("offers", "list", "get", "create")


def _provider(name: str) -> Any:
    credential = (Credential("verda", SecretStr("client-secret"), "test", client_id="client-id")
                  if name == "verda" else Credential(name, SecretStr("sk-test"), "test"))
    return ADAPTERS[name]["cls"](CATALOGS[name], credential)


def _flow(name: str, provider: Any, operation: str) -> Any:
    if operation == "offers":
        return provider.offers(OfferQuery(gpu=None, count=None))
    if operation == "list":
        return provider.list_instances()
    if operation == "get":
        return provider.get(ADAPTERS[name]["instance"])
    return provider.create(ADAPTERS[name]["spec"]())


def _run(name: str, operation: str, answer: Any) -> tuple[Any, list[httpx.Request]]:
    """Run one operation with every API request answered by `answer`."""
    provider = _provider(name)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if name == "verda" and request.url.path.endswith("/sshkeys"):
            return httpx.Response(200, json=verda.SSH_KEYS)  # so that create reaches launch
        return answer(request)

    with respx.mock(assert_all_called=False, assert_all_mocked=True) as router:
        if name == "verda":
            router.post(f"{verda.API}/oauth2/token").mock(return_value=httpx.Response(
                200, json=verda.body("oauth2_token_200_sdk_fixture")))
        router.route().mock(side_effect=handler)
        session = Session(provider, sleep=lambda s: None)
        try:
            with pytest.raises(APIResponseValidationError) as info:
                session.run(_flow(name, provider, operation))
        finally:
            session.close()
    return info.value, seen


def _raw(text: str, content_type: str) -> Any:
    return lambda request: httpx.Response(200, text=text, headers={"content-type": content_type})


def _json(payload: Any) -> Any:
    text = json.dumps(payload) if not isinstance(payload, str) else payload
    return lambda request: httpx.Response(200, text=text,
                                          headers={"content-type": "application/json"})


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("kind", sorted(EVERYWHERE))
def test_a_reply_of_no_known_shape_is_a_validation_error(name, operation, kind):
    text, content_type = EVERYWHERE[kind]
    error, seen = _run(name, operation, _raw(text, content_type))
    assert error.provider == name and exit_code_for(error) == 10
    assert len(str(error)) < 500  # one line about the reply, not the reply
    launches = [r for r in seen if r.extensions.get("gpucloud_kind") == "launch"]
    assert len(launches) <= 1  # a create is never sent twice


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@pytest.mark.parametrize("operation", OPERATIONS)
def test_wrong_types_in_a_reply_are_a_validation_error(name, operation):
    bodies = ADAPTERS[name]["bodies"]()[operation]
    for payload in bodies:
        error, _ = _run(name, operation, _json(payload))
        assert exit_code_for(error) == 10, payload


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_an_error_status_with_a_nesting_bomb_keeps_its_status_class(name):
    from gpucloud.errors import NotFoundError

    provider = _provider(name)
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as router:
        if name == "verda":
            router.post(f"{verda.API}/oauth2/token").mock(return_value=httpx.Response(
                200, json=verda.body("oauth2_token_200_sdk_fixture")))
        router.route().mock(return_value=httpx.Response(
            404, text=BOMB, headers={"content-type": "application/json"}))
        session = Session(provider, sleep=lambda s: None)
        try:
            with pytest.raises(NotFoundError):
                session.run(provider.get(ADAPTERS[name]["instance"]))
        finally:
            session.close()
