"""Shadeform's storage volumes: list/create/delete against its OpenAPI
document (every request validated), bodies from the document's examples
(tests/fixtures/shadeform/SOURCE.txt), the price read from /volumes/types."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpucloud.errors import NotFoundError, SpecError, exit_code_for
from gpucloud.models import VolumeSpec
from gpucloud.providers.shadeform.adapter import ShadeformProvider
from tests.adapters._shadeform_support import (  # noqa: F401 (fixtures)
    api,
    body,
    paths,
    provider,
    reply,
    run,
    sent,
    sleeps,
)

VOLUME_ID = "78a0dd5a-dbb1-4568-b55c-5e7e0a8b0c40"  # the document's example volume id


def test_shadeform_declares_volumes():
    assert ShadeformProvider.capabilities.volumes is True


def test_list_reads_volumes_with_the_listed_price(api, run, provider):
    api.on("GET", "/volumes", reply(200, body("volumes_200")))
    api.on("GET", "/volumes/types", reply(200, body("volumes_types_200")))
    volumes = run(provider.list_volumes())
    assert len(volumes) == 2
    volume = volumes[0]
    assert (volume.provider, volume.id, volume.name, volume.size_gb, volume.region) == (
        "shadeform", VOLUME_ID, "My storage volume", 100, "canada-1")
    # mounted_by names the machine using it.
    assert volume.attached_to == ("13b057d7-e266-4869-985f-760fe75a78b3",)
    # "0.0001" USD per GB-hour x 730 hours.
    assert volume.price_per_gb_month == Decimal("0.0730")
    assert volume.price_per_month == Decimal("7.3")
    # The contract's Volume has neither a status nor a creation time.
    assert volume.status is None and volume.created_at is None


def test_a_volume_whose_type_is_not_listed_has_no_price(api, run, provider):
    listed = body("volumes_200")
    listed["volumes"][0]["region"] = "norway-1"
    listed["volumes"][0]["mounted_by"] = ""
    api.on("GET", "/volumes", reply(200, listed))
    api.on("GET", "/volumes/types", reply(200, body("volumes_types_200")))
    volume = run(provider.list_volumes())[0]
    assert volume.price_per_gb_month is None and volume.price_per_month is None
    assert volume.attached_to == ()


def test_create_names_the_cloud_that_sells_volumes_in_the_region(api, run, provider):
    api.on("GET", "/volumes/types", reply(200, body("volumes_types_200")))
    create = api.on("POST", "/volumes/create", reply(200, body("volumes_create_200")))
    info = api.on("GET", f"/volumes/{VOLUME_ID}/info", reply(200, body("volume_info_200")))
    volume = run(provider.create_volume(VolumeSpec(name="My storage volume", size_gb=100,
                                                   region="canada-1")))
    # Exactly the document's CreateVolumeRequest example.
    assert sent(create) == body("volumes_create_request_example")
    assert info.call_count == 1
    assert (volume.id, volume.size_gb, volume.region) == (VOLUME_ID, 100, "canada-1")


def test_create_takes_cloud_colon_region(api, run, provider):
    api.on("GET", "/volumes/types", reply(200, body("volumes_types_200")))
    create = api.on("POST", "/volumes/create", reply(200, body("volumes_create_200")))
    api.on("GET", f"/volumes/{VOLUME_ID}/info", reply(200, body("volume_info_200")))
    run(provider.create_volume(VolumeSpec(name="ckpt", size_gb=20,
                                          region="hyperstack:canada-1")))
    assert sent(create) == {"cloud": "hyperstack", "region": "canada-1", "size_in_gb": 20,
                            "name": "ckpt"}


@pytest.mark.parametrize("region", ["norway-1", "datacrunch:canada-1"])
def test_a_region_without_volumes_is_refused_before_the_create(api, run, provider, region):
    api.on("GET", "/volumes/types", reply(200, body("volumes_types_200")))
    create = api.on("POST", "/volumes/create", reply(200, body("volumes_create_200")))
    with pytest.raises(SpecError, match="no cloud sells") as caught:
        run(provider.create_volume(VolumeSpec(name="ckpt", size_gb=20, region=region)))
    assert exit_code_for(caught.value) == 2
    assert "hyperstack:canada-1" in (caught.value.hint or "")
    assert create.call_count == 0


def test_a_region_two_clouds_sell_in_asks_which(api, run, provider):
    types = body("volumes_types_200")
    types["volume_types"][1]["cloud"] = "datacrunch"
    api.on("GET", "/volumes/types", reply(200, types))
    create = api.on("POST", "/volumes/create", reply(200, body("volumes_create_200")))
    with pytest.raises(SpecError, match="datacrunch, hyperstack sell"):
        run(provider.create_volume(VolumeSpec(name="ckpt", size_gb=20, region="canada-1")))
    assert create.call_count == 0


def test_delete_by_id(api, run, provider):
    route = api.on("POST", f"/volumes/{VOLUME_ID}/delete", reply(200))
    assert run(provider.delete_volume(VOLUME_ID)) is None
    assert paths(api) == [f"POST /v1/volumes/{VOLUME_ID}/delete"]
    assert route.call_count == 1


def test_deleting_an_unknown_volume_is_not_found(api, run, provider):
    # The document specifies no error body: CONSTRUCTED, mapped by its status.
    api.on("POST", f"/volumes/{VOLUME_ID}/delete", reply(404, {"error": "volume not found"}))
    with pytest.raises(NotFoundError):
        run(provider.delete_volume(VOLUME_ID))
