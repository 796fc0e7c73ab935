"""`gpucloud reconcile` on the command line, and the warning every command that
lists machines gives while launches are unresolved."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.cli import app
from gpucloud.cli.commands import instance as instance_cmds, reconcile as reconcile_cmds
from gpucloud.config.settings import state_db_path
from gpucloud.safety.journal import release
from tests.unit._reconcile_support import crashed, create, journaled_as, live, phantom


@pytest.fixture(autouse=True)
def shared_cloud(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", str(tmp_path / "cloud" / "cloud.sqlite"))


def cli(*args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), input=input)


def at_a_terminal(monkeypatch):
    monkeypatch.setattr(instance_cmds, "_interactive", lambda: True)
    monkeypatch.setattr(reconcile_cmds, "_interactive", lambda: True)


def test_text_report_names_what_was_adopted_and_what_is_pending():
    machine = crashed()
    launch_id = phantom()
    result = cli("reconcile")
    assert result.exit_code == 0, result.output
    assert f"adopted {machine.ref} (launch id {machine.launch_id}" in result.stdout
    assert f"pending sandbox launch id {launch_id}" in result.stdout
    again = cli("reconcile")
    assert "adopted" not in again.stdout
    assert f"pending sandbox launch id {launch_id}" in again.stdout


def test_nothing_to_do_says_what_was_listed():
    create()
    result = cli("reconcile")
    assert result.exit_code == 0 and "nothing to reconcile (sandbox listed)" in result.stderr


def test_terminating_orphans_under_json_needs_yes_and_does_nothing_without(monkeypatch):
    orphan = create()
    journaled_as(orphan, "failed")
    refused = cli("reconcile", "--terminate-orphans", "--json")
    assert refused.exit_code == 8 and refused.stderr == ""
    assert json.loads(refused.stdout)["error"]["code"] == "confirmation_required"
    assert orphan.ref in live()
    done = cli("reconcile", "--terminate-orphans", "--yes", "--json")
    assert done.exit_code == 0 and done.stderr == ""
    doc = json.loads(done.stdout)
    assert [i["ref"] for i in doc["terminated"]] == [orphan.ref]
    assert [o["instance"]["ref"] for o in doc["orphans"]] == [orphan.ref]
    assert orphan.ref not in live()


def test_at_a_terminal_the_orphans_are_shown_then_confirmed(monkeypatch):
    at_a_terminal(monkeypatch)
    orphan = create()
    journaled_as(orphan, "deleted")
    declined = cli("reconcile", "--terminate-orphans", input="n\n")
    assert declined.exit_code == 8
    assert f"orphan  {orphan.ref}" in declined.stdout and orphan.ref in declined.stderr
    assert orphan.ref in live()
    accepted = cli("reconcile", "--terminate-orphans", input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert f"terminated {orphan.ref}" in accepted.stdout
    assert orphan.ref not in live()


def test_without_a_terminal_terminating_needs_yes():
    orphan = create()
    journaled_as(orphan, "failed")
    result = cli("reconcile", "--terminate-orphans")
    assert result.exit_code == 8 and "--yes" in result.stderr
    assert orphan.ref in live()


def test_list_get_and_reap_point_to_reconcile_while_launches_are_unresolved():
    machine = create(name="kept")
    lost = crashed()
    client = Client()
    client.list()
    [warning] = client.warnings
    assert lost.launch_id in warning and "`gpucloud reconcile`" in warning
    assert lost.launch_id in " ".join(Client().reap(dry_run=True).warnings)
    listed = cli("list", "--json")
    assert any(lost.launch_id in w for w in json.loads(listed.stdout)["warnings"])
    shown = cli("get", "kept")
    assert shown.exit_code == 0 and machine.ref in shown.stdout
    assert "gpucloud reconcile" in shown.stderr
    cli("reconcile")
    client.list()
    assert client.warnings == []


def test_many_unresolved_launches_are_counted_not_all_named():
    ids = [phantom() for _ in range(7)]
    client = Client()
    client.list()
    [warning] = client.warnings
    assert warning.startswith("7 launches were sent but never recorded")
    assert ids[0] in warning and ids[-1] not in warning and "and 2 more" in warning


def test_listing_never_creates_a_journal():
    Client().list(provider="sandbox")
    assert not state_db_path().exists()


def test_a_damaged_journal_is_a_warning_in_list_and_exit_3_in_reconcile():
    create()
    release()  # the process that wrote it has exited (its write-ahead log folded in)
    state_db_path().write_bytes(b"not a database" * 100)
    listed = cli("list", "--json")
    assert listed.exit_code == 0
    assert any(str(state_db_path()) in w for w in json.loads(listed.stdout)["warnings"])
    result = cli("reconcile", "--json")
    assert result.exit_code == 3
    assert str(state_db_path()) in json.loads(result.stdout)["error"]["message"]
