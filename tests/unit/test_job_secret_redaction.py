"""A job's secret values never survive in what an error keeps: whatever field
name a provider puts them under (an env list, a start-up script, base64 user
data), and whatever message a provider echoes them in."""

from __future__ import annotations

import base64
import json
import pickle

import httpx
import pytest

from gpucloud.transport import redaction
from gpucloud.providers.base import Provider
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.errors import BadRequestError

SECRET = "pw-s3cr3t-db-0123"


@pytest.fixture(autouse=True)
def forget_registered(monkeypatch):
    monkeypatch.setattr(redaction, "_KNOWN", set())


def launch(body: dict, **extensions) -> httpx.Request:
    request = httpx.Request("POST", "https://api.example/pods", json=body)
    request.extensions.update(extensions)
    return request


SHAPES = {
    "env list": {"env": [{"key": "DATABASE_URL", "value": SECRET}]},
    "script": {"user_data": f"#!/bin/sh\ndocker run -e DATABASE_URL='{SECRET}' img\n"},
    "base64 script": {"user_data": base64.b64encode(
        f"#!/bin/sh\nexport DATABASE_URL={SECRET}\nexec run\n".encode()).decode()},
    "env string": {"onstart": f"env DATABASE_URL={SECRET} python train.py"},
}


@pytest.mark.parametrize("shape", SHAPES)
def test_registered_secret_values_are_replaced_in_any_body_shape(shape):
    redaction.register_secrets([SECRET])
    kept = BadRequestError("bad", provider="runpod", status_code=400,
                           request=launch(SHAPES[shape])).request
    assert SECRET.encode() not in kept.content
    assert redaction.REDACTED in json.dumps(json.loads(kept.content))


def test_a_request_can_name_its_secrets_itself():
    request = launch(SHAPES["env list"], **{redaction.SECRETS_EXTENSION: (SECRET,)})
    error = BadRequestError("bad", provider="runpod", status_code=400, request=request)
    blob = pickle.dumps(error)
    assert SECRET.encode() not in blob
    # The list of values itself is not kept either.
    assert redaction.SECRETS_EXTENSION not in error.request.extensions


def test_other_fields_are_kept():
    redaction.register_secrets([SECRET])
    kept = redaction.redact_request(launch({"image": "pytorch/pytorch", "gpu_count": 8}))
    assert json.loads(kept.content) == {"image": "pytorch/pytorch", "gpu_count": 8}


def test_tiny_values_are_not_scrubbed_everywhere():
    redaction.register_secrets(["1", "ab"])
    assert redaction.scrub("gpu_count 1 ab") == "gpu_count 1 ab"


def test_a_provider_message_echoing_a_secret_is_scrubbed():
    redaction.register_secrets([SECRET])
    provider = Provider(load_catalogs()["sandbox"], None)
    assert SECRET not in provider.redact(f"invalid env value {SECRET!r}")
