"""GPUCLOUD_SANDBOX_REQUEST_LOG: every request to the simulated cloud, from
every process sharing it, one line in one file; what tests count across
processes (several reapers: one DELETE per machine)."""

from __future__ import annotations

import httpx

from gpucloud.providers.sandbox.knobs import Knobs
from gpucloud.providers.sandbox.server import SandboxCloud, SandboxTransport


def test_two_clouds_on_one_file_append_every_request_to_one_log(tmp_path, monkeypatch):
    log = tmp_path / "requests.log"
    monkeypatch.setenv("GPUCLOUD_SANDBOX_REQUEST_LOG", str(log))
    knobs = Knobs.load()
    assert knobs.request_log == str(log)
    first, second = (SandboxCloud(tmp_path / "cloud.sqlite", knobs) for _ in range(2))
    base = "https://sandbox.gpucloud.invalid"
    with httpx.Client(transport=SandboxTransport(first), base_url=base) as a, \
            httpx.Client(transport=SandboxTransport(second), base_url=base) as b:
        made = a.post("/v1/instances", json={"instance_type": "sim.1xH100",
                                              "region": "sim-east-1", "name": "x",
                                              "labels": {}})
        assert made.status_code == 201, made.text
        ident = made.json()["id"]
        assert b.delete(f"/v1/instances/{ident}").status_code == 202
        assert a.delete("/v1/instances/nope").status_code == 404
    assert log.read_text().splitlines() == [
        "POST /v1/instances 201", f"DELETE /v1/instances/{ident} 202",
        "DELETE /v1/instances/nope 404"]


def test_without_the_knob_nothing_is_written(tmp_path):
    assert Knobs.load(environ={}).request_log is None
