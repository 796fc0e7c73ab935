"""gpucloud's CLI against a small Shadeform on 127.0.0.1: a real HTTP server
(ThreadingHTTPServer) answering as Shadeform's OpenAPI document says, reached
through a catalog file whose api_base points at it. Every request it receives is
validated against the document (tests/fixtures/shadeform/openapi.yaml) and must
carry the key in X-API-KEY. No sandbox and no respx: the whole stack, sockets
included.

What it proves end to end: live offers in cents become USD per machine per hour
and name their cloud; `create --max-cost` sends auto_delete with the deadline and
the spend cap (so Shadeform ends the machine with every computer of ours off);
`extend` moves auto_delete and reads it back; `delete` ends the machine."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from gpucloud.cli import app
from tests.e2e import _fake_ssh
from tests.openapi_check import request_errors

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "shadeform"
SPEC = FIXTURES / "openapi.yaml"
KEY = "sf-loopback-SECRET-6a1f"
PUBKEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ1bm55IGtleSBmb3IgZ3B1Y2xvdWQgdGVzdHMhIQ== "
          "me@laptop")


def example(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


class FakeShadeform:
    """The state of the loopback Shadeform: instance types (the document's example
    plus an 8x H100 built here), SSH keys, instances; and every request seen."""

    def __init__(self) -> None:
        types = example("instance_types_200.json")["instance_types"]
        h100 = dict(types[0], cloud="lambdalabs", shade_instance_type="H100x8",
                    hourly_price=2392, availability=[
                        {"region": "us-south-2", "available": True, "display_name": "Texas"},
                        {"region": "us-east-1", "available": False, "display_name": "Virginia"}],
                    configuration=dict(types[0]["configuration"], num_gpus=8, gpu_type="H100",
                                       vram_per_gpu_in_gb=80))
        self.types = [types[0], h100]
        self.keys: list[dict[str, Any]] = []
        self.instances: dict[str, dict[str, Any]] = {}
        self.seen: list[tuple[str, str, Any]] = []
        self.violations: list[str] = []
        self.lock = threading.Lock()

    def answer(self, method: str, path: str, headers: dict[str, str],
               body: bytes) -> tuple[int, Any]:
        request = httpx.Request(method, "https://api.shadeform.ai" + path,
                                headers=headers, content=body)
        self.violations += request_errors(SPEC, request)
        if headers.get("x-api-key") != KEY:
            return 401, {"error": "invalid api key"}  # CONSTRUCTED: no error body documented
        data = json.loads(body) if body else None
        with self.lock:
            self.seen.append((method, path, data))
            return self._route(method, path, data)

    def _route(self, method: str, path: str, data: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")  # ["v1", ...]
        if (method, parts[1:]) == ("GET", ["instances", "types"]):
            return 200, {"instance_types": self.types}
        if (method, parts[1:]) == ("GET", ["sshkeys"]):
            return 200, {"ssh_keys": self.keys}
        if (method, parts[1:]) == ("POST", ["sshkeys", "add"]):
            if data["name"] in {k["name"] for k in self.keys}:
                # CONSTRUCTED body; the words are those brevdev/cloud's Shadeform
                # provider matches for a taken name.
                return 400, {"error": "ssh key name must be unique"}
            key = {"id": str(uuid.uuid4()), "is_default": False, **data}
            self.keys.append(key)
            return 200, {"id": key["id"]}
        if (method, parts[1:]) == ("POST", ["instances", "create"]):
            return 200, {"id": self._create(data)}
        if (method, parts[1:]) == ("GET", ["instances"]):
            listed = [{k: v for k, v in i.items() if k not in ("auto_delete", "envs")}
                      for i in self.instances.values()]
            return 200, {"instances": listed}
        if len(parts) == 4 and parts[1] == "instances":
            instance = self.instances.get(parts[2])
            if instance is None:
                return 404, {"error": "instance not found"}  # CONSTRUCTED
            if (method, parts[3]) == ("GET", "info"):
                return 200, instance
            if (method, parts[3]) == ("POST", "update"):
                instance.update({k: v for k, v in data.items() if v is not None})
                return 200, None
            if (method, parts[3]) == ("POST", "delete"):
                instance["status"] = "deleting"
                return 200, None
        return 404, {"error": f"no route {method} {path}"}

    def _create(self, data: dict[str, Any]) -> str:
        template = example("instance_info_200.json")
        [kind] = [t for t in self.types if (t["cloud"], t["shade_instance_type"])
                  == (data["cloud"], data["shade_instance_type"])]
        ident = str(uuid.uuid4())
        self.instances[ident] = {
            **template, "id": ident, "name": data["name"], "cloud": data["cloud"],
            "region": data["region"], "shade_instance_type": data["shade_instance_type"],
            "configuration": {**template["configuration"], **{
                k: kind["configuration"][k] for k in ("num_gpus", "gpu_type",
                                                      "vram_per_gpu_in_gb")}},
            "hourly_price": kind["hourly_price"], "status": "active", "ip": "127.0.0.1",
            "tags": data.get("tags", []), "envs": data.get("envs", []),
            "ssh_key_id": data.get("ssh_key_id", ""),
        }
        if "auto_delete" in data:
            self.instances[ident]["auto_delete"] = data["auto_delete"]
        else:
            self.instances[ident].pop("auto_delete", None)
        return ident


def _handler(fake: FakeShadeform) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, payload = fake.answer(self.command, self.path, headers, body)
            out = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = _serve

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def shadeform(monkeypatch) -> Any:
    fake = FakeShadeform()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    home = Path.home()
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519.pub").write_text(PUBKEY + "\n")
    config = Path(__import__("os").environ["GPUCLOUD_HOME"]) / "providers"
    config.mkdir(parents=True)
    bundled = (ROOT / "providers" / "shadeform.toml").read_text()
    port = server.server_address[1]
    (config / "shadeform.toml").write_text(bundled.replace(
        'api_base = "https://api.shadeform.ai/v1"', f'api_base = "http://127.0.0.1:{port}/v1"'))
    monkeypatch.setenv("GPUCLOUD_SHADEFORM_API_KEY", KEY)
    yield fake
    server.shutdown()
    server.server_close()
    assert not fake.violations, fake.violations


def cli(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (args, result.output)
    assert KEY not in result.output
    return json.loads(result.stdout) if "--json" in args else result.stdout


def test_offers_create_extend_delete_over_loopback(shadeform):
    offers = cli("offers", "--gpu", "h100", "--count", "8", "--provider", "shadeform", "--json")
    rows = offers["offers"] if isinstance(offers, dict) else offers
    live = [o for o in rows if o["source"] == "live"]
    assert {(o["instance_type"], o["region"], o["available"], o["price_per_hour"])
            for o in live} == {("lambdalabs_H100x8", "us-south-2", True, "23.92"),
                               ("lambdalabs_H100x8", "us-east-1", False, "23.92")}
    assert all(o["notes"] == ["runs on lambdalabs through Shadeform"] for o in live)

    before = datetime.now(timezone.utc)
    created = cli("create", "--gpu", "h100", "--count", "8", "--provider", "shadeform",
                  "--max-cost", "50", "--yes", "--json")
    [(_, _, sent)] = [s for s in shadeform.seen if s[1] == "/v1/instances/create"]
    # The whole cap buys 50 / 23.92 hours: Shadeform holds both the date and the spend.
    assert sent["auto_delete"]["spend_threshold"] == "50.00"
    date = datetime.fromisoformat(sent["auto_delete"]["date_threshold"].replace("Z", "+00:00"))
    hours = Decimal(50) / Decimal("23.92")
    assert abs(date - (before + timedelta(hours=float(hours)))) < timedelta(minutes=2)
    assert any(t.startswith("gpucloud-launch-id=gc-") for t in sent["tags"])
    assert sent["ssh_key_id"] == shadeform.keys[0]["id"]  # the .pub registered once
    assert (sent["cloud"], sent["shade_instance_type"], sent["region"]) == (
        "lambdalabs", "H100x8", "us-south-2")
    ident = next(iter(shadeform.instances))
    assert ident in json.dumps(created)

    cli("extend", f"shadeform/{ident}", "--by", "2h", "--yes", "--json")
    [(_, _, update)] = [s for s in shadeform.seen if s[1].endswith("/update")]
    moved = datetime.fromisoformat(update["auto_delete"]["date_threshold"].replace("Z", "+00:00"))
    assert moved == date + timedelta(hours=2)
    assert update["auto_delete"]["spend_threshold"] == "50.00"  # the cap is kept
    assert shadeform.instances[ident]["auto_delete"]["date_threshold"] == \
        update["auto_delete"]["date_threshold"]

    listed = cli("list", "--provider", "shadeform", "--json")
    assert ident in json.dumps(listed)

    cli("delete", f"shadeform/{ident}", "--yes", "--json")
    assert shadeform.instances[ident]["status"] == "deleting"
    assert ("POST", f"/v1/instances/{ident}/delete", None) in shadeform.seen


def test_a_create_without_a_deadline_sends_no_auto_delete(shadeform):
    cli("create", "--gpu", "h100", "--count", "8", "--provider", "shadeform",
        "--auto-shutdown", "never", "--yes", "--json")
    [(_, _, sent)] = [s for s in shadeform.seen if s[1] == "/v1/instances/create"]
    assert "auto_delete" not in sent
    assert not any(t.startswith("gpucloud-shutdown-at=") for t in sent["tags"])


def test_the_plan_knows_shadeform_holds_the_deadline(shadeform):
    # native_shutdown: no "has no native timer" note, unlike the other real clouds.
    plan = cli("create", "--gpu", "h100", "--count", "8", "--provider", "shadeform",
               "--auto-shutdown", "2h", "--dry-run", "--json")
    text = json.dumps(plan)
    assert "lambdalabs_H100x8" in text and "no native timer" not in text
    assert not [s for s in shadeform.seen if s[0] == "POST"]  # a dry run creates nothing


def test_a_two_node_job_is_one_batch_registering_one_key(shadeform, tmp_path, monkeypatch):
    """Both nodes in one region as one batch, every request valid against the
    document; on a new account both launches may try to register the key, and
    Shadeform keeps one of a name: the job still runs on both, with that key."""
    calls = _fake_ssh.install(tmp_path, monkeypatch)
    job = tmp_path / "pair.yaml"
    job.write_text(json.dumps({"name": "pair", "image": "busybox", "nodes": 2,
                               "command": ["python", "train.py"], "max_runtime": "2h",
                               "resources": {"gpu": "h100", "gpu_count": 8}}))
    submitted = cli("submit", str(job), "--provider", "shadeform", "--yes", "--json")
    assert submitted["job"]["nodes"] == 2
    creates = [sent for (_, path, sent) in shadeform.seen if path == "/v1/instances/create"]
    assert sorted(c["name"] for c in creates) == ["pair-node0", "pair-node1"]
    assert {c["region"] for c in creates} == {"us-south-2"}
    [key] = shadeform.keys
    assert {c["ssh_key_id"] for c in creates} == {key["id"]}
    scripts = _fake_ssh.scripts(calls)
    assert len(scripts) == 2
    assert all("export NNODES=2" in s and "--network host" in s for s in scripts)
