"""What a call costs besides its request: the work done again on every call
must be work whose answer can change. Lambda answers through respx at the
HTTP transport, from the contract fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import respx

from gpucloud import Client
from gpucloud.config.credentials import KEYRING_SERVICE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lambda"
BASE = "https://cloud.lambda.ai/api/v1"


def fixture(name):
    return json.loads((FIXTURES / name).read_text())


def test_a_key_from_the_keyring_is_read_once_for_many_calls(isolated, monkeypatch):
    # `isolated` (tests/conftest.py) is the in-memory keyring in use.
    isolated.set_password(KEYRING_SERVICE, "lambda", "sk-from-the-keyring")
    reads: list[str] = []
    real_get = isolated.get_password
    monkeypatch.setattr(isolated, "get_password",
                        lambda service, user: reads.append(user) or real_get(service, user))
    machine = fixture("get_instance_200.json")
    with respx.mock(assert_all_called=True) as router:
        route = router.get(f"{BASE}/instances/{machine['data']['id']}").mock(
            return_value=httpx.Response(200, json=machine))
        client = Client(["lambda"])
        client.get(f"lambda/{machine['data']['id']}")
        first = len(reads)  # the first call finds the key (and makes the adapter with it)
        for _ in range(4):
            assert client.get(f"lambda/{machine['data']['id']}").id == machine["data"]["id"]
    assert route.call_count == 5
    assert all(r.headers["Authorization"] == "Bearer sk-from-the-keyring" for r, _ in route.calls)
    assert 1 <= first <= 2 and len(reads) == first


def test_a_provider_without_credentials_is_still_refused_on_every_call():
    # Guard for the test above: only a credential found is remembered.
    import pytest

    from gpucloud import CredentialsError

    client = Client(["lambda"])
    for _ in range(2):
        with pytest.raises(CredentialsError):
            client.get("lambda/0920582c7ff041399e34823a0be62549")
