"""Choosing across providers: the cheapest available offer anywhere, and a
refusal on one cloud moving on to the next — Lambda and RunPod answered at the
HTTP transport from their contract fixtures, each request checked against its
provider's OpenAPI spec."""

import json
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import respx

from gpucloud import Client
from tests.openapi_check import validate_request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LAMBDA_SPEC = FIXTURES / "lambda" / "openapi.json"
RUNPOD_SPEC = FIXTURES / "runpod" / "openapi-v2.json"


def fixture(path):
    return json.loads((FIXTURES / path).read_text())


H100 = {"id": "NVIDIA H100 80GB HBM3", "name": "H100 SXM", "pool": "HOPPER_80",
        "manufacturer": "NVIDIA", "memory": 80, "secure": True, "community": False,
        "price": {"secure": 3.5, "community": None}, "maxCount": {"secure": 8, "community": 0},
        "availability": "HIGH", "dataCenters": [{"id": "US-KS-2", "name": "US Kansas 2",
                                                 "availability": "HIGH"}]}


@pytest.fixture
def clouds(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "lambda-key")
    monkeypatch.setenv("GPUCLOUD_RUNPOD_API_KEY", "runpod-key")
    (Path.home() / ".ssh").mkdir()
    (Path.home() / ".ssh" / "id_ed25519.pub").write_text(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ1bm55IGtleSBmb3IgZ3B1Y2xvdWQgdGVzdHMhIQ== me\n")
    sent = []

    def lambda_api(request):
        validate_request(LAMBDA_SPEC, request)
        sent.append(("lambda", request.method, request.url.path))
        path = request.url.path
        if path == "/api/v1/instance-types":
            return httpx.Response(200, json=fixture("lambda/list_instance_types_200.json"))
        if path == "/api/v1/ssh-keys":
            return httpx.Response(200, json=fixture("lambda/list_ssh_keys_200.json")) \
                if request.method == "GET" else httpx.Response(200, json={"data": {
                    "id": "k" * 32, "name": json.loads(request.content)["name"],
                    "public_key": json.loads(request.content)["public_key"]}})
        if path == "/api/v1/instance-operations/launch":
            return httpx.Response(400, json=fixture("lambda/error_quota_exceeded_400.json"))
        raise AssertionError(f"unexpected lambda {request.method} {path}")

    pods = {}  # what RunPod holds: a created pod is read back by its id

    def runpod_api(request):
        validate_request(RUNPOD_SPEC, request)
        sent.append(("runpod", request.method, request.url.path))
        if request.url.path == "/v2/catalog/gpus":
            return httpx.Response(200, json={"gpus": [H100]})
        if request.url.path == "/v2/pods" and request.method == "POST":
            body = json.loads(request.content)
            pod = {**fixture("runpod/v2_create_pod_201_pod.json"), "name": body["name"],
                   "env": body["env"], "gpu": body["gpu"], "cost": 28.0,
                   "dataCenterId": body["dataCenterIds"][0]}
            pods[pod["id"]] = pod
            return httpx.Response(201, json=pod)
        if request.method == "GET" and request.url.path.startswith("/v2/pods/"):
            pod = pods.get(request.url.path.rsplit("/", 1)[1])
            return httpx.Response(200, json=pod) if pod else httpx.Response(
                404, json=fixture("runpod/v2_error_404_notFound.json"))
        raise AssertionError(f"unexpected runpod {request.method} {request.url.path}")

    with respx.mock(assert_all_called=False) as router:
        router.route(host="cloud.lambda.ai").mock(side_effect=lambda_api)
        router.route(host="api.runpod.io").mock(side_effect=runpod_api)
        yield sent


def test_offers_compare_live_prices_across_providers(clouds):
    offers = Client(providers=["lambda", "runpod"], sleep=lambda s: None).offers(
        gpu="h100", count=8)
    live = [o for o in offers if o.available]
    assert [(o.provider, o.price_per_hour) for o in live][:2] == [
        ("lambda", Decimal("23.92")), ("lambda", Decimal("23.92"))]
    assert ("runpod", Decimal("28.0")) in {(o.provider, o.price_per_hour) for o in live}
    assert {o.source for o in offers} == {"live"}


def test_quota_on_the_cheapest_cloud_moves_to_the_next(clouds):
    seen = []
    client = Client(providers=["lambda", "runpod"], sleep=lambda s: None, on_attempt=seen.append)
    machine = client.create(gpu="h100", count=8)
    assert machine.provider == "runpod" and machine.region == "US-KS-2"
    assert [(a.provider, a.outcome, a.error_code) for a in client.last_attempts] == [
        ("lambda", "failed", "quota_exceeded"), ("runpod", "created", None)]
    assert [a.outcome for a in seen] == ["launching", "failed", "launching", "created"]
    launches = [s for s in clouds if s[2] in ("/api/v1/instance-operations/launch", "/v2/pods")]
    assert launches == [("lambda", "POST", "/api/v1/instance-operations/launch"),
                        ("runpod", "POST", "/v2/pods")]  # quota skipped Lambda's other regions
    # The pod the reply named is read back before it counts as created.
    assert clouds[-1] == ("runpod", "GET", f"/v2/pods/{machine.id}")
