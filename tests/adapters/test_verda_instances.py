"""Verda adapter, contract-tested (list, get, delete, verify, and the async
session): respx answers at the HTTP transport (the OAuth2 token endpoint
included) with the SDK bodies in tests/fixtures/verda, and flows run through
the real driver (retries, auth). No OpenAPI document exists for Verda: request
bodies are checked against the bodies the official Python SDK builds. Shared
helpers and fixtures live in tests/adapters/_verda_support.py."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from decimal import Decimal

import httpx
import pytest

from gpucloud.transport.http import AsyncSession
from gpucloud.providers.base import OfferQuery
from gpucloud.errors import (
    APIResponseValidationError,
    APIStatusError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
)
from gpucloud.models import Instance, InstanceStatus, Offer
from tests.adapters._verda_support import (  # noqa: F401 (fixtures)
    API,
    INSTANCE_ID,
    api_fixture,
    body,
    error,
    instance_body,
    offer_routes,
    provider_fixture,
    reply,
    run_fixture,
)

# -- list, get, delete -----------------------------------------------------------


def test_list_maps_the_sdk_instance(api, run, provider):
    api.on("GET", "/instances", reply(200, body("list_instances_200_sdk_fixture")))
    [instance] = run(provider.list_instances())
    assert instance.model_dump(exclude={"ref"}) == {
        "provider": "verda", "id": INSTANCE_ID, "name": "I'll be your host for today",
        "status": InstanceStatus.RUNNING, "provider_status": "running",
        "gpu": "super-duper-gpu", "gpu_count": 1, "instance_type": "1V100.6V",
        "region": "FIN-01", "price_per_hour": Decimal("0.6"), "ip": "1.2.3.4",
        "private_ip": None, "batch": None,
        "created_at": None,  # the fixture's placeholder is not a time
        "shutdown_at": None, "launch_id": None, "simulated": False,
        "connection": {"method": "ssh", "host": "1.2.3.4", "port": 22, "user": "root"},
        "terminated_at": None, "final_cost": None,
    }


def test_list_reads_launch_id_deadline_and_iso_times(api, run, provider):
    raw = instance_body(description="gpucloud launch_id=gc-0123456789; "
                                    "shutdown_at=2026-12-01T12:00:00Z",
                        created_at="2026-11-30T10:00:00.123Z", price_per_hour="0.89",
                        gpu={"description": "1x Tesla V100 16GB", "number_of_gpus": 1},
                        ip=None, status="provisioning")
    api.on("GET", "/instances", reply(200, [raw]))
    [instance] = run(provider.list_instances())
    assert instance.launch_id == "gc-0123456789"
    assert instance.shutdown_at == datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    assert instance.created_at == datetime(2026, 11, 30, 10, 0, 0, 123000, tzinfo=timezone.utc)
    assert instance.price_per_hour == Decimal("0.89") and instance.gpu == "V100"
    assert instance.ip is None and instance.status is InstanceStatus.PENDING


def test_list_rejects_an_instance_without_id(api, run, provider):
    api.on("GET", "/instances", reply(200, [instance_body(id=None)]))
    with pytest.raises(APIResponseValidationError):
        run(provider.list_instances())


STATUSES = {
    "new": InstanceStatus.PENDING, "ordered": InstanceStatus.PENDING,
    "validating": InstanceStatus.PENDING, "pending": InstanceStatus.PENDING,
    "provisioning": InstanceStatus.PENDING, "restoring": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING, "starting_hibernation": InstanceStatus.STOPPING,
    "hibernating": InstanceStatus.STOPPED, "offline": InstanceStatus.STOPPED,
    "deleting": InstanceStatus.TERMINATING, "discontinued": InstanceStatus.TERMINATED,
    "notfound": InstanceStatus.TERMINATED, "error": InstanceStatus.FAILED,
    "no_capacity": InstanceStatus.FAILED, "unknown": InstanceStatus.UNKNOWN,
    "something_new": InstanceStatus.UNKNOWN,
}


@pytest.mark.parametrize("raw,status", sorted(STATUSES.items()))
def test_get_maps_every_status(api, run, provider, raw, status):
    api.on("GET", f"/instances/{INSTANCE_ID}", reply(200, instance_body(status=raw)))
    instance = run(provider.get(INSTANCE_ID))
    assert instance.status is status and instance.provider_status == raw


def test_get_quotes_the_id_into_the_path(api, run, provider):
    route = api.router.route(method="GET", url__startswith=f"{API}/instances/").mock(
        return_value=httpx.Response(404, json=error("not_found", "Invalid instance id")))
    with pytest.raises(NotFoundError):
        run(provider.get("a/b"))
    assert route.calls.last.request.url.raw_path == b"/v1/instances/a%2Fb"


def test_delete_puts_the_delete_action(api, run, provider):
    route = api.on("PUT", "/instances", reply(202))
    assert run(provider.delete(INSTANCE_ID)) is None
    sent = json.loads(route.calls.last.request.content)
    assert sent == {**body("instance_action_request_delete"), "id": [INSTANCE_ID]}


@pytest.mark.parametrize("status", [200, 202, 204])
def test_delete_accepts_success_statuses(api, run, provider, status):
    api.on("PUT", "/instances", reply(status))
    assert run(provider.delete(INSTANCE_ID)) is None


def test_delete_207_success_item(api, run, provider):
    api.on("PUT", "/instances", reply(207, [
        {"action": "delete", "instanceId": INSTANCE_ID, "status": "success"}]))
    assert run(provider.delete(INSTANCE_ID)) is None


@pytest.mark.parametrize("item,cls", [
    ({"error": "Can't discontinue a provisioning instance", "statusCode": 409}, ConflictError),
    ({"error": "Invalid instance id", "statusCode": 400}, NotFoundError),
    ({"error": {"code": "forbidden_action", "message": "Not yours"}, "statusCode": 403},
     PermissionDeniedError),
    ({"status": "error"}, APIStatusError),
])
def test_delete_207_failed_item_raises_the_mapped_error(api, run, provider, item, cls):
    api.on("PUT", "/instances", reply(207, [
        {"action": "delete", "instanceId": "some-other-id", "status": "success"},
        {"action": "delete", "instanceId": INSTANCE_ID, "status": "error", **item}]))
    with pytest.raises(APIStatusError) as info:
        run(provider.delete(INSTANCE_ID))
    assert type(info.value) is cls
    detail = item.get("error")
    expected = detail["message"] if isinstance(detail, dict) else detail or "failed"
    assert expected in str(info.value)


def test_delete_207_without_the_item_is_a_validation_error(api, run, provider):
    api.on("PUT", "/instances", reply(207, [{"instanceId": "other", "status": "success"}]))
    with pytest.raises(APIResponseValidationError):
        run(provider.delete(INSTANCE_ID))


def test_delete_of_a_missing_instance(api, run, provider):
    api.on("PUT", "/instances", reply(400, error("invalid_request", "Invalid instance id")))
    with pytest.raises(NotFoundError):
        run(provider.delete(INSTANCE_ID))


def test_delete_is_retried_after_a_5xx(api, run, provider):
    route = api.on("PUT", "/instances", reply(503, text="busy"), reply(202))
    run(provider.delete(INSTANCE_ID))
    assert route.call_count == 2


def test_verify_gets_a_token_and_reads_locations(api, run, provider):
    route = api.on("GET", "/locations", reply(200, body("list_locations_200")))
    assert run(provider.verify()) is None
    assert route.call_count == 1 and len(api.grants) == 1


def test_async_session(api, provider):
    offer_routes(api)
    api.on("GET", "/instances", reply(200, body("list_instances_200_sdk_fixture")))

    async def main() -> tuple[list[Offer], list[Instance]]:
        session = AsyncSession(provider, sleep=lambda s: asyncio.sleep(0))
        try:
            return (await session.run(provider.offers(OfferQuery(gpu="V100"))),
                    await session.run(provider.list_instances()))
        finally:
            await session.aclose()

    offers, instances = asyncio.run(main())
    assert [o.instance_type for o in offers] == ["1V100.6V"]
    assert [i.id for i in instances] == [INSTANCE_ID]
    assert len(api.grants) == 1


def test_list_reads_the_batch_key_from_the_description(api, run, provider):
    """The machines of a multi-node job are grouped by the key create wrote there."""
    raw = instance_body(description="gpucloud launch_id=gj-0123456789; "
                                    "shutdown_at=2026-12-01T12:00:00Z; batch=mn-2-00112233aa")
    api.on("GET", "/instances", reply(200, [raw]))
    [instance] = run(provider.list_instances())
    assert (instance.launch_id, instance.batch) == ("gj-0123456789", "mn-2-00112233aa")
    assert instance.private_ip is None  # the API's Instance has no private address
