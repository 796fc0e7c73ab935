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


def test_the_deadline_a_get_reads_is_that_of_the_latest_launch(monkeypatch):
    """Journal.deadline (read by every get of a machine whose provider shows
    no deadline) answers as by_instance's record does, without building it."""
    from datetime import datetime, timezone

    from gpucloud.config.settings import state_db_path
    from gpucloud.safety import journal as journal_mod
    from gpucloud.safety.journal import Journal

    journal = Journal(state_db_path())
    assert journal.deadline("lambda", "i-1") is None
    assert not journal.path.exists()  # reading never creates the journal
    first, later = (datetime(2027, 1, d, tzinfo=timezone.utc) for d in (15, 16))
    clock = iter([datetime(2027, 1, 1, h, tzinfo=timezone.utc) for h in range(1, 9)])
    monkeypatch.setattr(journal_mod, "utcnow", lambda: next(clock))
    for launch, deadline in (("L-1", first), ("L-2", later)):  # the same machine, relaunched
        journal.record_intent(launch_id=launch, provider="lambda", instance_type="t",
                              region="r", name="m", price_per_hour="1.00", shutdown_at=deadline)
        journal.mark(launch, "delivered", instance_id="i-1")
    journal.record_intent(launch_id="L-3", provider="lambda", instance_type="t", region="r",
                          name="n", price_per_hour="1.00", shutdown_at=None)
    journal.mark("L-3", "delivered", instance_id="i-3")
    for ident in ("i-1", "i-3", "i-absent"):
        record = journal.by_instance("lambda", ident)
        assert journal.deadline("lambda", ident) == (record.shutdown_at if record else None)
    assert journal.deadline("lambda", "i-1") == later
    assert journal.deadline("runpod", "i-1") is None
