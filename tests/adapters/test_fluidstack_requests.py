"""Fluidstack adapter: the exact requests it sends (golden), its project and
region settings, and how it reads the replies. respx answers at the HTTP
transport with the CONSTRUCTED bodies of tests/fixtures/fluidstack
(SOURCE.txt); every request is validated against the Atlas OpenAPI document
(which requires X-PROJECT-ID on instance calls) and flows run through the
real driver."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import respx
from pydantic import SecretStr

from gpucloud.catalog.bundled import load_catalogs, parse_catalog
from gpucloud.config.credentials import Credential
from gpucloud.errors import ConfigurationError, InsufficientCapacityError, SpecError
from gpucloud.models import InstanceSpec, InstanceStatus, Offer
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.fluidstack import FluidstackProvider, _settings
from gpucloud.transport.http import Session
from tests.openapi_check import validate_request

DIR = Path(__file__).resolve().parents[1] / "fixtures" / "fluidstack"
SPEC = DIR / "openapi.yaml"
TOKEN = "fs-SECRET-token-77a1"
PROJECT = "123e4567-e89b-12d3-a456-426614174003"
ID = "550e8400-e29b-41d4-a716-446655440000"
PUBKEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T "
          "me@laptop")


def body(name):
    return json.loads((DIR / name).read_text())


def provider(env=None, catalog=None):
    made = FluidstackProvider(catalog or load_catalogs()["fluidstack"],
                              Credential("fluidstack", SecretStr(TOKEN), "test"))
    made._settings_cache = _settings.load(
        {_settings.PROJECT_ENV: PROJECT, _settings.REGION_ENV: "eu1"} if env is None else env)
    return made


def run(flow_of, routes, made=None):
    made = made or provider()
    sent: list[httpx.Request] = []

    def answer(request):
        validate_request(SPEC, request)
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        sent.append(request)
        reply = routes[(request.method, request.url.path)]
        status, payload = reply if isinstance(reply, tuple) else (200, reply)
        return httpx.Response(status, json=payload) if payload is not None \
            else httpx.Response(status)
    with respx.mock(assert_all_mocked=True) as router:
        router.route(host="eu1.atlas.fluidstack.io").mock(side_effect=answer)
        session = Session(made, sleep=lambda s: None)
        try:
            return session.run(flow_of(made)), sent
        finally:
            session.close()


def spec(**changes):
    offer = Offer(provider="fluidstack", instance_type="h100-hgx-80gb.8x", region="eu1",
                  gpu="H100", gpu_count=8, price_per_hour=Decimal(0), source="live")
    fields = {"offer": offer, "launch_id": "gc-0123456789", "name": "train",
              "ssh_public_key": PUBKEY,
              "shutdown_at": datetime(2026, 12, 1, 18, 0, tzinfo=timezone.utc)}
    return InstanceSpec(**{**fields, **changes})


INSTANCE = f"/api/v1alpha1/instances/{ID}"


def test_create_names_the_project_and_carries_tags_and_the_key_as_cloud_init():
    machine, sent = run(lambda p: p.create(spec(batch="sweep 1", image="image://ubuntu22.04")), {
        ("POST", "/api/v1alpha1/instances"): (201, body("create_instance_201.json")),
        ("GET", INSTANCE): body("get_instance_200.json")})
    launch = sent[0]
    assert str(launch.url) == "https://eu1.atlas.fluidstack.io/api/v1alpha1/instances"
    assert launch.headers["X-PROJECT-ID"] == PROJECT
    sent_body = json.loads(launch.content)
    user_data = base64.b64decode(sent_body.pop("userData")).decode()
    assert sent_body == {"name": "train", "type": "h100-hgx-80gb.8x",
                         "image": "image://ubuntu22.04", "tags": {
                             "gpucloud-launch-id": "gc-0123456789", "gpucloud-batch": "sweep 1",
                             "gpucloud-shutdown-at": "2026-12-01T18:00:00Z"}}
    assert user_data == f"#cloud-config\nssh_authorized_keys:\n  - {PUBKEY}\n"
    assert machine.id == ID and machine.status is InstanceStatus.RUNNING
    assert machine.shutdown_at == datetime(2026, 12, 1, 18, 0, tzinfo=timezone.utc)


def test_create_without_image_or_key_leaves_both_out():
    _, sent = run(lambda p: p.create(spec(ssh_public_key=None, shutdown_at=None)), {
        ("POST", "/api/v1alpha1/instances"): (201, body("create_instance_201.json")),
        ("GET", INSTANCE): body("get_instance_200.json")})
    assert json.loads(sent[0].content) == {"name": "train", "type": "h100-hgx-80gb.8x",
                                           "tags": {"gpucloud-launch-id": "gc-0123456789"}}


def test_offers_read_types_and_capacity_with_the_catalogs_price_or_unknown():
    catalog = parse_catalog({"name": "fluidstack",
                             "api_base": load_catalogs()["fluidstack"].api_base,
                             "instance_types": [{"name": "h100-hgx-80gb.8x", "gpu": "H100",
                                                 "gpu_count": 8, "price": "20.00"}]})
    offers, sent = run(lambda p: p.offers(OfferQuery(gpu="H100")), {
        ("GET", "/api/v1alpha1/instance-types"): body("list_instance_types_200.json"),
        ("GET", "/api/v1alpha1/capacity"): body("list_capacity_200.json")},
        made=provider(catalog=catalog))
    by_name = {o.instance_type: o for o in offers}
    assert set(by_name) == {"h100-hgx-80gb.8x", "h100-hgx-80gb.1x"}  # the CPU type is left out
    eight, one = by_name["h100-hgx-80gb.8x"], by_name["h100-hgx-80gb.1x"]
    assert (eight.gpu, eight.gpu_count, eight.region, eight.vcpus, eight.memory_gb) == (
        "H100", 8, "eu1", 96, 960)
    assert eight.price_per_hour == Decimal("20.00") and eight.available is True
    assert one.price_per_hour == 0 and one.available is False  # unknown price; capacity 0
    assert "X-PROJECT-ID" not in sent[0].headers  # /instance-types is not project-scoped


def test_capacity_not_implemented_leaves_availability_unknown():
    offers, _ = run(lambda p: p.offers(OfferQuery(count=8)), {
        ("GET", "/api/v1alpha1/instance-types"): body("list_instance_types_200.json"),
        ("GET", "/api/v1alpha1/capacity"): (501, {"message": "Not implemented"})})
    assert [(o.instance_type, o.available) for o in offers] == [("h100-hgx-80gb.8x", None)]


def test_list_and_get_read_state_tags_and_the_private_address():
    machines, sent = run(lambda p: p.list_instances(), {
        ("GET", "/api/v1alpha1/instances"): body("list_instances_200.json")})
    assert sent[0].headers["X-PROJECT-ID"] == PROJECT
    first, second = machines
    assert first.launch_id == "gc-0123456789" and first.region == "eu1"
    assert first.connection.model_dump() == {"method": "ssh", "host": "10.0.0.2", "port": 22,
                                             "user": "ubuntu"}
    assert second.status is InstanceStatus.PENDING and second.connection is None


def test_delete_is_a_project_scoped_delete():
    result, sent = run(lambda p: p.delete(ID), {("DELETE", INSTANCE): (204, None)})
    assert result is None and [(r.method, r.headers["X-PROJECT-ID"]) for r in sent] == [
        ("DELETE", PROJECT)]


def test_a_deadline_cannot_move_the_spec_has_no_tag_update():
    machine, _ = run(lambda p: p.get(ID), {("GET", INSTANCE): body("get_instance_200.json")})
    with pytest.raises(SpecError, match="not supported"):
        run(lambda p: p.set_deadline(machine, datetime(2026, 12, 2, tzinfo=timezone.utc)), {})


def test_out_of_stock_is_a_capacity_error():
    with pytest.raises(InsufficientCapacityError) as info:
        run(lambda p: p.create(spec()), {("POST", "/api/v1alpha1/instances"): (
            400, body("error_out_of_stock_400.json"))})
    assert TOKEN not in str(info.value)


def test_without_a_project_or_a_region_nothing_is_sent_and_the_hint_says_what_to_set():
    with pytest.raises(ConfigurationError) as info:
        run(lambda p: p.list_instances(), {}, made=provider(env={_settings.REGION_ENV: "eu1"}))
    assert _settings.PROJECT_ENV in info.value.hint
    with pytest.raises(ConfigurationError) as info:
        provider(env={_settings.PROJECT_ENV: PROJECT}).base_url
    assert _settings.REGION_ENV in info.value.hint


def test_settings_come_from_config_toml_and_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text(
        f'[fluidstack]\nproject_id = "{PROJECT.upper()}"\nregion = "us-west"\n')
    assert _settings.load({}) == _settings.Settings(project_id=PROJECT, region="us-west")
    assert _settings.load({_settings.REGION_ENV: "eu1"}).region == "eu1"
    with pytest.raises(ConfigurationError, match="UUID"):
        _settings.load({_settings.PROJECT_ENV: "my-project"})
    with pytest.raises(ConfigurationError, match="host label"):
        _settings.load({_settings.REGION_ENV: "eu1.evil.example/x"})


def test_a_catalog_that_names_its_host_outright_is_used_as_is():
    catalog = parse_catalog({"name": "fluidstack", "api_base": "http://127.0.0.1:9/api/v1alpha1"})
    assert provider(env={}, catalog=catalog).base_url == "http://127.0.0.1:9/api/v1alpha1"


HOSTILE = {
    "html on a 200": "<!DOCTYPE html><html><body>Down for maintenance</body></html>",
    "nesting bomb": "[" * 100_000 + "]" * 100_000,
    "null": "null",
    "a number": "5",
    "a list of numbers": "[5]",
    "infinity": "1e999",
    "an object where a list belongs and a list where an object belongs": "{}",
    "tags that are a number": '[{"id": "x", "tags": 5}]',
    "a type without a name": '[{"gpuCount": 8, "gpuModel": "H100", "name": 5}]',
}


@pytest.mark.parametrize("operation", ["offers", "list", "get", "create"])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_reply_of_no_known_shape_is_a_validation_error(operation, kind):
    from gpucloud.errors import APIResponseValidationError, exit_code_for

    flows = {"offers": lambda p: p.offers(OfferQuery()), "list": lambda p: p.list_instances(),
             "get": lambda p: p.get(ID), "create": lambda p: p.create(spec())}
    if (kind, operation) == ("tags that are a number", "offers"):
        pytest.skip("an instance type without GPUs is a CPU type, left out: not a fault")
    made = provider()
    text = HOSTILE[kind]
    if operation in ("get", "create") and text.startswith("[{"):
        text = text[1:-1]  # the one-object form of the same fault
    if operation in ("get", "create") and text == "{}":
        text = "[]"
    with respx.mock(assert_all_mocked=True) as router:
        router.route().mock(return_value=httpx.Response(
            200, text=text, headers={"content-type": "application/json"}))
        session = Session(made, sleep=lambda s: None)
        try:
            with pytest.raises(APIResponseValidationError) as info:
                session.run(flows[operation](made))
        finally:
            session.close()
    assert exit_code_for(info.value) == 10 and len(str(info.value)) < 500


def test_verify_proves_the_token_and_the_project_together():
    _, sent = run(lambda p: p.verify(), {
        ("GET", "/api/v1alpha1/instances"): body("list_instances_200.json")})
    assert [(r.url.path, r.headers["X-PROJECT-ID"]) for r in sent] == [
        ("/api/v1alpha1/instances", PROJECT)]


def test_a_job_or_a_disk_size_is_refused_before_any_request():
    from gpucloud.errors import exit_code_for
    from gpucloud.models import JobRun

    job = JobRun(name="train", image="pytorch/pytorch:2.4.0")
    for bad in (spec(job=job), spec(disk_gb=500)):
        with pytest.raises(SpecError) as info:
            run(lambda p, s=bad: p.create(s), {})
        assert exit_code_for(info.value) == 2
