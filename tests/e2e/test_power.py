"""stop/start through the SDK and CLI, on a provider that has them (Vast.ai at the transport)."""

import json
from pathlib import Path

import httpx
import respx
from typer.testing import CliRunner

from gpucloud import Client, InstanceStatus
from gpucloud.cli import app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vastai"


def test_stop_then_start(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_VASTAI_API_KEY", "vast-key")
    shown = json.loads((FIXTURES / "show_instance_200_from_schema_examples.json").read_text())
    state = {"actual_status": "running", "intended_status": "running"}

    def show(request):
        return httpx.Response(200, json={"instances": {**shown["instances"], **state}})

    def change(request):
        wanted = json.loads(request.content)["state"]
        state.update(actual_status=wanted, intended_status=wanted)
        return httpx.Response(200, json={"success": True})

    with respx.mock(base_url="https://console.vast.ai", assert_all_called=False) as api:
        api.get("/api/v0/instances/883/").mock(side_effect=show)
        put = api.put("/api/v0/instances/883/").mock(side_effect=change)
        client = Client(sleep=lambda s: None)
        assert client.stop("vastai/883").status == InstanceStatus.STOPPED
        assert json.loads(put.calls.last.request.content) == {"state": "stopped"}
        result = CliRunner().invoke(app, ["start", "vastai/883", "--yes", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["instances"][0]["status"] == "running"
        assert json.loads(put.calls.last.request.content) == {"state": "running"}
        declined = CliRunner().invoke(app, ["start", "vastai/883", "--json"])
        assert json.loads(declined.stdout)["error"]["exit_code"] == 8
