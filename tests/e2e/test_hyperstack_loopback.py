"""Client and CLI over the Hyperstack adapter against a fake Infrahub API on
127.0.0.1 (a real socket, no respx, no sandbox): offers, create (environment
and key pair made on the way), list, extend, delete. The fake keeps state and
answers in the shapes of the Infrahub OpenAPI document, against which every
request it receives is validated (tests/e2e/_loopback.py)."""

from __future__ import annotations

import itertools
import json
import logging
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.cli import app
from tests.e2e import _fake_ssh
from tests.e2e._loopback import loopback, point_catalog_at

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hyperstack"
SPEC = FIXTURES / "openapi.yaml"
KEY = "hs-live-SECRET-93b0d4e2"
PUBKEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ1bm55IGtleSBmb3IgZ3B1Y2xvdWQgdGVzdHMhIQ== "
          "me@laptop")


def fixture(name):
    return json.loads((FIXTURES / name).read_text())


class FakeInfrahub:
    """Environments, key pairs and virtual machines, kept as the API would."""

    def __init__(self):
        self.environments: list[dict] = []
        self.keypairs: list[dict] = []
        self.vms: dict[int, dict] = {}
        self.ids = itertools.count(4711)  # atomic: a batch's launches come at once

    def __call__(self, method, path, query, headers, body):
        if headers.get("api_key") != KEY:
            return 401, fixture("error_unauthorized_401.json")
        ok = {"status": True, "message": "ok"}
        if path == "/v1/core/flavors":
            return 200, fixture("list_flavors_200.json")
        if path == "/v1/core/stocks":
            return 200, fixture("get_stocks_200.json")
        if path == "/v1/core/environments" and method == "GET":
            return 200, {**ok, "environments": self.environments}
        if method == "POST" and path in ("/v1/core/environments", "/v1/core/keypairs") \
                and body["name"] in {o["name"] for o in self.environments + self.keypairs}:
            # CONSTRUCTED: names are unique per account (the spec documents no
            # reply for a taken one; this is its generic 400 error body).
            return 400, {"status": False, "message": f"{body['name']} already exists",
                         "error_reason": "bad_request"}
        if path == "/v1/core/environments" and method == "POST":
            env = {"id": len(self.environments) + 1, **body,
                   "created_at": "2026-12-01 10:00:00+00:00"}
            self.environments.append(env)
            return 200, {**ok, "environment": env}
        if path == "/v1/core/keypairs" and method == "GET":
            return 200, {**ok, "keypairs": self.keypairs}
        if path == "/v1/core/keypairs" and method == "POST":
            [env] = [e for e in self.environments if e["name"] == body["environment_name"]]
            pair = {"id": len(self.keypairs) + 1, "name": body["name"],
                    "public_key": body["public_key"], "fingerprint": "SHA256:x",
                    "environment": env, "created_at": "2026-12-01 10:00:00+00:00"}
            self.keypairs.append(pair)
            return 200, {**ok, "keypair": pair}
        if path == "/v1/core/virtual-machines" and method == "POST":
            template = fixture("get_vm_200.json")["instance"]
            [env] = [e for e in self.environments if e["name"] == body["environment_name"]]
            ident = next(self.ids)
            vm = {**template, "id": ident, "name": body["name"], "labels": body["labels"],
                  "status": "ACTIVE", "environment": env,
                  "keypair": {"name": body["key_name"]},
                  "flavor": {**template["flavor"], "name": body["flavor_name"]},
                  "fixed_ip": f"10.0.0.{ident - 4711 + 12}"}  # each its own address
            self.vms[ident] = vm
            return 200, {**ok, "instances": [vm]}
        if path == "/v1/core/virtual-machines" and method == "GET":
            size, page = int(query["pageSize"]), int(query["page"])
            items = list(self.vms.values())[(page - 1) * size:page * size]
            return 200, {**ok, "count": len(self.vms), "page": page, "page_size": size,
                         "instances": items}
        if path.startswith("/v1/core/virtual-machines/"):
            parts = path.split("/")
            vm = self.vms.get(int(parts[4]))
            if vm is None:
                return 404, fixture("error_not_found_404.json")
            if method == "PUT" and parts[-1] == "label":
                vm["labels"] = body["labels"]
                return 200, ok
            if method == "DELETE":
                del self.vms[vm["id"]]
                return 200, ok
            return 200, {**ok, "instance": vm}
        raise AssertionError(f"unexpected {method} {path}")


@pytest.fixture
def cloud(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_HYPERSTACK_API_KEY", KEY)
    ssh = Path.home() / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519.pub").write_text(PUBKEY + "\n")
    fake = FakeInfrahub()
    with loopback(fake, SPEC, "https://infrahub-api.nexgencloud.com/v1", "/v1") as server:
        point_catalog_at("hyperstack", server.url + "/v1")
        fake.server = server
        yield fake
    assert server.sent and server.violations == []


def no_sleep(_):
    return None


def test_offers_create_list_extend_delete_over_a_socket(cloud):
    client = Client(sleep=no_sleep)
    offers = client.offers(gpu="h100", count=1, provider="hyperstack")
    [live] = [o for o in offers if o.source == "live"]
    assert (live.instance_type, live.price_per_hour, live.available) == (
        "n3-H100x1", Decimal("1.9"), True)

    machine = client.create(gpu="h100", count=1, provider="hyperstack", auto_shutdown="3h")
    assert machine.ref == "hyperstack/4711" and machine.region == "CANADA-1"
    [env] = cloud.environments
    assert (env["name"], env["region"]) == ("gpucloud-CANADA-1", "CANADA-1")
    [pair] = cloud.keypairs
    assert pair["public_key"] == PUBKEY
    vm = cloud.vms[4711]
    assert f"gpucloud-launch-id={machine.launch_id}" in vm["labels"]
    assert machine.shutdown_at is not None

    assert [m.ref for m in client.list(provider="hyperstack")] == ["hyperstack/4711"]
    extended = client.extend(machine.ref, by="2h")
    assert extended.shutdown_at > machine.shutdown_at
    assert sum(label.startswith("gpucloud-shutdown-at=") for label in vm["labels"]) == 1

    # A second create reuses the environment and the key pair.
    client.create(gpu="h100", count=1, provider="hyperstack", auto_shutdown="1h")
    assert len(cloud.environments) == 1 and len(cloud.keypairs) == 1

    client.delete(machine.ref)
    assert 4711 not in cloud.vms


def test_the_key_never_shows_in_cli_output_or_logs(cloud, caplog):
    caplog.set_level(logging.DEBUG)
    runner = CliRunner()
    outputs = []
    for args in (["--debug", "offers", "--gpu", "h100", "--count", "1",
                  "--provider", "hyperstack"],
                 ["--debug", "create", "--gpu", "h100", "--count", "1", "--provider",
                  "hyperstack", "--yes", "--json"],
                 ["--debug", "list", "--provider", "hyperstack", "--json"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        outputs += [result.stdout, result.stderr]
    listed = json.loads(outputs[-2])
    assert [i["ref"] for i in listed["instances"]] == ["hyperstack/4711"]
    bad = runner.invoke(app, ["list", "--provider", "hyperstack"],
                        env={"GPUCLOUD_HYPERSTACK_API_KEY": "wrong-key"})
    assert bad.exit_code == 4, bad.output  # authentication
    outputs += [bad.stdout, bad.stderr]
    assert all(KEY not in text for text in outputs)
    assert KEY not in caplog.text


def test_a_two_node_job_is_one_batch_in_one_environment_started_over_ssh(
        cloud, tmp_path, monkeypatch):
    """Both nodes launched in one region's environment as one batch (named by
    rank, one batch label), every request valid against the Infrahub spec, then
    the job started on each node over ssh, the nodes meeting at fixed_ip."""
    calls = _fake_ssh.install(tmp_path, monkeypatch)
    job = Client(sleep=no_sleep).submit(
        {"name": "pair", "image": "busybox", "command": ["python", "train.py"], "nodes": 2,
         "resources": {"gpu": "h100", "gpu_count": 1}, "max_runtime": "2h"},
        provider="hyperstack")

    assert job.nodes == 2 and [m.name for m in job.instances] == ["pair-node0", "pair-node1"]
    vms = sorted(cloud.vms.values(), key=lambda vm: vm["name"])
    assert {vm["environment"]["name"] for vm in vms} == {"gpucloud-CANADA-1"}
    batch = [{label.split("=", 1)[0]: label.split("=", 1)[1] for label in vm["labels"]}
             for vm in vms]
    assert batch[0]["gpucloud-batch"] == batch[1]["gpucloud-batch"]
    assert batch[0]["gpucloud-batch"].startswith("mn-2-")
    assert all(b["gpucloud-launch-id"].startswith("gj-") for b in batch)
    started = _fake_ssh.scripts(calls)
    assert len(started) == 2
    addrs = [vm["fixed_ip"] for vm in vms]
    for rank, script in enumerate(started):
        assert f"export MASTER_ADDR={addrs[0]}" in script
        assert f"export NODE_RANK={rank}" in script
        assert f"export GPUCLOUD_NODE_ADDRS={','.join(addrs)}" in script
