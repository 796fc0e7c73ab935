"""Shadeform offers and create, as exact requests: prices in cents become USD per
machine per hour, the upstream cloud shows on every offer, and a create with a
deadline always carries auto_delete (with a spend cap, its spend threshold too)
while one without a deadline carries none."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest

from gpucloud.errors import (
    APIResponseValidationError, ConfigurationError, InsufficientCapacityError, SpecError,
)
from gpucloud.models import InstanceStatus, JobRun
from gpucloud.providers.base import OfferQuery
from tests.adapters._shadeform_support import (  # noqa: F401 (fixtures)
    EXAMPLE_KEY, INSTANCE_ID, KEY_ID, NEW_KEY, api, body, info_body, make_spec, paths, provider,
    reply, run, sent, sleeps,
)

CREATE = "/instances/create"
INFO = f"/instances/{INSTANCE_ID}/info"
DEADLINE = datetime(2026, 12, 1, 18, 0, tzinfo=timezone.utc)


def h100_types() -> dict:
    """The document's example with a second, 8x H100 type at 2392 cents (built here)."""
    data = body("instance_types_200")
    h100 = dict(data["instance_types"][0], cloud="lambdalabs", shade_instance_type="H100x8",
                hourly_price=2392, availability=[
                    {"region": "us-south-2", "available": True, "display_name": "Texas"}],
                configuration=dict(data["instance_types"][0]["configuration"], num_gpus=8,
                                   gpu_type="H100", vram_per_gpu_in_gb=80))
    cpu = dict(h100, shade_instance_type="cpu-only",
               configuration=dict(h100["configuration"], num_gpus=0))
    free = dict(h100, shade_instance_type="H100x8-free", hourly_price=0)
    data["instance_types"] = [data["instance_types"][0], h100, cpu, free]
    return data


def test_offers_read_cents_as_usd_per_machine_hour_per_region(api, run, provider):
    route = api.on("GET", "/instances/types", reply(200, body("instance_types_200")))

    offers = run(provider.offers(OfferQuery()))

    assert str(route.calls.last.request.url) == "https://api.shadeform.ai/v1/instances/types"
    # hourly_price 210 (cents) for the whole machine.
    assert {o.price_per_hour for o in offers} == {Decimal("2.10")}
    assert {(o.instance_type, o.region, o.available) for o in offers} == {
        ("hyperstack_A6000", "us-central-1", True), ("hyperstack_A6000", "us-central-2", False)}
    assert all(o.source == "live" and o.provider == "shadeform" for o in offers)
    assert all(o.notes == ("runs on hyperstack through Shadeform",) for o in offers)
    assert {(o.vcpus, o.memory_gb, o.disk_gb, o.gpu_memory_gb) for o in offers} == {
        (6, 12, 256, 48)}


def test_offers_filter_by_gpu_and_count_and_skip_cpu_and_unpriced_types(api, run, provider):
    api.on("GET", "/instances/types", reply(200, h100_types()))

    offers = run(provider.offers(OfferQuery(gpu="H100", count=8)))

    assert [(o.instance_type, o.region, o.price_per_hour, o.gpu, o.gpu_count) for o in offers] \
        == [("lambdalabs_H100x8", "us-south-2", Decimal("23.92"), "H100", 8)]


def test_spot_offers_are_none_and_ask_nothing(api, run, provider):
    assert run(provider.offers(OfferQuery(spot=True))) == []
    assert api.requests == []


@pytest.mark.parametrize("price", [2.1, "210", None])
def test_a_price_that_is_not_whole_cents_is_an_unreadable_reply(api, run, provider, price):
    data = body("instance_types_200")
    data["instance_types"][0]["hourly_price"] = price
    api.on("GET", "/instances/types", reply(200, data))
    with pytest.raises(APIResponseValidationError, match="hourly_price"):
        run(provider.offers(OfferQuery()))


def _create_routes(api):
    keys = api.on("GET", "/sshkeys", reply(200, body("sshkeys_200")))
    create = api.on("POST", CREATE, reply(200, body("create_200")))
    info = api.on("GET", INFO, reply(200, info_body(
        tags=["gpucloud-launch-id=gc-3a1a2245a7", "gpucloud-shutdown-at=2026-12-01T18:00:00Z"],
        auto_delete={"date_threshold": "2026-12-01T18:00:00Z"})))
    return keys, create, info


def test_create_with_a_deadline_sends_auto_delete_the_tags_and_the_registered_key(
        api, run, provider):
    _, create, _ = _create_routes(api)

    machine = run(provider.create(make_spec(shutdown_at=DEADLINE, ssh_public_key=EXAMPLE_KEY,
                                            image="ubuntu22.04_cuda12.2_shade_os")))

    assert paths(api) == ["GET /v1/sshkeys", "POST /v1/instances/create",
                          f"GET /v1{INFO}"]
    assert sent(create) == {
        "cloud": "hyperstack", "region": "canada-1", "shade_instance_type": "A6000",
        "shade_cloud": True, "name": "train-a",
        "envs": [{"name": "GPUCLOUD_LAUNCH_ID", "value": "gc-3a1a2245a7"}],
        "os": "ubuntu22.04_cuda12.2_shade_os", "ssh_key_id": KEY_ID,
        "auto_delete": {"date_threshold": "2026-12-01T18:00:00Z"},
        "tags": ["gpucloud-launch-id=gc-3a1a2245a7", "gpucloud-shutdown-at=2026-12-01T18:00:00Z"]}
    assert machine.id == INSTANCE_ID and machine.launch_id == "gc-3a1a2245a7"
    assert machine.shutdown_at == DEADLINE and machine.status is InstanceStatus.RUNNING


def test_create_under_a_spend_cap_also_sends_its_share_cut_to_the_cent(api, run, provider):
    _, create, _ = _create_routes(api)
    run(provider.create(make_spec(shutdown_at=DEADLINE, max_cost=Decimal("12.349"),
                                  ssh_public_key=EXAMPLE_KEY)))
    assert sent(create)["auto_delete"] == {"date_threshold": "2026-12-01T18:00:00Z",
                                           "spend_threshold": "12.34"}


def test_create_without_a_deadline_sends_no_auto_delete_and_no_deadline_tag(api, run, provider):
    _, create, _ = _create_routes(api)
    run(provider.create(make_spec(ssh_public_key=EXAMPLE_KEY)))
    request = sent(create)
    assert "auto_delete" not in request
    assert request["tags"] == ["gpucloud-launch-id=gc-3a1a2245a7"]


def test_a_new_public_key_is_registered_once_and_its_id_used(api, run, provider):
    _, create, _ = _create_routes(api)
    added = api.on("POST", "/sshkeys/add",
                   reply(200, {"id": "11111111-2222-3333-4444-555555555555"}))

    run(provider.create(make_spec(ssh_public_key=NEW_KEY)))

    assert sent(added) == {"name": "gpucloud-" + _digest(NEW_KEY), "public_key": NEW_KEY}
    assert sent(create)["ssh_key_id"] == "11111111-2222-3333-4444-555555555555"


def _digest(key: str) -> str:
    import hashlib

    return hashlib.sha256(" ".join(key.split()[:2]).encode()).hexdigest()[:16]


def test_without_a_key_the_accounts_default_key_is_left_to_shadeform(api, run, provider):
    _, create, _ = _create_routes(api)
    run(provider.create(make_spec()))
    assert "ssh_key_id" not in sent(create)
    assert "GET /v1/sshkeys" not in paths(api)


def test_a_key_name_that_is_not_registered_is_refused_before_any_launch(api, run, provider):
    _create_routes(api)
    with pytest.raises(ConfigurationError, match="no SSH key named 'nope'"):
        run(provider.create(make_spec(ssh_key_name="nope")))
    assert paths(api) == ["GET /v1/sshkeys"]


def test_a_job_or_a_name_without_its_cloud_is_refused_before_any_request(api, run, provider):
    job = JobRun(name="j", image="alpine", command=["true"])
    with pytest.raises(SpecError, match="job"):
        run(provider.create(make_spec(job=job)))
    with pytest.raises(SpecError, match="not a Shadeform offer name"):
        spec = make_spec()
        run(provider.create(spec.model_copy(update={
            "offer": spec.offer.model_copy(update={"instance_type": "A6000"})})))
    assert api.requests == []


def test_a_sold_out_type_is_a_capacity_error_so_the_next_offer_is_tried(api, run, provider):
    # CONSTRUCTED body: the document specifies no error replies.
    api.on("POST", CREATE, reply(400, {"error": "A6000 is out of stock in canada-1"}))
    with pytest.raises(InsufficientCapacityError) as info:
        run(provider.create(make_spec()))
    assert "out of stock" in str(info.value)


def test_a_create_reply_without_an_id_says_the_machine_may_exist(api, run, provider):
    api.on("POST", CREATE, reply(200, {}))
    with pytest.raises(APIResponseValidationError, match="gc-3a1a2245a7"):
        run(provider.create(make_spec()))
