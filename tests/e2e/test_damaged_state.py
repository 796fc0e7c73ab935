"""A damaged or unwritable journal: exit 3 with the file's
path and a fix before anything is created; listing and deleting still work
from the providers, with a warning; every delete is attempted."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from gpucloud import Client, StateError
from gpucloud.cli import app
from gpucloud.config.settings import state_db_path
from gpucloud.safety.journal import release


@pytest.fixture(autouse=True)
def separate_cloud(tmp_path, monkeypatch):
    # The simulated cloud is another party: its database stays healthy.
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", str(tmp_path / "cloud" / "cloud.sqlite"))


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def ended_writer() -> None:
    # The process that wrote the journal has exited: its connection is closed
    # and its write-ahead log folded into the file, which is what gets damaged.
    release()


def corrupt() -> None:
    ended_writer()
    path = state_db_path()
    path.write_bytes(b"this is not a database, it was overwritten by a careless script\n" * 64)


def truncate() -> None:
    ended_writer()
    path = state_db_path()
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size // 2)


def make_machines(n: int) -> list[str]:
    client = Client()
    return [client.create(gpu="h100", count=8, provider="sandbox").ref for _ in range(n)]


@pytest.mark.parametrize("damage", [corrupt, truncate])
def test_damaged_journal_lists_from_the_provider_and_refuses_to_create(damage):
    refs = make_machines(2)
    damage()
    listed = cli("list", "--json")
    assert listed.exit_code == 0, listed.output
    doc = json.loads(listed.stdout)
    assert {i["ref"] for i in doc["instances"]} == set(refs)
    assert any(str(state_db_path()) in w for w in doc["warnings"])
    text = cli("list")
    assert text.exit_code == 0 and "warning: state database" in text.stderr
    created = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox", "--yes")
    assert created.exit_code == 3, created.output
    assert str(state_db_path()) in created.stderr and "hint:" in created.stderr
    assert len(Client().list(provider="sandbox")) == 2  # nothing more was created


def test_every_delete_is_attempted_and_reported_with_a_broken_journal():
    first, second = make_machines(2)
    corrupt()
    result = cli("delete", first, "sandbox/i-does-not-exist", second, "--yes", "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 5, result.output
    assert doc["deleted"] == [first, second]
    assert [f["ref"] for f in doc["failed"]] == ["sandbox/i-does-not-exist"]
    assert doc["failed"][0]["error"]["exit_code"] == 5
    assert any("journal could not record" in w for w in doc["warnings"])
    statuses = {i.ref: i.status.value for i in Client().list(provider="sandbox")}
    assert statuses[first] in ("terminating", "terminated")
    assert statuses[second] in ("terminating", "terminated")
    text = cli("delete", first, "sandbox/i-nope", "--yes")
    assert f"deleting {first}" in text.stdout and "error: sandbox/i-nope" in text.stderr


def test_unwritable_home_is_exit_3_with_the_path(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("GPUCLOUD_HOME", str(blocker / "home"))
    result = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox", "--yes",
                 "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 3 and doc["error"]["code"] == "state", doc
    assert str(blocker / "home") in doc["error"]["message"]
    with pytest.raises(StateError) as err:
        Client().create(gpu="h100", count=8, provider="sandbox")
    assert err.value.path.startswith(str(blocker))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only files")
def test_read_only_journal_is_exit_3(monkeypatch):  # pragma: no cover - not as root
    make_machines(1)
    state_db_path().chmod(0o400)
    result = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox", "--yes")
    assert result.exit_code == 3
