"""Vast.ai's volumes: listed and deleted (requests validated against the
OpenAPI fixture, which now carries listVolumes and deleteVolume), never
created or mounted by a job: refused before any request, with the reason.

The listing body is CONSTRUCTED (tests/fixtures/vastai/SOURCE.txt): the
spec's Volume schema gives no example values. The delete replies are the
spec's own per-property examples."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import httpx
import pytest

from gpucloud import Client
from gpucloud.errors import (
    APIResponseValidationError, BadRequestError, NotFoundError, SpecError, exit_code_for,
)
from gpucloud.models import VolumeSpec
from gpucloud.providers.vastai import VastProvider
from tests.adapters._vastai_support import (  # noqa: F401 (fixtures)
    API,
    KEY,
    SPEC,
    api_fixture,
    body,
    provider_fixture,
    reply,
    run_fixture,
    sleeps_fixture,
)
from tests.openapi_check import response_errors

PATH = "/api/v0/volumes/"


def listing(**changes: object) -> dict:
    """The constructed listing, its first row changed by `changes`."""
    data = body("list_volumes_200_constructed")
    data["volumes"][0].update(changes)
    return data


def vast_client() -> Client:
    return Client(["vastai"], credentials={"vastai": KEY}, use_keyring=False,
                  sleep=lambda s: None)


def test_vastai_declares_volumes_it_lists_but_refuses_to_create():
    assert VastProvider.capabilities.volumes is True
    refusal = VastProvider.__new__(VastProvider).volume_refusal()
    assert isinstance(refusal, SpecError)


@pytest.mark.parametrize("name,method,status", [
    ("list_volumes_200_constructed", "GET", 200),
    ("delete_volume_200_from_schema_examples", "DELETE", 200),
    ("delete_volume_400_from_schema_examples", "DELETE", 400),
    ("delete_volume_404_from_schema_examples", "DELETE", 404)])
def test_the_reply_fixtures_follow_the_spec(name, method, status):
    request = httpx.Request(method, API + PATH, json={"id": 1} if method == "DELETE" else None)
    reply = body(name)
    assert response_errors(SPEC, request, httpx.Response(status, json=reply, request=request)) \
        == []
    # The spec does describe this reply: the same body in a list is refused.
    assert response_errors(SPEC, request, httpx.Response(status, json=[reply], request=request))


# -- list -------------------------------------------------------------------------------


def test_list_reads_each_volume(api, run, provider):
    route = api.on("GET", PATH, reply(200, body("list_volumes_200_constructed")))
    used, idle = run(provider.list_volumes())
    # What vast-cli's `show volumes` asks: the account's own, local and network alike.
    assert dict(route.calls.last.request.url.params) == {"owner": "me", "type": "all_volume"}
    # No name in the row: Vast's own name for a volume, V.<id>.
    assert (used.provider, used.id, used.name, used.size_gb, used.status) == (
        "vastai", "20118481", "V.20118481", 15, "in_use")
    assert used.attached_to == ("1234568",) and idle.attached_to == ()
    assert used.created_at == datetime(2025, 12, 1, tzinfo=timezone.utc)
    # 50.4 GB: a fraction of a GB is rounded up, never understated.
    assert (idle.name, idle.size_gb) == ("V.20118482", 51)
    # storage_total_cost is a total so far, not a rate: the rate is unknown, never 0.
    assert used.price_per_gb_month is None and used.price_per_month is None
    # The spec's Volume carries no location: no region is made up.
    assert used.region is None


def test_a_row_with_a_location_name_or_bare_ids_is_read_as_given(api, run, provider):
    api.on("GET", PATH, reply(200, listing(geolocation="Texas, US", name="ckpts",
                                           instances=[1234568, "77"])))
    used, _ = run(provider.list_volumes())
    assert (used.region, used.name, used.attached_to) == ("US", "ckpts", ("1234568", "77"))


@pytest.mark.parametrize("bad", [{"volumes": "none"}, {"volumes": [{"id": "x"}]},
                                 {"volumes": [{"id": 1, "disk_space": "big"}]}])
def test_a_listing_that_is_not_one_is_an_invalid_reply(api, run, provider, bad):
    api.on("GET", PATH, reply(200, bad))
    with pytest.raises(APIResponseValidationError, match="/api/v0/volumes/"):
        run(provider.list_volumes())


def test_reap_warns_of_an_idle_vast_volume_that_still_bills(api):
    listed = api.on("GET", PATH, reply(200, body("list_volumes_200_constructed")))
    instances = body("list_instances_v1_200_from_schema_examples")
    instances["instances"], instances["next_token"] = [], None
    api.on("GET", "/api/v1/instances/", reply(200, instances))
    with vast_client() as client:
        report = client.reap()
        assert [v.ref for v in client.volumes()] == ["vastai/20118481", "vastai/20118482"]
    assert listed.call_count == 2  # the reaper looks at what bills on Vast too
    # Rented since start_date, no instance: a warning, its rate unknown (never $0).
    (line,) = [w for w in report.warnings if "vastai/20118482" in w]
    assert "vastai/20118482 (V.20118482, 51 GB) has had no machine" in line
    assert "at a rate not known here" in line
    assert "gpucloud volumes delete vastai/20118482" in line


# -- delete -----------------------------------------------------------------------------


def test_delete_sends_the_id_in_body_and_query(api, run, provider):
    route = api.on("DELETE", PATH, reply(200, body("delete_volume_200_from_schema_examples")))
    run(provider.delete_volume("20118482"))
    sent = route.calls.last.request
    # The spec reads the body, the official client sends the query: both carry it.
    assert json.loads(sent.content) == {"id": 20118482}
    assert dict(sent.url.params) == {"id": "20118482"}


@pytest.mark.parametrize("status,name,error,code", [
    (404, "delete_volume_404_from_schema_examples", NotFoundError, 5),
    # The error code decides, whatever the status: no_such_volume is a missing volume.
    (400, "delete_volume_404_from_schema_examples", NotFoundError, 5),
    (400, "delete_volume_400_from_schema_examples", BadRequestError, None)])
def test_delete_errors_map_through_the_table(api, run, provider, status, name, error, code):
    api.on("DELETE", PATH, reply(status, body(name)))
    with pytest.raises(error) as caught:
        run(provider.delete_volume("20118482"))
    if code is not None:
        assert exit_code_for(caught.value) == code


def test_a_delete_of_a_non_vast_id_is_refused_before_any_request(api, run, provider):
    route = api.on("DELETE", PATH, reply(200, body("delete_volume_200_from_schema_examples")))
    with pytest.raises(SpecError, match="not a Vast volume id"):
        run(provider.delete_volume("vol-1"))
    assert route.call_count == 0


def test_client_deletes_an_idle_vast_volume_by_ref(api):
    api.on("GET", PATH, reply(200, body("list_volumes_200_constructed")))
    route = api.on("DELETE", PATH, reply(200, body("delete_volume_200_from_schema_examples")))
    with vast_client() as client:
        client.delete_volume("vastai/20118482")
        with pytest.raises(SpecError, match="in use by 1234568"):
            client.delete_volume("vastai/20118481")
    assert route.call_count == 1


# -- create and jobs: refused -----------------------------------------------------------


def test_create_is_refused_before_any_request(api, run, provider):
    with pytest.raises(SpecError) as caught:
        run(provider.create_volume(VolumeSpec(name="data", size_gb=10, region="US")))
    assert exit_code_for(caught.value) == 2
    assert "rented from one host's volume offer" in caught.value.message
    assert "\n" not in caught.value.message
    assert "vastai search volumes" in (caught.value.hint or "")
    assert "gpucloud volumes list" in (caught.value.hint or "")
    assert not api.requests


def test_client_create_is_refused_with_the_reason_before_credentials_or_requests(api):
    with Client(["vastai", "sandbox"], use_keyring=False) as client:
        with pytest.raises(SpecError, match="host's volume offer") as caught:
            client.create_volume("data", 10, "US", provider="vastai")
    assert "vastai search volumes" in (caught.value.hint or "")
    with vast_client() as client, pytest.raises(SpecError, match="host's volume offer"):
        client.plan_volume("data", 10, provider="vastai")
    assert not api.requests


def test_a_job_with_volumes_on_vast_is_refused_at_plan_time(api):
    job = {"name": "trainer", "image": "busybox", "resources": {"gpu": "h100", "gpu_count": 1},
           "max_runtime": "1h", "volumes": [{"name": "data", "mount": "/data"}]}
    with Client(["vastai"], use_keyring=False) as client, \
            pytest.raises(SpecError, match="mounts volumes .data. but vastai volumes "
                                           "cannot be created or mounted") as caught:
        client.plan_job(job, provider="vastai", dry_run=True)
    assert exit_code_for(caught.value) == 2
    assert not api.requests
