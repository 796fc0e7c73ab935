"""Client and CLI over the Lambda adapter, with respx answering at the HTTP
transport from the contract fixtures; every request is checked against the
trimmed OpenAPI spec. Also: the API key never shows anywhere."""

import itertools
import json
import logging
import sqlite3
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud import AuthenticationError, Client
from gpucloud.cli import app
from gpucloud.config.settings import state_db_path
from tests.openapi_check import validate_request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lambda"
SPEC = FIXTURES / "openapi.json"
KEY = "sk-live-SECRET-5f1e0c2d9a8b7c6d"
PUBKEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ1bm55IGtleSBmb3IgZ3B1Y2xvdWQgdGVzdHMhIQ== "
          "me@laptop")


def fixture(name):
    return json.loads((FIXTURES / name).read_text())


class FakeLambda:
    """Answers like Lambda's contract and keeps what it was sent."""

    def __init__(self, router):
        self.sent = []
        self.instances = {}
        self.ids = itertools.count(1)
        self.keys = list(fixture("list_ssh_keys_200.json")["data"])
        self.fail_auth = False
        router.route().mock(side_effect=self.handle)

    def handle(self, request):
        validate_request(SPEC, request)
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        self.sent.append(request)
        if self.fail_auth:
            return httpx.Response(401, json=fixture("error_invalid_api_key_401.json"))
        path, method = request.url.path, request.method
        if path == "/api/v1/instance-types":
            return httpx.Response(200, json=fixture("list_instance_types_200.json"))
        if path == "/api/v1/ssh-keys" and method == "GET":
            return httpx.Response(200, json={"data": self.keys})
        if path == "/api/v1/ssh-keys" and method == "POST":
            body = json.loads(request.content)
            key = {"id": "k" * 32, "name": body["name"], "public_key": body["public_key"]}
            self.keys.append(key)
            return httpx.Response(200, json={"data": key})
        if path == "/api/v1/instance-operations/launch":
            body = json.loads(request.content)
            template = fixture("get_instance_200.json")["data"]
            # A batch launches from several threads: ids from one counter
            # (next() on itertools.count is atomic), never from len(instances).
            ident = f"{next(self.ids):032x}"
            itype = fixture("list_instance_types_200.json")["data"][body["instance_type_name"]]
            self.instances[ident] = {
                **template, "id": ident, "name": body["name"], "tags": body["tags"],
                "ssh_key_names": body["ssh_key_names"], "region": {"name": body["region_name"],
                                                                   "description": "x"},
                "instance_type": itype["instance_type"], "status": "booting"}
            return httpx.Response(200, json={"data": {"instance_ids": [ident]}})
        if path == "/api/v1/instances":
            return httpx.Response(200, json={"data": list(self.instances.values())})
        if path.startswith("/api/v1/instances/"):
            ident = path.rsplit("/", 1)[1]
            if ident not in self.instances:
                return httpx.Response(404, json=fixture("error_instance_not_found_404.json"))
            return httpx.Response(200, json={"data": self.instances[ident]})
        if path == "/api/v1/file-systems":  # the reaper's volume check: none here
            return httpx.Response(200, json={"data": []})
        if path == "/api/v1/instance-operations/terminate":
            ids = json.loads(request.content)["instance_ids"]
            for ident in ids:
                self.instances[ident]["status"] = "terminating"
            return httpx.Response(200, json={"data": {"terminated_instances": [
                self.instances[i] for i in ids]}})
        raise AssertionError(f"unexpected {method} {path}")


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", KEY)
    ssh = Path.home() / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519.pub").write_text(PUBKEY + "\n")
    with respx.mock(base_url="https://cloud.lambda.ai", assert_all_called=False) as router:
        yield FakeLambda(router)


def no_sleep(_):
    return None


def test_live_prices_replace_catalog_rows(fake):
    offers = Client(sleep=no_sleep).offers(gpu="h100", count=8)
    lam = [o for o in offers if o.provider == "lambda"]
    assert lam and {o.source for o in lam} == {"live"}
    assert {o.price_per_hour for o in lam} == {Decimal("23.92")}
    assert {o.region for o in lam if o.available} == {"us-west-3", "us-south-2", "us-south-3"}
    assert all(o.available is False for o in lam if o.region == "us-east-1")
    others = [o for o in offers if o.provider != "lambda"]
    assert others and {o.source for o in others} == {"catalog"}


def test_create_picks_cheapest_available_and_tags_it(fake):
    client = Client(sleep=no_sleep)
    machine = client.create(gpu="h100", count=8, auto_shutdown="3h")
    assert machine.provider == "lambda" and machine.region == "us-south-2"
    assert machine.price_per_hour == Decimal("23.92")
    [launch] = [r for r in fake.sent if r.url.path.endswith("/launch")]
    body = json.loads(launch.content)
    assert body["instance_type_name"] == "gpu_8x_h100_sxm5"
    assert {t["key"] for t in body["tags"]} == {"gpucloud-launch-id", "gpucloud-shutdown-at"}
    assert body["ssh_key_names"][0].startswith("gpucloud-")  # registered from the .pub file
    assert "image" not in body  # no --image: Lambda's default image
    assert machine.launch_id in {t["value"] for t in body["tags"]}
    assert machine.ref in {m.ref for m in client.list()}
    client.delete(machine)
    assert client.get(machine.ref).status.value == "terminating"


def test_create_with_an_image_id(fake):
    image = fixture("list_images_200.json")["data"][0]["id"]
    Client(sleep=no_sleep).create(gpu="h100", count=8, auto_shutdown="1h", image=image)
    [launch] = [r for r in fake.sent if r.url.path.endswith("/launch")]
    assert json.loads(launch.content)["image"] == {"id": image}


def test_secrets_never_appear(fake, caplog):
    caplog.set_level(logging.DEBUG)
    runner = CliRunner()
    outputs = []
    for args in (["--debug", "offers", "--gpu", "h100", "--count", "8"],
                 ["--debug", "create", "--gpu", "h100", "--count", "8", "--provider", "lambda",
                  "--yes", "--json"],
                 ["--debug", "list"], ["providers", "--json"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        outputs += [result.stdout, result.stderr]
    fake.fail_auth = True
    failed = runner.invoke(app, ["--debug", "list", "--provider", "lambda"])
    assert failed.exit_code == 4
    outputs += [failed.stdout, failed.stderr]

    client = Client(sleep=no_sleep)
    with pytest.raises(AuthenticationError) as info:
        client.list(provider="lambda")
    exc = info.value
    texts = outputs + [r.getMessage() for r in caplog.records] + [
        str(exc), repr(exc), str(exc.hint), repr(exc.request), repr(client._ctx.adapter("lambda")
                                                                     .credential),
        repr(client._ctx.adapter("lambda").auth()), repr(client._ctx.credentials.find("lambda"))]
    assert caplog.records, "debug logging produced nothing: the check would be empty"
    for text in texts:
        assert KEY not in text
    db = sqlite3.connect(state_db_path())
    rows = db.execute("SELECT * FROM launches").fetchall()
    assert rows and KEY not in repr(rows)
    for path in state_db_path().parent.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes()


def test_a_submitted_job_runs_its_container_on_lambdas_os_image(fake, monkeypatch):
    # The job's image is a container, run by the start-up script on the VM; it
    # must never be sent as the VM's OS image (Lambda would refuse the launch).
    from gpucloud.jobs.spec import JobSpec

    monkeypatch.setenv("HF_TOKEN", "hf-secret-value-123456")
    spec = JobSpec(name="train", image="nvcr.io/nvidia/pytorch:24.05-py3",
                   command=["python", "train.py"], resources={"gpu": "h100", "gpu_count": 8},
                   max_runtime="2h", secrets={"HF_TOKEN": {"env": "HF_TOKEN"}})
    job = Client(providers=["lambda"], sleep=no_sleep).submit(spec, provider="lambda")
    [launch] = [r for r in fake.sent if r.url.path.endswith("/launch")]
    body = json.loads(launch.content)
    assert "image" not in body  # Lambda's default OS image (it has docker)
    assert "nvcr.io/nvidia/pytorch:24.05-py3" in body["user_data"]
    assert job.launch_id.startswith("gj-") and job.shutdown_at is not None
