"""RunPod adapter (REST v2), contract-tested (error mapping, retries,
Retry-After, the API key's secrecy, and capabilities): respx answers at the
HTTP transport with the spec's example bodies in tests/fixtures/runpod, every
request the adapter sends is validated against the trimmed official OpenAPI
document and must carry the Bearer key, and flows run through the real driver.
Shared helpers and fixtures live in tests/adapters/_runpod_support.py."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from gpucloud.transport.http import DEFAULT_POLICY
from gpucloud.providers.runpod.adapter import RunPodProvider
from gpucloud.errors import (
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    InsufficientCapacityError,
    InternalServerError,
    NotFoundError,
    OfferRefusedError,
    PermissionDeniedError,
    RateLimitError,
)
from tests.adapters._runpod_support import (  # noqa: F401 (fixtures)
    KEY,
    POD,
    POD_ID,
    api,
    body,
    make_spec,
    problem,
    provider,
    reply,
    run,
    sleeps,
)

# -- errors ----------------------------------------------------------------------------


ERRORS = [
    # createPod's table: 400 "try your next candidate", 403 "cannot access the
    # requested pool: skip this candidate" -> per-offer refusals failover skips.
    ("v2_error_400_badRequest", OfferRefusedError),
    ("v2_error_400_no_capacity", InsufficientCapacityError),
    ("v2_error_401_missingBearerToken", AuthenticationError),
    ("v2_error_403_insufficientAccess", OfferRefusedError),
    ("v2_error_404_notFound", NotFoundError),
    ("v2_error_405_methodNotAllowed", APIStatusError),
    ("v2_error_422_validationFailed", BadRequestError),
    ("v2_error_429_rateLimited", RateLimitError),
]


@pytest.mark.parametrize("name,cls", ERRORS)
def test_every_example_error_body_maps_to_its_class(api, run, provider, name, cls):
    error = body(name)
    api.on("POST", "/v2/pods", reply(error["status"], error))
    with pytest.raises(APIStatusError) as info:
        run(provider.create(make_spec()))
    exc = info.value
    assert type(exc) is cls
    assert (exc.status_code, exc.provider_code, exc.provider) == (
        error["status"], error["title"], "runpod")
    assert error["detail"] in str(exc)


@pytest.mark.parametrize("detail", [
    body("v2_error_400_no_capacity")["detail"],
    "There are no instances currently available",
    "create pod: There are no\n  instances currently available",
    "Not enough capacity for 8x NVIDIA H100 80GB HBM3 in US-KS-2",
    "insufficient GPU capacity",
    "This GPU and data center combination could not be placed.",
    "No GPUs available in the requested data center",
])
def test_capacity_400s_are_recognised_by_their_detail(api, run, provider, detail):
    api.on("POST", "/v2/pods", problem(400, "Bad Request", detail))
    with pytest.raises(InsufficientCapacityError):
        run(provider.create(make_spec()))


@pytest.mark.parametrize("status,detail,cls", [
    # A create 400 is "try your next candidate", whatever the detail says: the
    # hint tells the user that the same refusal everywhere means a bad request.
    (400, "gpu and cpu are mutually exclusive", OfferRefusedError),
    (400, "persistent mount capacity must be at least 10 GB", OfferRefusedError),
    (400, "allowedCudaVersions and minCudaVersion are mutually exclusive", OfferRefusedError),
    # Capacity words outside a 400 keep the status's meaning: a 5xx on a
    # launch stays ambiguous and is reconciled, never taken as "nothing made".
    (500, "There are no instances currently available", InternalServerError),
    (403, "no longer any instances available in this pool", OfferRefusedError),
    (422, "$.gpu.count: must be at least 1", BadRequestError),
])
def test_other_details_keep_their_status_class(api, run, provider, status, detail, cls):
    api.on("POST", "/v2/pods", problem(status, "Error", detail))
    with pytest.raises(APIStatusError) as info:
        run(provider.create(make_spec()))
    assert type(info.value) is cls


def test_non_json_502_maps_by_status_and_reads_are_retried(api, run, provider):
    route = api.on("GET", POD, reply(502, text="<html><body>502 Bad Gateway</body></html>",
                                     headers={"content-type": "text/html"}))
    with pytest.raises(InternalServerError) as info:
        run(provider.get(POD_ID))
    assert info.value.status_code == 502 and info.value.provider_code is None
    assert "Bad Gateway" in str(info.value)
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


def test_create_refusals_say_what_to_do(api, run, provider):
    api.on("POST", "/v2/pods", reply(400, body("v2_error_400_badRequest")))
    with pytest.raises(OfferRefusedError) as info:
        run(provider.create(make_spec()))
    assert "request itself" in info.value.hint
    api.on("POST", "/v2/pods", reply(403, body("v2_error_403_insufficientAccess")))
    with pytest.raises(OfferRefusedError) as info:
        run(provider.create(make_spec()))
    assert "pool" in info.value.hint


def test_a_403_outside_create_is_a_permission_error(api, run, provider):
    api.on("GET", "/v2/pods", reply(403, body("v2_error_403_insufficientAccess")))
    with pytest.raises(PermissionDeniedError):
        run(provider.list_instances())


def test_non_json_400_is_a_bad_request(api, run, provider):
    api.on("POST", "/v2/pods", reply(400, text="nope"))
    with pytest.raises(BadRequestError):
        run(provider.create(make_spec()))


def test_429_waits_for_retry_after(api, run, provider, sleeps):
    route = api.on("GET", "/v2/pods", reply(429, body("v2_error_429_rateLimited"), headers={
        "Retry-After": "12", "RateLimit": '"minute";r=0;t=12',
        "RateLimit-Policy": '"minute";q=60;w=60'}), reply(200, body("v2_list_pods_200_pods")))
    assert len(run(provider.list_instances())) == 1
    assert route.call_count == 2 and sleeps == [12.0]


def test_429_exhausted_is_a_rate_limit_error(api, run, provider):
    route = api.on("GET", "/v2/pods", reply(429, body("v2_error_429_rateLimited"),
                                            headers={"Retry-After": "2"}))
    with pytest.raises(RateLimitError) as info:
        run(provider.list_instances())
    assert info.value.retry_after == 2.0
    assert "minute window" in str(info.value)
    assert route.call_count == DEFAULT_POLICY.max_retries + 1


@pytest.mark.parametrize("response", [
    reply(401, body("v2_error_401_missingBearerToken")),
    problem(400, f"Bad {KEY}", f"invalid key {KEY}", errors=[f"$.env: {KEY}"]),
    problem(400, "Bad Request", f"no longer any instances available for {KEY}"),
    reply(500, text=f"trace: Authorization: Bearer {KEY}"),
    reply(200, {"nope": KEY}),
    httpx.ReadTimeout("timed out"),
])
def test_the_api_key_never_appears_in_errors(api, run, provider, response):
    api.on("POST", "/v2/pods", response)
    with pytest.raises(Exception) as info:
        run(provider.create(make_spec()))
    exc = info.value
    visible = " ".join([str(exc), repr(exc), str(getattr(exc, "hint", "")), repr(exc.args),
                        str(getattr(exc, "provider_code", "")), repr(vars(exc).get("request"))])
    assert KEY not in visible
    assert KEY not in repr(provider) and KEY not in repr(provider.credential)


def test_requests_carry_the_bearer_key(api, run, provider):
    route = api.on("GET", "/v2/pods", reply(200, body("v2_list_pods_200_pods")))
    run(provider.list_instances())
    request = route.calls.last.request
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.headers["Accept"] == "application/json"
    assert request.url.host == "api.runpod.io" and request.url.path.startswith("/v2/")


def test_capabilities():
    caps = RunPodProvider.capabilities
    assert (caps.spot, caps.stop_start, caps.custom_disk, caps.needs_ssh_key,
            caps.native_shutdown) == (False, True, True, False, False)
    assert RunPodProvider.name == "runpod" and RunPodProvider.rate_limits == {}


@pytest.mark.parametrize("refusal", ["v2_error_403_insufficientAccess", "v2_error_400_badRequest"])
def test_a_refused_candidate_fails_over_to_the_next(monkeypatch, refusal):
    """Through Client: the refused data center is skipped, the next one launched."""
    from gpucloud import Client

    monkeypatch.setenv("GPUCLOUD_RUNPOD_API_KEY", KEY)
    gpu = {"id": "NVIDIA H100 80GB HBM3", "name": "H100 SXM", "pool": "HOPPER_80",
           "manufacturer": "NVIDIA", "memory": 80, "secure": True, "community": False,
           "price": {"secure": 3.5, "community": None}, "maxCount": {"secure": 8, "community": 0},
           "availability": "HIGH", "dataCenters": [
               {"id": "US-KS-2", "name": "US Kansas 2", "availability": "HIGH"},
               {"id": "EU-RO-1", "name": "EU Romania 1", "availability": "LOW"}]}
    created = []

    def api(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v2/catalog/gpus":
            return httpx.Response(200, json={"gpus": [gpu]})
        if request.method == "GET":  # the new pod, read back by its id
            pod = created[-1]
            assert request.url.path == f"/v2/pods/{pod['id']}"
            return httpx.Response(200, json=pod)
        sent = json.loads(request.content)
        if not created:
            created.append(None)
            error = body(refusal)
            return httpx.Response(error["status"], json=error)
        pod = {**body("v2_create_pod_201_pod"), "name": sent["name"], "env": sent["env"],
               "gpu": sent["gpu"], "dataCenterId": sent["dataCenterIds"][0]}
        created.append(pod)
        return httpx.Response(201, json=pod)

    with respx.mock(assert_all_called=False) as router:
        router.route(host="api.runpod.io").mock(side_effect=api)
        client = Client(providers=["runpod"], sleep=lambda s: None)
        machine = client.create(gpu="h100", count=8, image="runpod/pytorch:2.4")
    # Same price: EU-RO-1 sorts first, is refused, and US-KS-2 is launched.
    assert [(a.region, a.outcome, a.error_code) for a in client.last_attempts] == [
        ("EU-RO-1", "failed", "offer_refused"), ("US-KS-2", "created", None)]
    assert machine.provider == "runpod" and len(created) == 2


H100 = {"id": "NVIDIA H100 80GB HBM3", "name": "H100 SXM", "pool": "HOPPER_80",
        "manufacturer": "NVIDIA", "memory": 80, "secure": True, "community": False,
        "price": {"secure": 3.5, "community": None}, "maxCount": {"secure": 8, "community": 0},
        "availability": "HIGH", "dataCenters": [
            {"id": "US-KS-2", "name": "US Kansas 2", "availability": "HIGH"}]}


def lying_runpod(reply_id: str, keep: bool = True):
    """A RunPod that creates pod 953f3b4034 and answers the create with another id
    (a proxy's page parsed into {"id": ...}); `keep`: whether the pod exists."""
    pods: list[dict] = []

    def api(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v2/catalog/gpus":
            return httpx.Response(200, json={"gpus": [H100]})
        if request.method == "POST" and path == "/v2/pods":
            sent = json.loads(request.content)
            pod = {**body("v2_create_pod_201_pod"), "id": "953f3b4034", "name": sent["name"],
                   "env": sent["env"], "gpu": sent["gpu"], "dataCenterId": "US-KS-2"}
            if keep:
                pods.append(pod)
            return httpx.Response(201, json={**pod, "id": reply_id})
        if request.method == "GET" and path == "/v2/pods":
            return httpx.Response(200, json={"pods": pods})
        found = [p for p in pods if path == f"/v2/pods/{p['id']}"]
        if request.method == "GET" and found:
            return httpx.Response(200, json=found[0])
        return httpx.Response(404, json=body("v2_error_404_notFound"))
    return api


def test_a_create_reply_with_an_id_of_the_wrong_form_is_found_by_launch_id(monkeypatch):
    from gpucloud import Client
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import Journal

    monkeypatch.setenv("GPUCLOUD_RUNPOD_API_KEY", KEY)
    with respx.mock(assert_all_called=False) as router:
        router.route(host="api.runpod.io").mock(side_effect=lying_runpod("<html>"))
        client = Client(providers=["runpod"], sleep=lambda s: None)
        machine = client.create(gpu="h100", count=8, image="runpod/pytorch:2.4")
    assert machine.id == "953f3b4034"  # the pod that exists, not the reply's "<html>"
    assert [a.outcome for a in client.last_attempts] == ["adopted"]
    record = Journal(state_db_path()).get(client.last_attempts[0].launch_id)
    assert record is not None and (record.status, record.instance_id) == (
        "delivered", "953f3b4034")


def test_a_create_reply_naming_no_machine_keeps_the_launch_id(monkeypatch):
    from gpucloud import APIResponseValidationError, Client

    monkeypatch.setenv("GPUCLOUD_RUNPOD_API_KEY", KEY)
    with respx.mock(assert_all_called=False) as router:
        # An id of the wrong form, and no pod carries the launch id.
        router.route(host="api.runpod.io").mock(side_effect=lying_runpod("<html>", False))
        client = Client(providers=["runpod"], sleep=lambda s: None)
        with pytest.raises(APIResponseValidationError) as caught:
            client.create(gpu="h100", count=8, image="runpod/pytorch:2.4")
    assert caught.value.launch_id is not None and caught.value.launch_id.startswith("gc-")
    assert caught.value.launch_id in (caught.value.hint or "")


def test_a_well_formed_id_the_provider_then_404s_is_not_the_machine(monkeypatch):
    """The reply's id has RunPod's form but no pod has it (GET by id: 404): the
    pod that carries the launch id is adopted, never the reply's id."""
    from gpucloud import Client

    monkeypatch.setenv("GPUCLOUD_RUNPOD_API_KEY", KEY)
    with respx.mock(assert_all_called=False) as router:
        route = router.route(host="api.runpod.io").mock(
            side_effect=lying_runpod("aaaaaaaaaa"))
        client = Client(providers=["runpod"], sleep=lambda s: None)
        machine = client.create(gpu="h100", count=8, image="runpod/pytorch:2.4")
    assert machine.id == "953f3b4034"
    assert [a.outcome for a in client.last_attempts] == ["adopted"]
    sent = [(c.request.method, c.request.url.path) for c in route.calls]
    assert ("GET", "/v2/pods/aaaaaaaaaa") in sent and sent.count(("POST", "/v2/pods")) == 1


def test_a_well_formed_id_naming_no_pod_and_no_launch_found_is_never_created(monkeypatch):
    from gpucloud import APIResponseValidationError, Client
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import Journal

    monkeypatch.setenv("GPUCLOUD_RUNPOD_API_KEY", KEY)
    seen = []
    with respx.mock(assert_all_called=False) as router:
        router.route(host="api.runpod.io").mock(side_effect=lying_runpod("aaaaaaaaaa", False))
        client = Client(providers=["runpod"], sleep=lambda s: None, on_attempt=seen.append)
        with pytest.raises(APIResponseValidationError) as caught:
            client.create(gpu="h100", count=8, image="runpod/pytorch:2.4")
    launch_id = caught.value.launch_id
    assert launch_id is not None and launch_id in (caught.value.hint or "")
    assert "created" not in [a.outcome for a in seen]
    record = Journal(state_db_path()).get(launch_id)
    assert record is not None and record.status == "ambiguous"  # reconcile settles it


def test_a_pod_read_back_with_another_launch_id_is_not_adopted(monkeypatch):
    """The replied id names a pod that exists but carries another launch (someone
    else's machine): it is not taken; the pod with this launch id is."""
    from gpucloud import Client

    other = {**body("v2_create_pod_201_pod"), "id": "bbbbbbbbbb", "name": "theirs",
             "env": {"GPUCLOUD_LAUNCH_ID": "gc-0123456789"}}
    inner = lying_runpod("bbbbbbbbbb")

    def api(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/v2/pods/bbbbbbbbbb":
            return httpx.Response(200, json=other)
        return inner(request)

    monkeypatch.setenv("GPUCLOUD_RUNPOD_API_KEY", KEY)
    with respx.mock(assert_all_called=False) as router:
        router.route(host="api.runpod.io").mock(side_effect=api)
        client = Client(providers=["runpod"], sleep=lambda s: None)
        machine = client.create(gpu="h100", count=8, image="runpod/pytorch:2.4")
    assert machine.id == "953f3b4034"
    assert [a.outcome for a in client.last_attempts] == ["adopted"]
