"""Lambda's filesystems as gpucloud volumes: list/create/delete against the
1.8.3 OpenAPI fixture (requests validated, reply bodies checked against the
spec too), the error codes of the filesystem operations, and a job's launch
naming its filesystems and binding them into the container."""

from __future__ import annotations

import json

import httpx
import pytest

from gpucloud.errors import (
    BadRequestError, ConflictError, NotFoundError, SpecError, exit_code_for,
)
from gpucloud.models import VolumeMount, VolumeSpec
from gpucloud.providers.lambdalabs.adapter import LambdaProvider
from tests.adapters._job_support import make_job
from tests.adapters._lambda_support import (  # noqa: F401 (fixtures)
    SPEC,
    api,
    body,
    launch_body,
    launch_routes,
    make_spec,
    provider,
    reply,
    run,
    sleeps,
)
from tests.openapi_check import response_errors

FS_ID = "398578a2336b49079e74043f0bd2cfe8"


def test_lambda_declares_volumes():
    assert LambdaProvider.capabilities.volumes is True


@pytest.mark.parametrize("name", ["list_filesystems_200", "create_filesystem_200",
                                  "delete_filesystem_200"])
def test_the_reply_fixtures_follow_the_spec(name):
    path = {"list_filesystems_200": ("GET", "/api/v1/file-systems"),
            "create_filesystem_200": ("POST", "/api/v1/filesystems"),
            "delete_filesystem_200": ("DELETE", f"/api/v1/filesystems/{FS_ID}")}[name]
    request = httpx.Request(path[0], "https://cloud.lambda.ai" + path[1],
                            json={"name": "my-filesystem", "region": "us-west-1"}
                            if path[0] == "POST" else None)
    reply = body(name)
    assert response_errors(SPEC, request, httpx.Response(200, json=reply, request=request)) == []
    # The spec does describe this reply: the same body in a list is refused.
    assert response_errors(SPEC, request, httpx.Response(200, json=[reply], request=request))


def test_list_reads_each_filesystem(api, run, provider):
    api.on("GET", "/api/v1/file-systems", reply(200, body("list_filesystems_200")))
    [volume] = run(provider.list_volumes())
    assert (volume.provider, volume.id, volume.name, volume.region) == (
        "lambda", FS_ID, "my-filesystem", "us-west-1")
    # bytes_used 2.5 GiB: billed per GiB used, so 3.
    assert volume.size_gb == 3
    assert volume.status == "in use"
    # is_in_use names no machine: no ids to show.
    assert volume.attached_to == ()
    assert volume.created_at is not None and volume.created_at.isoformat() == \
        "2026-11-30T09:15:00+00:00"
    # Lambda's API carries no storage rate: unknown, never 0.
    assert volume.price_per_gb_month is None and volume.price_per_month is None


def test_create_sends_name_and_region_only(api, run, provider):
    route = api.on("POST", "/api/v1/filesystems", reply(200, body("create_filesystem_200")))
    volume = run(provider.create_volume(VolumeSpec(name="my-filesystem", size_gb=500,
                                                   region="us-west-1")))
    assert json.loads(route.calls.last.request.content) == {
        "name": "my-filesystem", "region": "us-west-1"}
    # A new filesystem holds nothing yet: it grows as it is written.
    assert (volume.id, volume.size_gb, volume.status) == (FS_ID, 0, "not in use")


def test_a_name_lambda_refuses_is_refused_before_any_request(api, run, provider):
    route = api.on("POST", "/api/v1/filesystems", reply(200, body("create_filesystem_200")))
    with pytest.raises(SpecError, match="Lambda filesystem name") as caught:
        run(provider.create_volume(VolumeSpec(name="1-data", size_gb=1, region="us-west-1")))
    assert exit_code_for(caught.value) == 2
    assert route.call_count == 0


def test_a_taken_name_is_a_conflict(api, run, provider):
    api.on("POST", "/api/v1/filesystems", reply(400, body("error_duplicate_400")))
    with pytest.raises(ConflictError):
        run(provider.create_volume(VolumeSpec(name="my-filesystem", size_gb=1,
                                              region="us-west-1")))


def test_delete_by_id(api, run, provider):
    route = api.on("DELETE", f"/api/v1/filesystems/{FS_ID}",
                   reply(200, body("delete_filesystem_200")))
    assert run(provider.delete_volume(FS_ID)) is None
    assert route.call_count == 1


def test_deleting_a_mounted_filesystem_is_a_conflict_with_a_hint(api, run, provider):
    api.on("DELETE", f"/api/v1/filesystems/{FS_ID}",
           reply(400, body("error_filesystem_in_use_400")))
    with pytest.raises(ConflictError) as caught:
        run(provider.delete_volume(FS_ID))
    assert "terminate the machines" in (caught.value.hint or "")
    assert exit_code_for(caught.value) == 10


def test_deleting_an_unknown_filesystem_is_not_found(api, run, provider):
    api.on("DELETE", f"/api/v1/filesystems/{FS_ID}",
           reply(404, body("error_filesystem_not_found_404")))
    with pytest.raises(NotFoundError, match="Filesystem was not found") as caught:
        run(provider.delete_volume(FS_ID))
    assert exit_code_for(caught.value) == 5


def _job_with_volumes():
    return make_job(volumes=(
        VolumeMount(name="my-filesystem", mount="/data", volume_id=FS_ID),
        VolumeMount(name="ckpt-store", mount="/workspace/ckpt", volume_id="abc123"),
    ))


def test_a_job_launch_names_its_filesystems_and_binds_them(api, run, provider):
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(job=_job_with_volumes())))
    sent = launch_body(launch.calls.last.request)
    assert sent["file_system_names"] == ["my-filesystem", "ckpt-store"]
    script = sent["user_data"]
    assert "-v /lambda/nfs/my-filesystem:/data" in script
    assert "-v /lambda/nfs/ckpt-store:/workspace/ckpt" in script


def test_a_job_without_volumes_names_no_filesystem(api, run, provider):
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(job=make_job())))
    sent = launch_body(launch.calls.last.request)
    assert "file_system_names" not in sent and "/lambda/nfs" not in sent["user_data"]


def test_a_filesystem_of_another_region_refuses_the_launch_as_bad_input(api, run, provider):
    # The code of ApiErrorFileSystemInWrongRegion; the spec gives no message: CONSTRUCTED.
    launch_routes(api, reply(400, {"error": {
        "code": "instance-operations/launch/file-system-in-wrong-region",
        "message": "Filesystem is in a different region."}}))
    with pytest.raises(BadRequestError) as caught:
        run(provider.create(make_spec(job=_job_with_volumes())))
    assert exit_code_for(caught.value) == 2
    assert "its own region" in (caught.value.hint or "")


def test_a_volume_name_that_is_no_filesystem_name_is_refused_before_launch(
        api, run, provider):
    launch, _ = launch_routes(api)
    job = make_job(volumes=(VolumeMount(name="data;rm", mount="/data", volume_id="x"),))
    with pytest.raises(SpecError):
        run(provider.create(make_spec(job=job)))
    assert launch.call_count == 0
