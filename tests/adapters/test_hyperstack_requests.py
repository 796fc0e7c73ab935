"""Hyperstack adapter: the exact requests it sends (golden), and how it reads
the replies. respx answers at the HTTP transport with the CONSTRUCTED bodies
of tests/fixtures/hyperstack (SOURCE.txt); every request is validated
against the trimmed Infrahub OpenAPI document and flows run through the real
driver (gpucloud.transport.http.Session)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import respx
from pydantic import SecretStr

from gpucloud.catalog.bundled import load_catalogs
from gpucloud.config.credentials import Credential
from gpucloud.errors import (
    APIResponseValidationError, ConfigurationError, InsufficientCapacityError,
    QuotaExceededError, SpecError,
)
from gpucloud.models import InstanceSpec, InstanceStatus, Offer
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.hyperstack import HyperstackProvider
from gpucloud.transport.http import Session
from tests.openapi_check import validate_request

DIR = Path(__file__).resolve().parents[1] / "fixtures" / "hyperstack"
SPEC = DIR / "openapi.yaml"
BASE = "https://infrahub-api.nexgencloud.com/v1"
KEY = "hs-SECRET-key-0f3c9a"
PUBKEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T "
          "me@laptop")
VM = "/v1/core/virtual-machines/4711"


def body(name):
    return json.loads((DIR / name).read_text())


class Fake:
    """Routes by (method, path); records every request after checking it."""

    def __init__(self, routes):
        self.routes = routes
        self.sent: list[httpx.Request] = []

    def __call__(self, request):
        validate_request(SPEC, request)
        assert request.headers["api_key"] == KEY and "Authorization" not in request.headers
        self.sent.append(request)
        answer = self.routes[(request.method, request.url.path)]
        answer = answer(request) if callable(answer) else answer
        status, payload = answer if isinstance(answer, tuple) else (200, answer)
        return httpx.Response(status, json=payload)

    def bodies(self, method, path):
        return [json.loads(r.content) for r in self.sent
                if r.method == method and r.url.path == path]


def run(flow_of, routes):
    provider = HyperstackProvider(load_catalogs()["hyperstack"],
                                  Credential("hyperstack", SecretStr(KEY), "test"))
    fake = Fake(routes)
    with respx.mock(assert_all_mocked=True) as router:
        router.route(host="infrahub-api.nexgencloud.com").mock(side_effect=fake)
        session = Session(provider, sleep=lambda s: None)
        try:
            return session.run(flow_of(provider)), fake
        finally:
            session.close()


def spec(**changes):
    offer = Offer(provider="hyperstack", instance_type="n3-H100x1", region="CANADA-1",
                  gpu="H100", gpu_count=1, price_per_hour=Decimal("1.9"), source="live")
    fields = {"offer": offer, "launch_id": "gc-0123456789", "name": "train",
              "ssh_public_key": PUBKEY,
              "shutdown_at": datetime(2026, 12, 1, 18, 0, tzinfo=timezone.utc)}
    return InstanceSpec(**{**fields, **changes})


CREATE_ROUTES = {
    ("GET", "/v1/core/environments"): {**body("list_environments_200.json"), "environments": []},
    ("POST", "/v1/core/environments"): {
        "status": True, "message": "Environment created",
        "environment": body("list_environments_200.json")["environments"][0]},
    ("GET", "/v1/core/keypairs"): body("list_keypairs_200.json"),
    ("POST", "/v1/core/keypairs"): body("import_keypair_200.json"),
    ("POST", "/v1/core/virtual-machines"): body("create_vms_200.json"),
    ("GET", VM): body("get_vm_200.json"),
}


def test_create_sends_one_machine_with_its_labels_into_a_new_environment_and_key():
    machine, fake = run(lambda p: p.create(spec(batch="sweep-1")), CREATE_ROUTES)
    assert fake.bodies("POST", "/v1/core/environments") == [
        {"name": "gpucloud-CANADA-1", "region": "CANADA-1"}]
    [key] = fake.bodies("POST", "/v1/core/keypairs")
    assert key["environment_name"] == "gpucloud-CANADA-1" and key["public_key"] == PUBKEY
    assert key["name"].startswith("gpucloud-") and len(key["name"]) <= 50
    assert fake.bodies("POST", "/v1/core/virtual-machines") == [{
        "name": "train", "environment_name": "gpucloud-CANADA-1", "flavor_name": "n3-H100x1",
        "key_name": "gpucloud-key", "count": 1,
        "labels": ["gpucloud-launch-id=gc-0123456789", "gpucloud-batch=sweep-1",
                   "gpucloud-shutdown-at=2026-12-01T18:00:00Z"],
        "assign_floating_ip": True, "enable_port_randomization": False}]
    # The environment search names it; the machine is read back by its id.
    [search] = [r for r in fake.sent if r.url.path == "/v1/core/environments"
                and r.method == "GET"]
    assert search.url.params["search"] == "gpucloud-CANADA-1"
    assert machine.id == "4711" and machine.launch_id == "gc-0123456789"
    assert machine.status is InstanceStatus.RUNNING


def test_create_reuses_the_environment_and_a_key_pair_with_the_same_key():
    key = body("import_keypair_200.json")["keypair"] | {"name": "laptop", "public_key": PUBKEY}
    routes = {**CREATE_ROUTES,
              ("GET", "/v1/core/environments"): body("list_environments_200.json"),
              ("GET", "/v1/core/keypairs"): body("list_keypairs_200.json") | {"keypairs": [key]}}
    _, fake = run(lambda p: p.create(spec(ssh_key_name="laptop", image="Ubuntu 22.04")), routes)
    assert not fake.bodies("POST", "/v1/core/environments")
    assert not fake.bodies("POST", "/v1/core/keypairs")
    [launch] = fake.bodies("POST", "/v1/core/virtual-machines")
    assert launch["key_name"] == "laptop" and launch["image_name"] == "Ubuntu 22.04"


def test_a_key_pair_of_that_name_with_another_key_is_refused_before_launching():
    other = body("import_keypair_200.json")["keypair"] | {
        "name": "laptop", "public_key": "ssh-ed25519 AAAAotherkey other"}
    routes = {**CREATE_ROUTES,
              ("GET", "/v1/core/environments"): body("list_environments_200.json"),
              ("GET", "/v1/core/keypairs"): body("list_keypairs_200.json") | {"keypairs": [other]}}
    with pytest.raises(ConfigurationError, match="different public key"):
        run(lambda p: p.create(spec(ssh_key_name="laptop")), routes)


def test_create_without_a_key_or_with_a_disk_size_sends_nothing():
    for bad, error in ((spec(ssh_public_key=None), ConfigurationError),
                       (spec(disk_gb=500), SpecError)):
        with pytest.raises(error):
            run(lambda p, s=bad: p.create(s), {})


def test_offers_price_from_the_catalog_and_availability_from_stock():
    offers, fake = run(lambda p: p.offers(OfferQuery(region="CANADA-1")), {
        ("GET", "/v1/core/flavors"): body("list_flavors_200.json"),
        ("GET", "/v1/core/stocks"): body("get_stocks_200.json")})
    [flavors] = [r for r in fake.sent if r.url.path == "/v1/core/flavors"]
    assert flavors.url.params["region"] == "CANADA-1"
    by_name = {o.instance_type: o for o in offers}
    assert set(by_name) == {"n3-H100x1", "n3-H100x8", "n3-A100x8-NVLink"}  # no CPU flavor
    one = by_name["n3-H100x1"]
    assert (one.gpu, one.gpu_count, one.price_per_hour, one.available) == (
        "H100", 1, Decimal("1.9"), True)
    assert (one.vcpus, one.memory_gb, one.disk_gb, one.source) == (28, 180, 100, "live")
    assert by_name["n3-H100x8"].available is False  # stocks: 0 of 8x free
    nvlink = by_name["n3-A100x8-NVLink"]
    assert nvlink.gpu == "A100-80GB" and nvlink.available is True
    assert nvlink.price_per_hour == Decimal("11.2")


def test_a_flavor_the_catalog_does_not_price_is_offered_at_an_unknown_price():
    flavors = body("list_flavors_200.json")
    flavors["data"][0]["flavors"][0]["name"] = "n3-H100x1-new"
    offers, _ = run(lambda p: p.offers(OfferQuery(gpu="H100", count=1)), {
        ("GET", "/v1/core/flavors"): flavors,
        ("GET", "/v1/core/stocks"): body("get_stocks_200.json")})
    assert [(o.instance_type, o.price_per_hour) for o in offers] == [("n3-H100x1-new", 0)]


def test_list_pages_until_a_short_page():
    template = body("get_vm_200.json")["instance"]
    full = [template | {"id": 1000 + i, "labels": []} for i in range(100)]

    def page(request):
        number = int(request.url.params["page"])
        assert request.url.params["pageSize"] == "100"
        items = full if number == 1 else [template]
        return {"status": True, "message": "ok", "count": 101, "page": number,
                "page_size": 100, "instances": items}
    machines, fake = run(lambda p: p.list_instances(), {("GET", "/v1/core/virtual-machines"): page})
    assert [r.url.params["page"] for r in fake.sent] == ["1", "2"]
    assert len(machines) == 101 and machines[-1].launch_id == "gc-0123456789"


def test_get_reads_connection_deadline_and_creation_time():
    raw = body("get_vm_200.json")
    raw["instance"]["labels"].append("gpucloud-shutdown-at=2026-12-01T20:00:00Z")
    machine, _ = run(lambda p: p.get("4711"), {("GET", VM): raw})
    assert machine.shutdown_at == datetime(2026, 12, 1, 20, 0, tzinfo=timezone.utc)  # latest
    assert machine.connection.model_dump() == {
        "method": "ssh", "host": "38.80.122.17", "port": 22, "user": "ubuntu"}
    assert machine.created_at == datetime(2026, 11, 30, 9, 15, 2, tzinfo=timezone.utc)
    assert (machine.instance_type, machine.region, machine.gpu) == ("n3-H100x1", "CANADA-1", "H100")
    assert machine.price_per_hour == Decimal("1.9")


def test_a_machine_without_a_public_address_has_no_connection_yet():
    raw = body("get_vm_200.json")
    raw["instance"]["floating_ip"] = ""
    machine, _ = run(lambda p: p.get("4711"), {("GET", VM): raw})
    assert machine.connection is None


def test_set_deadline_rewrites_the_labels_keeping_the_others():
    raw = body("get_vm_200.json")
    raw["instance"]["labels"].append("team=vision")
    after = body("get_vm_200.json")
    after["instance"]["labels"] = ["gpucloud-launch-id=gc-0123456789", "team=vision",
                                   "gpucloud-shutdown-at=2026-12-02T06:00:00Z"]
    answers = iter([raw, after])
    later = datetime(2026, 12, 2, 6, 0, tzinfo=timezone.utc)

    def flow(p):
        machine = yield from p.get("4711")
        return (yield from p.set_deadline(machine, later))
    machine, fake = run(flow, {("GET", VM): lambda r: next(answers, after),
                               ("PUT", VM + "/label"): body("delete_vm_200.json")})
    assert fake.bodies("PUT", VM + "/label") == [{"labels": [
        "gpucloud-launch-id=gc-0123456789", "team=vision",
        "gpucloud-shutdown-at=2026-12-02T06:00:00Z"]}]
    assert machine.shutdown_at == later


def test_delete_is_a_delete_by_numeric_id_and_a_foreign_id_is_refused_unsent():
    _, fake = run(lambda p: p.delete("4711"), {("DELETE", VM): body("delete_vm_200.json")})
    assert [(r.method, r.url.path) for r in fake.sent] == [("DELETE", VM)]
    with pytest.raises(SpecError, match="numbers"):
        run(lambda p: p.delete("../keypairs"), {})


@pytest.mark.parametrize(("status", "payload", "error"), [
    (400, {"status": False, "message": "Insufficient credit to create the VM",
           "error_reason": "bad_request"}, QuotaExceededError),
    (400, body("error_out_of_stock_400.json"), InsufficientCapacityError),
])
def test_error_bodies_map_by_their_words(status, payload, error):
    with pytest.raises(error) as info:
        run(lambda p: p.list_instances(), {("GET", "/v1/core/virtual-machines"): (status, payload)})
    assert KEY not in str(info.value)


def test_a_200_that_says_status_false_is_an_error_not_a_listing():
    reply = {"status": False, "message": "Something went wrong", "error_reason": "x"}
    with pytest.raises(Exception) as info:
        run(lambda p: p.get("4711"), {("GET", VM): reply})
    assert "Something went wrong" in str(info.value)


def test_a_reply_of_the_wrong_shape_is_a_validation_error():
    with pytest.raises(APIResponseValidationError):
        run(lambda p: p.get("4711"), {("GET", VM): {"status": True, "instance": {"id": "x"}}})


def test_the_key_is_never_in_the_auth_repr():
    provider = HyperstackProvider(load_catalogs()["hyperstack"],
                                  Credential("hyperstack", SecretStr(KEY), "test"))
    assert KEY not in repr(provider.auth())


HOSTILE = {
    "html on a 200": "<!DOCTYPE html><html><body>Down for maintenance</body></html>",
    "nesting bomb": "[" * 100_000 + "]" * 100_000,
    "null": "null",
    "a list of numbers": "[5]",
    "infinity": "1e999",
    "instances of the wrong type": '{"status": true, "instances": 5, "instance": [5]}',
    "an id that is text": '{"status": true, "instances": [{"id": "<b>"}], '
                          '"instance": {"id": "<b>"}}',
    "labels that are a number": '{"status": true, "instances": [{"id": 1, "labels": 5}], '
                                '"instance": {"id": 1, "labels": 5}}',
    "flavors of the wrong shape": '{"status": true, "data": [{"flavors": [{"gpu_count": 1, '
                                  '"gpu": "H100"}]}], "stocks": []}',
}


@pytest.mark.parametrize("operation", ["offers", "list", "get", "create"])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_reply_of_no_known_shape_is_a_validation_error(operation, kind):
    from gpucloud.errors import exit_code_for

    flows = {"offers": lambda p: p.offers(OfferQuery()), "list": lambda p: p.list_instances(),
             "get": lambda p: p.get("4711"), "create": lambda p: p.create(spec())}
    provider = HyperstackProvider(load_catalogs()["hyperstack"],
                                  Credential("hyperstack", SecretStr(KEY), "test"))
    launches = []

    def answer(request):
        launches.extend([request] if request.method == "POST"
                        and request.url.path.endswith("virtual-machines") else [])
        return httpx.Response(200, text=HOSTILE[kind], headers={"content-type": "application/json"})
    with respx.mock(assert_all_mocked=True) as router:
        router.route().mock(side_effect=answer)
        session = Session(provider, sleep=lambda s: None)
        try:
            with pytest.raises(APIResponseValidationError) as info:
                session.run(flows[operation](provider))
        finally:
            session.close()
    assert exit_code_for(info.value) == 10 and len(str(info.value)) < 500
    assert len(launches) <= 1


def test_verify_is_one_cheap_authenticated_read():
    _, fake = run(lambda p: p.verify(), {("GET", "/v1/core/keypairs"): body(
        "list_keypairs_200.json")})
    assert [(r.method, r.url.path) for r in fake.sent] == [("GET", "/v1/core/keypairs")]


def test_a_job_is_refused_before_any_request():
    from gpucloud.errors import exit_code_for
    from gpucloud.models import JobRun

    job = JobRun(name="train", image="pytorch/pytorch:2.4.0")
    with pytest.raises(SpecError) as info:
        run(lambda p: p.submit_job(spec(job=job)), {})
    assert exit_code_for(info.value) == 2


def test_list_follows_the_total_when_the_server_caps_its_pages():
    template = body("get_vm_200.json")["instance"]
    machines_on_server = [template | {"id": 2000 + i, "labels": []} for i in range(120)]

    def page(request):
        number = int(request.url.params["page"])
        items = machines_on_server[(number - 1) * 50:number * 50]  # 50 a page, whatever asked
        return {"status": True, "message": "ok", "count": 120, "page": number,
                "page_size": 50, "instances": items}
    machines, fake = run(lambda p: p.list_instances(),
                         {("GET", "/v1/core/virtual-machines"): page})
    assert [r.url.params["page"] for r in fake.sent] == ["1", "2", "3"]
    assert len(machines) == 120


def test_a_flavor_that_is_not_an_object_is_a_validation_error():
    flavors = {"status": True, "message": "ok", "data": [{"flavors": [5]}]}
    with pytest.raises(APIResponseValidationError, match="flavor"):
        run(lambda p: p.offers(OfferQuery()), {("GET", "/v1/core/flavors"): flavors,
                                                ("GET", "/v1/core/stocks"): {"stocks": []}})


def test_get_reads_the_private_address_and_the_batch_key():
    """fixed_ip (the environment's own network) is where a job's nodes reach
    each other; the batch label groups a multi-node job's machines."""
    raw = body("get_vm_200.json")
    raw["instance"]["labels"].append("gpucloud-batch=mn-2-0123456789")
    machine, _ = run(lambda p: p.get("4711"), {("GET", VM): raw})
    assert (machine.private_ip, machine.ip) == ("10.0.0.12", "38.80.122.17")
    assert machine.batch == "mn-2-0123456789"
