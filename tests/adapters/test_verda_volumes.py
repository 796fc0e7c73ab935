"""Verda's shared filesystems as gpucloud volumes: list/create/delete with the
bodies sdk-python builds (no OpenAPI document exists), replies from the SDK's
own test payloads, and a job's launch attaching and mounting its volumes."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from gpucloud.errors import BadRequestError, SpecError, exit_code_for
from gpucloud.models import VolumeMount, VolumeSpec
from gpucloud.providers.verda import VerdaProvider
from tests.adapters._job_support import make_job
from tests.adapters._verda_support import (  # noqa: F401 (fixtures)
    INSTANCE_ID,
    api_fixture,
    body,
    error,
    launch_routes,
    make_spec,
    provider_fixture,
    reply,
    run_fixture,
)

NVME_ID = "cf995e26-ce69-4149-84a3-cdd1e100670f"  # the SDK payload's NVMe (OS) volume
HDD_ID = "ea4edc62-9838-4b7c-bd5b-862f2efec675"
SCRIPT_ID = "5ec7c0de-a5d2-4972-ae4e-d429115d055b"


def shared_volume(**changes):
    """The SDK's NVME_VOLUME as a shared filesystem: type NVMe_Shared (sdk-python's
    VolumeTypes.SFS), not an OS volume; its mount_command kept as the SDK wrote it."""
    raw = body("get_volume_200_sdk_fixture")
    raw.update({"type": "NVMe_Shared", "is_os_volume": False, **changes})
    return raw


def test_verda_declares_volumes():
    assert VerdaProvider.capabilities.volumes is True


def test_list_leaves_os_volumes_out_and_prices_by_type_in_usd(api, run, provider):
    api.on("GET", "/volumes", reply(200, body("list_volumes_200_sdk_fixture")))
    api.on("GET", "/volume-types", reply(200, body("list_volume_types_200_sdk_fixture")))
    [volume] = run(provider.list_volumes())
    assert (volume.provider, volume.id, volume.name, volume.size_gb, volume.region) == (
        "verda", HDD_ID, "Volume-iHdL4ysR", 100, "FIN-01")
    assert volume.status == "detached" and volume.attached_to == ()
    assert volume.created_at is not None and volume.created_at.year == 2021
    # Its own monthly_price is in EUR: the HDD type's USD rate is used instead.
    assert volume.price_per_gb_month == Decimal("0.05")


def test_an_attached_volume_names_its_machines_and_a_usd_price_is_its_own(
        api, run, provider):
    listed = body("list_volumes_200_sdk_fixture")
    listed[0].update(is_os_volume=False, currency="usd")
    api.on("GET", "/volumes", reply(200, listed))
    api.on("GET", "/volume-types", reply(200, []))
    attached = run(provider.list_volumes())[0]
    assert attached.attached_to == ("4fee633c-b119-4447-af9c-70ba17675fc5",)
    # monthly_price 20 USD for 50 GB.
    assert attached.price_per_gb_month == Decimal("0.4")


def test_no_usd_price_anywhere_is_unknown(api, run, provider):
    api.on("GET", "/volumes", reply(200, body("list_volumes_200_sdk_fixture")))
    api.on("GET", "/volume-types", reply(200, [
        {"type": "HDD", "price": {"currency": "eur", "price_per_month_per_gb": 0.05}}]))
    [volume] = run(provider.list_volumes())
    assert volume.price_per_gb_month is None and volume.price_per_month is None


def test_create_sends_the_sdk_body_and_reads_the_volume_back(api, run, provider):
    create = api.on("POST", "/volumes", reply(202, text=NVME_ID))
    api.on("GET", f"/volumes/{NVME_ID}", reply(200, shared_volume(location="FIN-03")))
    api.on("GET", "/volume-types", reply(200, body("list_volume_types_200_sdk_fixture")))
    volume = run(provider.create_volume(VolumeSpec(name="shared-filesystem-1", size_gb=50,
                                                   region="FIN-03")))
    assert json.loads(create.calls.last.request.content) == body("create_volume_request_sdk")
    assert (volume.id, volume.region, volume.size_gb) == (NVME_ID, "FIN-03", 50)


def test_delete_is_permanent(api, run, provider):
    route = api.on("DELETE", f"/volumes/{NVME_ID}", reply(202))
    assert run(provider.delete_volume(NVME_ID)) is None
    assert json.loads(route.calls.last.request.content) == body("delete_volume_request_sdk")


def test_a_refused_delete_maps_through_the_error_table(api, run, provider):
    api.on("DELETE", f"/volumes/{NVME_ID}",
           reply(400, body("error_invalid_request_400_sdk_fixture")))
    with pytest.raises(BadRequestError, match="Your existence is invalid"):
        run(provider.delete_volume(NVME_ID))


def _volumes_job():
    return make_job(volumes=(VolumeMount(name="shared-filesystem-1", mount="/data",
                                         volume_id=NVME_ID),))


def test_a_job_attaches_its_volume_at_launch_and_its_script_mounts_it(api, run, provider):
    api.on("GET", f"/volumes/{NVME_ID}", reply(200, shared_volume()))
    script = api.on("POST", "/scripts", reply(201, text=SCRIPT_ID))
    api.on("DELETE", f"/scripts/{SCRIPT_ID}", reply(200))
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(job=_volumes_job())))
    assert json.loads(launch.calls.last.request.content)["existing_volumes"] == [NVME_ID]
    text = json.loads(script.calls.last.request.content)["script"]
    host = f"/mnt/gpucloud/{NVME_ID}"
    # The NFS source and options of the volume's own mount_command, at gpucloud's directory.
    assert (f"mount -t nfs -o nconnect=16 nfs.fin-01.datacrunch.io:volume-nxC2tf9F {host}"
            in text)
    assert f"-v {host}:/data" in text
    # Mounted before the runner decides anything; a failed mount ends the job.
    assert text.index("mount -t nfs") < text.index("gc_end() {")
    assert 'echo 1 >"$GC_STATE/exit-status"' in text


def test_a_multi_node_jobs_node_attaches_the_volumes_at_launch_with_no_script(
        api, run, provider):
    """A node of a multi-node job boots without the job (started over ssh once
    every node runs): its launch attaches the shared filesystem all the same."""
    script = api.on("POST", "/scripts", reply(201, text=SCRIPT_ID))
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(volumes=_volumes_job().volumes)))
    sent = json.loads(launch.calls.last.request.content)
    assert sent["existing_volumes"] == [NVME_ID] and sent["startup_script_id"] is None
    assert script.call_count == 0


def test_a_nodes_runner_mounts_the_shared_filesystem_as_a_start_up_script_does(
        api, run, provider):
    api.on("GET", f"/volumes/{NVME_ID}", reply(200, shared_volume()))
    mounts, setup = run(provider.node_mounts(_volumes_job()))
    host = f"/mnt/gpucloud/{NVME_ID}"
    assert mounts == [(host, "/data")]
    assert any(f"mount -t nfs -o nconnect=16 nfs.fin-01.datacrunch.io:volume-nxC2tf9F {host}"
               in line for line in setup)


def test_a_node_cannot_mount_a_block_volume(api, run, provider):
    api.on("GET", f"/volumes/{NVME_ID}", reply(200, shared_volume(type="NVMe")))
    with pytest.raises(SpecError):
        run(provider.node_mounts(_volumes_job()))


def test_a_job_without_volumes_attaches_none(api, run, provider):
    api.on("POST", "/scripts", reply(201, text=SCRIPT_ID))
    api.on("DELETE", f"/scripts/{SCRIPT_ID}", reply(200))
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(job=make_job())))
    assert json.loads(launch.calls.last.request.content)["existing_volumes"] == []


@pytest.mark.parametrize("changes", [
    {"type": "NVMe"},  # a block volume: no file system on it yet
    {"mount_command": "echo mount me"},
])
def test_a_volume_a_job_cannot_mount_is_refused_before_any_launch(
        api, run, provider, changes):
    api.on("GET", f"/volumes/{NVME_ID}", reply(200, shared_volume(**changes)))
    script = api.on("POST", "/scripts", reply(201, text=SCRIPT_ID))
    launch, _ = launch_routes(api)
    with pytest.raises(SpecError) as caught:
        run(provider.create(make_spec(job=_volumes_job())))
    assert exit_code_for(caught.value) == 2
    assert script.call_count == 0 and launch.call_count == 0
