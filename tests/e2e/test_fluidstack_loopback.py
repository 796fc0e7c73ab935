"""Client and CLI over the Fluidstack adapter against a fake Atlas API on
127.0.0.1 (a real socket, no respx, no sandbox). The fake answers in the
shapes of the Atlas OpenAPI document, against which every request it
receives is validated (X-PROJECT-ID included; tests/e2e/_loopback.py). The
project and region come from config.toml, as a user sets them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.cli import app
from gpucloud.config.settings import config_dir
from tests.e2e._loopback import loopback, point_catalog_at

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fluidstack"
SPEC = FIXTURES / "openapi.yaml"
TOKEN = "fs-live-SECRET-1c2b3a"
PROJECT = "123e4567-e89b-12d3-a456-426614174003"
PUBKEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ1bm55IGtleSBmb3IgZ3B1Y2xvdWQgdGVzdHMhIQ== "
          "me@laptop")


def fixture(name):
    return json.loads((FIXTURES / name).read_text())


class FakeAtlas:
    def __init__(self):
        self.instances: dict[str, dict] = {}
        self.bodies: list[dict] = []

    def __call__(self, method, path, query, headers, body):
        if headers.get("Authorization") != f"Bearer {TOKEN}":
            return 401, fixture("error_unauthorized_401.json")
        if path == "/api/v1alpha1/instance-types":
            return 200, fixture("list_instance_types_200.json")
        assert headers.get("X-PROJECT-ID") == PROJECT
        if path == "/api/v1alpha1/capacity":
            return 200, fixture("list_capacity_200.json")
        if path == "/api/v1alpha1/instances" and method == "POST":
            self.bodies.append(body)
            ident = str(uuid.UUID(int=len(self.instances) + 1))
            self.instances[ident] = {
                **fixture("get_instance_200.json"), "id": ident, "name": body["name"],
                "type": body["type"], "tags": body.get("tags", {}),
                "userData": body.get("userData"), "state": "running"}
            return 201, self.instances[ident]
        if path == "/api/v1alpha1/instances":
            return 200, list(self.instances.values())
        ident = path.rsplit("/", 1)[1]
        if ident not in self.instances:
            return 404, fixture("error_not_found_404.json")
        if method == "DELETE":
            del self.instances[ident]
            return 204, None
        return 200, self.instances[ident]


@pytest.fixture
def cloud(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_FLUIDSTACK_API_KEY", TOKEN)
    ssh = Path.home() / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519.pub").write_text(PUBKEY + "\n")
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "config.toml").write_text(
        f'[fluidstack]\nproject_id = "{PROJECT}"\nregion = "eu1"\n')
    fake = FakeAtlas()
    with loopback(fake, SPEC, "https://eu1.atlas.fluidstack.io/api/v1alpha1",
                  "/api/v1alpha1") as server:
        point_catalog_at("fluidstack", server.url + "/api/v1alpha1")
        yield fake
    assert server.sent and server.violations == []


def no_sleep(_):
    return None


def test_offers_have_an_unknown_price_and_a_spend_cap_refuses_them(cloud):
    client = Client(sleep=no_sleep)
    offers = client.offers(gpu="h100", count=8, provider="fluidstack")
    assert [(o.instance_type, o.price_per_hour, o.available) for o in offers] == [
        ("h100-hgx-80gb.8x", 0, True)]
    refused = CliRunner().invoke(app, ["create", "--gpu", "h100", "--count", "8", "--provider",
                                       "fluidstack", "--max-cost", "100", "--yes"])
    assert refused.exit_code == 7, refused.output  # a price part is unknown
    assert cloud.instances == {}


def test_create_list_delete_over_a_socket(cloud):
    client = Client(sleep=no_sleep)
    machine = client.create(gpu="h100", count=8, provider="fluidstack", auto_shutdown="3h")
    [sent] = cloud.bodies
    assert sent["type"] == "h100-hgx-80gb.8x"
    assert sent["tags"]["gpucloud-launch-id"] == machine.launch_id
    assert "gpucloud-shutdown-at" in sent["tags"] and "userData" in sent
    assert machine.region == "eu1" and machine.shutdown_at is not None
    assert [m.ref for m in client.list(provider="fluidstack")] == [machine.ref]
    client.delete(machine.ref)
    assert cloud.instances == {}


def test_the_token_never_shows_in_cli_output(cloud):
    runner = CliRunner()
    outputs = []
    for args in (["--debug", "offers", "--gpu", "h100", "--provider", "fluidstack"],
                 ["--debug", "list", "--provider", "fluidstack", "--json"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        outputs += [result.stdout, result.stderr]
    bad = runner.invoke(app, ["list", "--provider", "fluidstack"],
                        env={"GPUCLOUD_FLUIDSTACK_API_KEY": "wrong"})
    assert bad.exit_code == 4, bad.output
    assert all(TOKEN not in text for text in [*outputs, bad.stdout, bad.stderr])
