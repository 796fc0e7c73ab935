"""Lambda adapter, contract-tested (create, list, get, delete, verify): respx
answers at the HTTP transport with the recorded/spec bodies in
tests/fixtures/lambda, every request the adapter sends is validated against
the trimmed official OpenAPI document, and flows run through the real driver
(retries, rate limits, auth). Shared helpers and fixtures live in
tests/adapters/_lambda_support.py."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from decimal import Decimal

import httpx
import pytest

from gpucloud.errors import (
    APIResponseValidationError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    InternalServerError,
    NotFoundError,
    SpecError,
)
from gpucloud.models import Connection, Instance, InstanceStatus
from tests.adapters._lambda_support import (  # noqa: F401 (fixtures)
    INSTANCE_ID,
    NEW_KEY,
    YUBIKEY,
    api,
    body,
    instance_body,
    launch_body,
    launch_routes,
    make_spec,
    provider,
    reply,
    run,
    sleeps,
)

# -- create ------------------------------------------------------------------------




def test_create_sends_exactly_the_spec_body(api, run, provider):
    launch, get = launch_routes(api)
    instance = run(provider.create(make_spec()))
    assert launch.call_count == 1 and get.call_count == 1
    assert launch_body(launch.calls.last.request) == {
        "region_name": "us-south-2",
        "instance_type_name": "gpu_8x_h100_sxm5",
        "ssh_key_names": ["my-key"],
        "name": "gpucloud-lid-7f3a9c",
        "tags": [{"key": "gpucloud-launch-id", "value": "lid-7f3a9c"}],
    }
    assert instance.id == INSTANCE_ID
    assert instance.launch_id == "lid-7f3a9c"
    assert instance.status is InstanceStatus.PENDING
    # Only names registered keys: no key listing or registration.
    assert [r.url.path for r in api.requests] == [
        "/api/v1/instance-operations/launch", f"/api/v1/instances/{INSTANCE_ID}"]


def test_create_with_image_and_deadline(api, run, provider):
    launch, _ = launch_routes(api)
    deadline = datetime(2026, 12, 1, 6, 30, 15, 123456, tzinfo=timezone.utc)
    run(provider.create(make_spec(image="lambda-stack-24-04", shutdown_at=deadline,
                                  name="x" * 80)))
    sent = launch_body(launch.calls.last.request)
    assert sent["image"] == {"family": "lambda-stack-24-04"}
    assert sent["tags"] == [{"key": "gpucloud-launch-id", "value": "lid-7f3a9c"},
                            {"key": "gpucloud-shutdown-at", "value": "2026-12-01T06:30:15Z"}]
    assert sent["name"] == "x" * 64
    assert "quantity" not in sent


@pytest.mark.parametrize("image,sent", [
    ("lambda-stack-22-04", {"family": "lambda-stack-22-04"}),
    # An image id from GET /api/v1/images (list_images_200), sent as an id.
    ("15c1034f-5e2e-4b7a-9ebd-8c8847440e1c", {"id": "15c1034f-5e2e-4b7a-9ebd-8c8847440e1c"}),
    ("id:my-image", {"id": "my-image"}),
    ("family:lambda-stack-24-04", {"family": "lambda-stack-24-04"}),
])
def test_create_takes_an_image_id_or_a_family(api, run, provider, image, sent):
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(image=image)))
    assert launch_body(launch.calls.last.request)["image"] == sent


def test_create_without_an_image_leaves_the_field_out(api, run, provider):
    # The bundled catalog forces no image: Lambda's own default is used.
    from gpucloud.catalog.bundled import load_catalogs

    assert load_catalogs()["lambda"].default_image is None
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(image=None)))
    assert "image" not in launch_body(launch.calls.last.request)


def test_create_reuses_a_registered_key_with_the_same_public_key(api, run, provider):
    keys = api.on("GET", "/api/v1/ssh-keys", reply(200, body("list_ssh_keys_200")))
    add = api.on("POST", "/api/v1/ssh-keys", reply(500))
    launch, _ = launch_routes(api)
    public = " ".join(YUBIKEY.split()[:2]) + " someone@else"
    run(provider.create(make_spec(ssh_key_name="gpucloud-abc", ssh_public_key=public)))
    assert keys.call_count == 1 and add.call_count == 0
    assert launch_body(launch.calls.last.request)["ssh_key_names"] == ["yubikey"]


def test_create_registers_a_new_public_key(api, run, provider):
    def added(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        key_id = "ddf9a910ceb744a0bb95242cbba6cb50"
        return httpx.Response(200, json={"data": {"id": key_id, **sent}})

    api.on("GET", "/api/v1/ssh-keys", reply(200, body("list_ssh_keys_200")))
    add = api.on("POST", "/api/v1/ssh-keys", added)
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(ssh_key_name="gpucloud-3f2a", ssh_public_key=NEW_KEY + "\n")))
    assert add.call_count == 1
    assert json.loads(add.calls.last.request.content) == {"name": "gpucloud-3f2a",
                                                          "public_key": NEW_KEY}
    assert launch_body(launch.calls.last.request)["ssh_key_names"] == ["gpucloud-3f2a"]
    assert [r.url.path for r in api.requests][:2] == ["/api/v1/ssh-keys", "/api/v1/ssh-keys"]


def test_a_key_another_launch_registered_meanwhile_is_used(api, run, provider):
    """Two launches of a batch on a new account both find no key and both
    register it; Lambda refuses the second (400): that launch reads the keys
    again and uses the one the other registered, instead of failing the batch."""
    listed = body("list_ssh_keys_200")
    meanwhile = copy.deepcopy(listed)
    meanwhile["data"].append({"id": "d" * 32, "name": "gpucloud-3f2a", "public_key": NEW_KEY})
    keys = api.on("GET", "/api/v1/ssh-keys", reply(200, listed), reply(200, meanwhile))
    add = api.on("POST", "/api/v1/ssh-keys", reply(400, body("error_invalid_parameters_400")))
    launch, _ = launch_routes(api)
    run(provider.create(make_spec(ssh_key_name="gpucloud-3f2a", ssh_public_key=NEW_KEY)))
    assert keys.call_count == 2 and add.call_count == 1
    assert launch_body(launch.calls.last.request)["ssh_key_names"] == ["gpucloud-3f2a"]


def test_a_refused_registration_stands_when_no_key_appeared(api, run, provider):
    keys = api.on("GET", "/api/v1/ssh-keys", reply(200, body("list_ssh_keys_200")))
    api.on("POST", "/api/v1/ssh-keys", reply(400, body("error_invalid_parameters_400")))
    launch, _ = launch_routes(api)
    with pytest.raises(BadRequestError):
        run(provider.create(make_spec(ssh_key_name="gpucloud-3f2a", ssh_public_key=NEW_KEY)))
    assert keys.call_count == 2 and launch.call_count == 0


def test_create_refuses_a_key_name_taken_by_another_key(api, run, provider):
    api.on("GET", "/api/v1/ssh-keys", reply(200, body("list_ssh_keys_200")))
    add = api.on("POST", "/api/v1/ssh-keys", reply(500))
    launch, _ = launch_routes(api)
    with pytest.raises(ConfigurationError, match="yubikey"):
        run(provider.create(make_spec(ssh_key_name="yubikey", ssh_public_key=NEW_KEY)))
    assert add.call_count == 0 and launch.call_count == 0


def test_create_without_any_ssh_key_fails_before_sending(api, run, provider):
    launch, _ = launch_routes(api)
    with pytest.raises(ConfigurationError) as info:
        run(provider.create(make_spec(ssh_key_name=None)))
    assert str(info.value) == "lambda needs an SSH key to launch"
    assert "ssh_key='NAME_OR_PATH'" in info.value.hint and "id_ed25519.pub" in info.value.hint
    assert api.requests == []


def test_create_refuses_a_disk_larger_than_the_fixed_one(api, run, provider):
    launch, _ = launch_routes(api)
    with pytest.raises(SpecError, match="22528"):
        run(provider.create(make_spec(disk_gb=30000)))
    assert api.requests == []
    run(provider.create(make_spec(disk_gb=22528)))
    assert launch.call_count == 1


def test_create_disk_check_falls_back_to_the_catalog(api, run, provider):
    launch_routes(api)
    spec = make_spec(disk_gb=30000)
    spec = spec.model_copy(update={"offer": spec.offer.model_copy(update={"disk_gb": None})})
    with pytest.raises(SpecError):
        run(provider.create(spec))
    assert api.requests == []


def test_create_reports_the_machine_even_if_the_read_back_fails(api, run, provider):
    launch = api.on("POST", "/api/v1/instance-operations/launch",
                    reply(200, body("launch_instance_200")))
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(500, {"error": {
        "code": "global/internal-error", "message": "Something went wrong."}}))
    deadline = datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    instance = run(provider.create(make_spec(shutdown_at=deadline)))
    assert launch.call_count == 1
    assert (instance.id, instance.launch_id, instance.status) == (
        INSTANCE_ID, "lid-7f3a9c", InstanceStatus.PENDING)
    assert instance.price_per_hour == Decimal("23.92")
    assert instance.shutdown_at == deadline


def test_create_whose_reply_names_an_instance_lambda_then_404s_is_not_created(
        api, run, provider):
    """The reply named an id Lambda then has no instance for: not the machine
    (the launcher looks for the launch id instead)."""
    api.on("POST", "/api/v1/instance-operations/launch", reply(200, body("launch_instance_200")))
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}",
           reply(404, body("error_instance_not_found_404")))
    with pytest.raises(APIResponseValidationError, match="does not exist"):
        run(provider.create(make_spec()))


@pytest.mark.parametrize("launched", [{"instance_ids": []}, {}, {"instance_ids": [7]}])
def test_create_rejects_a_malformed_launch_response(api, run, provider, launched):
    launch_routes(api, reply(200, {"data": launched}))
    with pytest.raises(APIResponseValidationError):
        run(provider.create(make_spec()))


def test_launch_500_is_sent_once(api, run, provider):
    launch, get = launch_routes(api, reply(500, {"error": {
        "code": "global/internal-error", "message": "Something went wrong."}}))
    with pytest.raises(InternalServerError) as info:
        run(provider.create(make_spec()))
    assert launch.call_count == 1 and get.call_count == 0
    assert info.value.status_code == 500 and info.value.provider_code == "global/internal-error"


def test_launch_read_timeout_is_sent_once(api, run, provider):
    launch, get = launch_routes(api, httpx.ReadTimeout("timed out"))
    with pytest.raises(APITimeoutError) as info:
        run(provider.create(make_spec()))
    assert info.value.sent is True
    assert launch.call_count == 1 and get.call_count == 0


def test_launch_that_never_left_is_retried(api, run, provider):
    launch, _ = launch_routes(api, httpx.ConnectError("refused"),
                              reply(200, body("launch_instance_200")))
    assert run(provider.create(make_spec())).id == INSTANCE_ID
    assert launch.call_count == 2


def test_launch_is_paced_by_the_launch_limit(api, run, provider, sleeps):
    launch_routes(api)
    run(provider.create(make_spec()))
    run(provider.create(make_spec()))
    # The second launch waits for the 12 s launch slot (less what little time passed).
    assert max(sleeps) > 11


# -- list / get / delete / verify ----------------------------------------------------


def test_list_instances_maps_fields(api, run, provider):
    api.on("GET", "/api/v1/instances", reply(200, body("list_instances_200")))
    [instance] = run(provider.list_instances())
    assert instance == Instance(
        provider="lambda", id=INSTANCE_ID, name="My Instance", status=InstanceStatus.PENDING,
        provider_status="booting", gpu="H100", gpu_count=8, instance_type="gpu_8x_h100_sxm5gdr",
        region="us-west-1", price_per_hour=Decimal("35.92"), ip="198.51.100.2",
        private_ip="10.0.2.100",  # the spec's Instance.private_ip
        created_at=None, shutdown_at=None, launch_id=None,
        connection=Connection(method="ssh", host="198.51.100.2", port=22, user="ubuntu"),
    )


def test_list_reads_launch_id_and_deadline_from_tags(api, run, provider):
    raw = body("list_instances_200")
    raw["data"][0]["tags"] = [{"key": "gpucloud-launch-id", "value": "lid-1"},
                              {"key": "gpucloud-shutdown-at", "value": "2026-12-01T06:30:15Z"}]
    second = copy.deepcopy(raw["data"][0])
    second.update(id="1" * 32, tags=[{"key": "gpucloud-shutdown-at", "value": "tomorrow"}])
    raw["data"].append(second)
    api.on("GET", "/api/v1/instances", reply(200, raw))
    first, other = run(provider.list_instances())
    assert first.launch_id == "lid-1"
    assert first.shutdown_at == datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    assert (other.launch_id, other.shutdown_at) == (None, None)


def test_list_rejects_an_instance_without_id(api, run, provider):
    raw = body("list_instances_200")
    del raw["data"][0]["id"]
    api.on("GET", "/api/v1/instances", reply(200, raw))
    with pytest.raises(APIResponseValidationError):
        run(provider.list_instances())


@pytest.mark.parametrize("raw,status", [
    ("booting", InstanceStatus.PENDING),
    ("active", InstanceStatus.RUNNING),
    ("unhealthy", InstanceStatus.UNKNOWN),
    ("terminating", InstanceStatus.TERMINATING),
    ("terminated", InstanceStatus.TERMINATED),
    ("preempted", InstanceStatus.TERMINATED),
    ("hibernating", InstanceStatus.UNKNOWN),  # not in the spec: must not crash
])
def test_get_maps_every_status(api, run, provider, raw, status):
    route = api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(status=raw)))
    instance = run(provider.get(INSTANCE_ID))
    assert (instance.status, instance.provider_status) == (status, raw)
    assert route.call_count == 1


def test_get_quotes_the_id_into_the_path(api, run, provider):
    route = api.on("GET", "/api/v1/instances/a/b", reply(404, body(
        "error_instance_not_found_404")))
    with pytest.raises(NotFoundError):
        run(provider.get("a/b"))
    assert route.calls.last.request.url.raw_path == b"/api/v1/instances/a%2Fb"


def test_delete_terminates_by_id(api, run, provider):
    route = api.on("POST", "/api/v1/instance-operations/terminate",
                   reply(200, body("terminate_instance_200")))
    assert run(provider.delete(INSTANCE_ID)) is None
    assert json.loads(route.calls.last.request.content) == {"instance_ids": [INSTANCE_ID]}


def test_delete_is_retried_after_a_5xx(api, run, provider):
    route = api.on("POST", "/api/v1/instance-operations/terminate", reply(503, text="busy"),
                   reply(200, body("terminate_instance_200")))
    run(provider.delete(INSTANCE_ID))
    assert route.call_count == 2


def test_delete_of_a_missing_instance(api, run, provider):
    api.on("POST", "/api/v1/instance-operations/terminate",
           reply(404, body("error_instance_not_found_404")))
    with pytest.raises(NotFoundError):
        run(provider.delete(INSTANCE_ID))


def test_verify_reads_ssh_keys(api, run, provider):
    route = api.on("GET", "/api/v1/ssh-keys", reply(200, body("list_ssh_keys_200")))
    assert run(provider.verify()) is None
    assert route.call_count == 1


def test_verify_with_a_bad_key(api, run, provider):
    api.on("GET", "/api/v1/ssh-keys", reply(401, body("error_invalid_api_key_401")))
    with pytest.raises(AuthenticationError):
        run(provider.verify())

