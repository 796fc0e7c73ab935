"""A provider's unexpected reply shape is
APIResponseValidationError (exit 10), never a crash (exit 1), and a launch
it answers keeps its launch id in the error and in the journal."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud import APIResponseValidationError, Client
from gpucloud.cli import app
from gpucloud.config.settings import state_db_path
from gpucloud.safety.journal import Journal

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lambda"
PUBKEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZ1bm55IGtleSBmb3IgZ3B1Y2xvdWQgdGVzdHMhIQ== "
          "me@laptop")
NESTED = "[" * 100_000 + "]" * 100_000

BAD_LISTS = {
    "wrong types": {"data": [{"id": 5, "tags": 5, "status": ["active"], "region": 7}]},
    "html on 200": "<html><body>Service temporarily unavailable</body></html>",
    "nesting bomb": NESTED,
    "huge numbers": {"data": [{**json.loads((FIXTURES / "get_instance_200.json").read_text())
                               ["data"], "tags": [{"key": "gpucloud-shutdown-at",
                                                   "value": "9" * 5000}], "id": 10 ** 400}]},
    "null data": {"data": None},
}


def no_sleep(_: float) -> None:
    return None


def fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


def answer(payload):
    if isinstance(payload, str):
        return httpx.Response(200, text=payload, headers={"content-type": "application/json"})
    return httpx.Response(200, json=payload)


@pytest.fixture
def lambda_key(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "k-test")
    monkeypatch.setattr(time, "sleep", no_sleep)
    ssh = Path.home() / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519.pub").write_text(PUBKEY + "\n")


@pytest.mark.parametrize("shape", sorted(BAD_LISTS))
def test_one_bad_listing_is_a_warning_others_are_listed(lambda_key, shape):
    sandbox = Client(providers=["sandbox"])
    machine = sandbox.create(gpu="h100", count=8, provider="sandbox")
    with respx.mock(assert_all_called=False) as router:
        router.get("https://cloud.lambda.ai/api/v1/instances").mock(
            return_value=answer(BAD_LISTS[shape]))
        client = Client(providers=["lambda", "sandbox"], sleep=no_sleep)
        listed = client.list()
        assert [i.ref for i in listed] == [machine.ref]
        assert any(w.startswith("lambda: could not list") for w in client.warnings)
        with pytest.raises(APIResponseValidationError):
            client.list(provider="lambda")
        result = CliRunner().invoke(app, ["list", "--provider", "lambda"])
        assert result.exit_code == 10, result.output
        assert "Traceback" not in result.output


@pytest.mark.parametrize("reply", [
    "<html>oops</html>", {"data": {"instance_ids": 5}}, {"data": None}, NESTED])
def test_a_bad_launch_reply_keeps_the_launch_id(lambda_key, reply):
    with respx.mock(assert_all_called=False) as router:
        router.get("https://cloud.lambda.ai/api/v1/instance-types").mock(
            return_value=httpx.Response(200, json=fixture("list_instance_types_200.json")))
        router.get("https://cloud.lambda.ai/api/v1/ssh-keys").mock(
            return_value=httpx.Response(200, json=fixture("list_ssh_keys_200.json")))
        router.post("https://cloud.lambda.ai/api/v1/ssh-keys").mock(
            return_value=httpx.Response(200, json={"data": {
                "id": "k" * 32, "name": "x", "public_key": PUBKEY}}))
        launch = router.post("https://cloud.lambda.ai/api/v1/instance-operations/launch").mock(
            return_value=answer(reply))
        router.get("https://cloud.lambda.ai/api/v1/instances").mock(
            return_value=httpx.Response(200, json={"data": []}))
        result = CliRunner().invoke(app, ["create", "--gpu", "h100", "--count", "8",
                                          "--provider", "lambda", "--yes", "--json"])
    assert launch.call_count == 1  # never re-sent
    doc = json.loads(result.stdout)
    assert result.exit_code == 10 and doc["error"]["code"] == "invalid_response"
    launch_id = doc["launch_id"]
    assert launch_id.startswith("gc-") and launch_id in doc["error"]["hint"]
    record = Journal(state_db_path()).get(launch_id)
    assert record is not None and record.status == "ambiguous"
    assert doc["attempts"][-1]["launch_id"] == launch_id
