"""RunPod network volumes (REST v2 /v2/network-volumes): list with the pods
that mount each one, create and delete with exactly the spec's requests
(validated against the v2 OpenAPI fixture), the GB-month price RunPod's docs
publish, and errors through the adapter's error table."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpucloud.errors import (
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    SpecError,
    exit_code_for,
)
from gpucloud.models import Volume, VolumeSpec
from tests.adapters._runpod_support import (  # noqa: F401 (fixtures)
    api,
    body,
    pod_body,
    provider,
    reply,
    run,
    sent_json,
    sleeps,
)

VOLUME_ID = "2q9m7x4c"  # the spec's example
VOLUME = f"/v2/network-volumes/{VOLUME_ID}"


def mounting(pod_id: str, volume_id: str = VOLUME_ID) -> dict:
    return pod_body(id=pod_id, mounts={"network": [{"volumeId": volume_id,
                                                    "path": "/workspace"}]})


def test_list_volumes_reads_the_spec_example_and_the_pods_mounting_it(api, run, provider):
    listed = api.on("GET", "/v2/network-volumes",
                    reply(200, body("v2_list_network_volumes_200_networkVolumes")))
    pods = api.on("GET", "/v2/pods", reply(200, {"pods": [
        mounting("usespod01"), pod_body(id="plainpod01"), mounting("otherpod01", "zzzz9999")]}))
    [volume] = run(provider.list_volumes())
    assert volume == Volume(provider="runpod", id=VOLUME_ID, name="training-dataset",
                            size_gb=100, region="US-KS-2",
                            price_per_gb_month=Decimal("0.14"),  # HIGH_PERFORMANCE
                            attached_to=("usespod01",))
    assert listed.call_count == 1
    # A cluster's nodes mount volumes too: they are listed with the pods.
    assert pods.calls.last.request.url.params["includeClusterPods"] == "true"


@pytest.mark.parametrize(("tier", "size", "price"), [
    ("STANDARD", 100, Decimal("0.07")),
    ("STANDARD", 1000, Decimal("0.07")),
    ("STANDARD", 2000, None),  # tiered past "1TB": no single figure
    ("HIGH_PERFORMANCE", 2000, Decimal("0.14")),
    (None, 100, None),  # a tier RunPod did not name: unknown, never guessed
])
def test_price_per_gb_month_follows_runpods_published_rates(api, run, provider, tier, size,
                                                            price):
    raw = body("v2_list_network_volumes_200_networkVolumes")
    raw["networkVolumes"][0].update(size=size, type=tier)
    if tier is None:
        del raw["networkVolumes"][0]["type"]
    api.on("GET", "/v2/network-volumes", reply(200, raw))
    api.on("GET", "/v2/pods", reply(200, {"pods": []}))
    [volume] = run(provider.list_volumes())
    assert volume.price_per_gb_month == price
    if price is not None:
        assert volume.price_per_month == price * size


def test_create_volume_sends_exactly_name_size_data_center_and_the_standard_tier(
        api, run, provider):
    route = api.on("POST", "/v2/network-volumes",
                   reply(201, body("v2_create_network_volume_201_networkVolume")))
    volume = run(provider.create_volume(VolumeSpec(name="training-dataset", size_gb=50,
                                                   region="US-KS-2")))
    assert sent_json(route.calls.last.request) == {
        "name": "training-dataset", "size": 50, "dataCenter": "US-KS-2", "type": "STANDARD"}
    assert (volume.id, volume.size_gb, volume.region, volume.attached_to) == (
        VOLUME_ID, 50, "US-KS-2", ())


@pytest.mark.parametrize("size", [1, 9, 4097])
def test_a_size_runpod_does_not_offer_is_refused_before_any_request(api, run, provider, size):
    route = api.on("POST", "/v2/network-volumes", reply(500))
    with pytest.raises(SpecError, match="10 to 4096 GB") as info:
        run(provider.create_volume(VolumeSpec(name="d", size_gb=size, region="US-KS-2")))
    assert route.call_count == 0 and exit_code_for(info.value) == 2


def test_delete_volume_sends_the_delete(api, run, provider):
    route = api.on("DELETE", VOLUME, reply(204))
    assert run(provider.delete_volume(VOLUME_ID)) is None
    assert route.call_count == 1


def test_a_reply_without_the_volumes_id_is_unreadable(api, run, provider):
    from gpucloud.errors import APIResponseValidationError

    api.on("GET", "/v2/network-volumes", reply(200, {"networkVolumes": [{"name": "x"}]}))
    api.on("GET", "/v2/pods", reply(200, {"pods": []}))
    with pytest.raises(APIResponseValidationError):
        run(provider.list_volumes())


@pytest.mark.parametrize(("method", "path", "status", "payload", "cls", "code"), [
    ("DELETE", VOLUME, 404, "v2_error_404_notFound", NotFoundError, 5),
    ("POST", "/v2/network-volumes", 400, "v2_error_400_badRequest", BadRequestError, 2),
    ("POST", "/v2/network-volumes", 422, "v2_error_422_validationFailed", BadRequestError, 2),
    ("POST", "/v2/network-volumes", 401, "v2_error_401_missingBearerToken",
     AuthenticationError, 4),
])
def test_volume_errors_map_through_the_table(api, run, provider, method, path, status, payload,
                                             cls, code):
    api.on(method, path, reply(status, body(payload)))
    flow = (provider.delete_volume(VOLUME_ID) if method == "DELETE" else
            provider.create_volume(VolumeSpec(name="d", size_gb=50, region="US-KS-2")))
    with pytest.raises(cls) as info:
        run(flow)
    assert exit_code_for(info.value) == code

