"""What the sandbox does per request besides the request's own work: it looks
once at which file its kept connection belongs to, and encodes its answer with
one JSON encoder made once, not one built per answer. The answers are the
same JSON, with the same headers. (A file replaced under a kept connection is
still read afresh: test_sandbox_connections.py.)"""

from __future__ import annotations

import json

import pytest

from gpucloud.providers.sandbox import storage
from tests.adapters._sandbox_support import (  # noqa: F401 (fixtures)
    Env,
    _no_sandbox_env,
    catalog,
    clock,
)


@pytest.fixture
def env(tmp_path, catalog, clock):
    return Env(tmp_path / "c.sqlite", catalog, clock, capacity=100)


def test_a_request_looks_at_the_file_once(env, monkeypatch):
    machine = env.create(launch_id="L-1")
    looks: list[object] = []
    real = storage._stamp
    monkeypatch.setattr(storage, "_stamp", lambda path: looks.append(path) or real(path))
    assert env.raw("GET", f"/v1/instances/{machine.id}").status_code == 200
    assert len(looks) == 1
    looks.clear()
    assert env.raw("DELETE", f"/v1/instances/{machine.id}").status_code == 202
    assert len(looks) == 1


def test_answers_are_encoded_without_building_an_encoder_each(env, monkeypatch):
    machine = env.create(launch_id="L-1")
    built: list[object] = []
    real = json.JSONEncoder.__init__

    def init(self, *args, **kwargs):
        built.append(kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(json.JSONEncoder, "__init__", init)
    got = env.raw("GET", f"/v1/instances/{machine.id}")
    missing = env.raw("GET", "/v1/instances/sbx-missing")
    monkeypatch.undo()
    assert built == []
    assert got.status_code == 200 and got.json()["id"] == machine.id
    assert got.headers["content-type"] == "application/json"
    assert int(got.headers["content-length"]) == len(got.content)
    assert got.headers["x-request-id"].startswith("req_")
    assert len(got.headers["x-request-id"]) == len("req_") + 20
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
