"""RunPod adapter (REST v2), contract-tested (create, list, get, delete, stop,
start, verify): respx answers at the HTTP transport with the spec's example
bodies in tests/fixtures/runpod, every request the adapter sends is validated
against the trimmed official OpenAPI document and must carry the Bearer key,
and flows run through the real driver (retries, Retry-After, auth). Shared
helpers and fixtures live in tests/adapters/_runpod_support.py."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from decimal import Decimal

import httpx
import pytest

from gpucloud.errors import (
    APIResponseValidationError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    QuotaExceededError,
    SpecError,
)
from gpucloud.models import Connection, Instance, InstanceStatus
from tests.adapters._runpod_support import (  # noqa: F401 (fixtures)
    A100,
    POD,
    POD_ID,
    PUBLIC_KEY,
    api,
    body,
    echo_pod,
    make_spec,
    pod_body,
    problem,
    provider,
    reply,
    run,
    sent_json,
    sleeps,
)

# -- create ----------------------------------------------------------------------------


def test_create_sends_exactly_the_spec_body(api, run, provider):
    route = api.on("POST", "/v2/pods", echo_pod)
    deadline = datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    instance = run(provider.create(make_spec(disk_gb=80, ssh_public_key=PUBLIC_KEY + "\n",
                                             shutdown_at=deadline)))
    assert route.call_count == 1
    assert sent_json(route.calls.last.request) == {
        "name": "gpucloud-gc-7f3a9c01",
        "image": "runpod/pytorch:2.4",
        "gpu": {"id": A100, "count": 2},
        "cloud": "SECURE",
        "dataCenterIds": ["US-KS-2"],
        "ports": ["22/tcp"],
        "env": {"GPUCLOUD_LAUNCH_ID": "gc-7f3a9c01",
                "GPUCLOUD_SHUTDOWN_AT": "2026-12-01T06:30:15Z", "PUBLIC_KEY": PUBLIC_KEY},
        "disk": 80,
    }
    assert instance == Instance(
        provider="runpod", id=POD_ID, name="gpucloud-gc-7f3a9c01", status=InstanceStatus.PENDING,
        provider_status="PROVISIONING", gpu="A100-80GB", gpu_count=2,
        instance_type=f"2x {A100}", region="US-KS-2", price_per_hour=Decimal("0.44"), ip=None,
        created_at=datetime(2026, 6, 1, 12, tzinfo=timezone.utc), shutdown_at=deadline,
        launch_id="gc-7f3a9c01")
    # One request: the 201 carries the pod, no read-back.
    assert [r.url.path for r in api.requests] == ["/v2/pods"]


def test_create_minimal_uses_catalog_image_and_account_keys(api, run, provider):
    route = api.on("POST", "/v2/pods", echo_pod)
    run(provider.create(make_spec(image=None)))
    sent = sent_json(route.calls.last.request)
    assert sent["image"] == provider.catalog.default_image
    assert sent["env"] == {"GPUCLOUD_LAUNCH_ID": "gc-7f3a9c01"}
    assert "disk" not in sent
    # Without a key of ours, RunPod injects the account's registered keys.
    assert sent["startSsh"] is True


def test_create_never_rewrites_the_account_keys(api, run, provider):
    api.on("POST", "/v2/pods", echo_pod)
    run(provider.create(make_spec(ssh_public_key=PUBLIC_KEY, ssh_key_name="gpucloud-abc")))
    assert [(r.method, r.url.path) for r in api.requests] == [("POST", "/v2/pods")]
    assert "startSsh" not in sent_json(api.requests[0])


def test_create_community_type(api, run, provider):
    route = api.on("POST", "/v2/pods", echo_pod)
    instance = run(provider.create(make_spec(f"4x {A100} (community)", "CA-MTL-1", 4)))
    sent = sent_json(route.calls.last.request)
    assert (sent["cloud"], sent["gpu"], sent["dataCenterIds"]) == (
        "COMMUNITY", {"id": A100, "count": 4}, ["CA-MTL-1"])
    assert instance.instance_type == f"4x {A100} (community)"


@pytest.mark.parametrize("itype,count", [
    ("gpu_8x_h100_sxm5", 8), (f"2x {A100}", 4), (A100, 1), ("2x", 2)])
def test_create_refuses_a_foreign_instance_type(api, run, provider, itype, count):
    route = api.on("POST", "/v2/pods", echo_pod)
    with pytest.raises(SpecError, match="RunPod instance type"):
        run(provider.create(make_spec(itype, count=count)))
    assert route.call_count == 0


def test_created_pod_read_back_that_fails_is_still_created(api, run, provider):
    pod = body("v2_create_pod_201_pod")
    del pod["status"]
    api.on("POST", "/v2/pods", reply(201, pod))
    instance = run(provider.create(make_spec()))
    assert (instance.id, instance.launch_id, instance.status) == (
        POD_ID, "gc-7f3a9c01", InstanceStatus.PENDING)
    assert instance.price_per_hour == Decimal("2.78")


@pytest.mark.parametrize("payload", [{"name": "x"}, [], {"id": 7}])
def test_create_without_a_pod_id_is_invalid(api, run, provider, payload):
    api.on("POST", "/v2/pods", reply(201, payload))
    with pytest.raises(APIResponseValidationError):
        run(provider.create(make_spec()))


def test_launch_500_is_sent_exactly_once(api, run, provider):
    route = api.on("POST", "/v2/pods", problem(500, "Internal Server Error", "upstream failed"))
    with pytest.raises(InternalServerError) as info:
        run(provider.create(make_spec()))
    assert route.call_count == 1
    assert info.value.status_code == 500 and info.value.provider_code == "Internal Server Error"


def test_launch_read_timeout_is_sent_exactly_once(api, run, provider):
    route = api.on("POST", "/v2/pods", httpx.ReadTimeout("timed out"))
    with pytest.raises(APITimeoutError) as info:
        run(provider.create(make_spec()))
    assert info.value.sent is True and route.call_count == 1


def test_launch_that_never_left_is_retried(api, run, provider):
    route = api.on("POST", "/v2/pods", httpx.ConnectError("refused"), echo_pod)
    assert run(provider.create(make_spec())).id == POD_ID
    assert route.call_count == 2


def test_launch_429_is_retried_after_retry_after(api, run, provider, sleeps):
    route = api.on("POST", "/v2/pods", reply(429, body("v2_error_429_rateLimited"),
                                             headers={"Retry-After": "12"}), echo_pod)
    run(provider.create(make_spec()))
    assert route.call_count == 2 and sleeps == [12.0]


def test_capacity_400_on_launch(api, run, provider):
    route = api.on("POST", "/v2/pods", reply(400, body("v2_error_400_no_capacity")))
    with pytest.raises(InsufficientCapacityError) as info:
        run(provider.create(make_spec()))
    assert route.call_count == 1
    assert "no longer any instances available" in str(info.value)
    assert info.value.provider_code == "Bad Request" and info.value.status_code == 400
    assert "data center" in info.value.hint


def test_insufficient_balance_402_skips_runpod_with_a_hint(api, run, provider):
    api.on("POST", "/v2/pods", problem(402, "Payment Required", "insufficient balance"))
    with pytest.raises(QuotaExceededError) as info:  # failover moves to another provider
        run(provider.create(make_spec()))
    assert info.value.status_code == 402 and "balance" in info.value.hint


def test_validation_422_lists_the_errors(api, run, provider):
    api.on("POST", "/v2/pods", problem(422, "Unprocessable Entity", "Request validation failed.",
                                       errors=["$: additional properties 'bogus' not allowed",
                                               "$.gpu.count: minimum 1"]))
    with pytest.raises(BadRequestError) as info:
        run(provider.create(make_spec()))
    assert str(info.value) == (
        "runpod: Request validation failed.: $: additional properties 'bogus' not allowed; "
        "$.gpu.count: minimum 1 (HTTP 422, Unprocessable Entity)")


# -- list / get / delete / stop / start / verify -------------------------------------------


def test_list_instances_maps_fields(api, run, provider):
    route = api.on("GET", "/v2/pods", reply(200, body("v2_list_pods_200_pods")))
    [instance] = run(provider.list_instances())
    assert instance == Instance(
        provider="runpod", id=POD_ID, name="pytorch-training", status=InstanceStatus.RUNNING,
        provider_status="RUNNING", gpu="RTX4090", gpu_count=1,
        instance_type="1x NVIDIA GeForce RTX 4090", region="US-KS-2",
        price_per_hour=Decimal("0.44"), ip="195.26.233.3",
        created_at=datetime(2026, 6, 1, 12, tzinfo=timezone.utc), shutdown_at=None,
        launch_id=None,
        connection=Connection(method="ssh", host="195.26.233.3", port=34446, user="root"))
    # A cluster's member pods too (left out by default): billed machines the reaper ends.
    assert route.calls.last.request.url.query == b"includeClusterPods=true"


def test_list_reads_launch_id_and_deadline_from_env(api, run, provider):
    raw = body("v2_list_pods_200_pods")
    first = raw["pods"][0]
    first["env"] = {"GPUCLOUD_LAUNCH_ID": "gc-1", "GPUCLOUD_SHUTDOWN_AT": "2026-12-01T06:30:15Z"}
    second = copy.deepcopy(first)
    second.update(id="p2", cloud="COMMUNITY", env={"GPUCLOUD_SHUTDOWN_AT": "tomorrow"})
    raw["pods"].append(second)
    api.on("GET", "/v2/pods", reply(200, raw))
    one, two = run(provider.list_instances())
    assert one.launch_id == "gc-1"
    assert one.shutdown_at == datetime(2026, 12, 1, 6, 30, 15, tzinfo=timezone.utc)
    assert (two.launch_id, two.shutdown_at) == (None, None)
    assert two.instance_type == "1x NVIDIA GeForce RTX 4090 (community)"


@pytest.mark.parametrize("mutate", [
    lambda d: d["pods"][0].pop("id"),
    lambda d: d["pods"][0].update(status=None),
    lambda d: d.update(pods=None),
    lambda d: d["pods"].append("pod"),
])
def test_list_rejects_malformed_pods(api, run, provider, mutate):
    raw = body("v2_list_pods_200_pods")
    mutate(raw)
    api.on("GET", "/v2/pods", reply(200, raw))
    with pytest.raises(APIResponseValidationError):
        run(provider.list_instances())


@pytest.mark.parametrize("raw,status", [
    ("PROVISIONING", InstanceStatus.PENDING),
    ("STARTING", InstanceStatus.PENDING),
    ("RUNNING", InstanceStatus.RUNNING),
    ("EXITED", InstanceStatus.STOPPED),
    ("ERROR", InstanceStatus.FAILED),
    ("TERMINATED", InstanceStatus.TERMINATED),
    ("MIGRATING", InstanceStatus.UNKNOWN),  # not in the spec: must not crash
])
def test_get_maps_every_status(api, run, provider, raw, status):
    route = api.on("GET", POD, reply(200, pod_body(status=raw)))
    instance = run(provider.get(POD_ID))
    assert (instance.status, instance.provider_status) == (status, raw)
    assert route.call_count == 1


def test_ip_falls_back_to_direct_ssh_then_none(api, run, provider):
    stopped = pod_body(status="EXITED", runtime=None, cost=0.0)
    api.on("GET", POD, reply(200, stopped))
    instance = run(provider.get(POD_ID))
    assert instance.ip == "195.26.233.3"  # ssh.direct.host
    assert instance.price_per_hour == Decimal("0.0")
    provisioning = pod_body(runtime={}, ssh={"proxy": None, "direct": None})
    api.on("GET", POD, reply(200, provisioning))
    assert run(provider.get(POD_ID)).ip is None


def test_get_quotes_the_id_into_the_path(api, run, provider):
    route = api.on("GET", "/v2/pods/a/b", reply(404, body("v2_error_404_notFound")))
    with pytest.raises(NotFoundError):
        run(provider.get("a/b"))
    assert route.calls.last.request.url.raw_path == b"/v2/pods/a%2Fb"


def test_delete_terminates_with_204(api, run, provider):
    route = api.on("DELETE", POD, reply(204))
    assert run(provider.delete(POD_ID)) is None
    assert route.call_count == 1 and route.calls.last.request.content == b""


def test_delete_is_retried_after_a_5xx(api, run, provider):
    route = api.on("DELETE", POD, reply(503, text="busy"), reply(204))
    run(provider.delete(POD_ID))
    assert route.call_count == 2


@pytest.mark.parametrize("status,payload,cls", [
    (404, body("v2_error_404_notFound"), NotFoundError),
    (409, {"title": "Conflict", "status": 409,
           "detail": "pod belongs to a cluster"}, ConflictError),
])
def test_delete_errors(api, run, provider, status, payload, cls):
    api.on("DELETE", POD, reply(status, payload))
    with pytest.raises(cls):
        run(provider.delete(POD_ID))


@pytest.mark.parametrize("action,answer,status", [
    ("stop", pod_body(status="EXITED", runtime=None, cost=0.0), InstanceStatus.STOPPED),
    ("start", body("v2_pod_action_200_pod"), InstanceStatus.RUNNING),
])
def test_stop_and_start_post_the_action(api, run, provider, action, answer, status):
    route = api.on("POST", f"{POD}/action", reply(200, answer))
    flow = provider.stop(POD_ID) if action == "stop" else provider.start(POD_ID)
    instance = run(flow)
    assert sent_json(route.calls.last.request) == {"action": action}
    assert instance.id == POD_ID and instance.status is status
    assert route.call_count == 1


@pytest.mark.parametrize("action,current,ok", [
    ("stop", "EXITED", True), ("stop", "RUNNING", False),
    ("start", "RUNNING", True), ("start", "EXITED", False),
])
def test_action_409_is_success_only_when_already_done(api, run, provider, action, current, ok):
    api.on("POST", f"{POD}/action", problem(409, "Conflict", "action not valid for status"))
    get = api.on("GET", POD, reply(200, pod_body(status=current)))
    flow = provider.stop(POD_ID) if action == "stop" else provider.start(POD_ID)
    if ok:
        assert run(flow).provider_status == current
    else:
        with pytest.raises(ConflictError, match="action not valid"):
            run(flow)
    assert get.call_count == 1


def test_verify_reads_pods(api, run, provider):
    route = api.on("GET", "/v2/pods", reply(200, body("v2_list_pods_200_pods")))
    assert run(provider.verify()) is None
    assert route.call_count == 1


def test_verify_with_a_bad_key(api, run, provider):
    api.on("GET", "/v2/pods", reply(401, body("v2_error_401_missingBearerToken")))
    with pytest.raises(AuthenticationError) as info:
        run(provider.verify())
    assert "missing bearer token" in str(info.value)

