"""Which elector `reap --watch --lease KIND` gets (gpucloud.client.reaper_election):
the default follows the team state URL, the database kind is the store layer's
DatabaseLease(journal, interval), the Lease's namespace comes from [reaper]."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from gpucloud.client import reaper_election
from gpucloud.config.settings import load_config
from gpucloud.errors import ConfigurationError
from gpucloud.safety.election import Alone
from gpucloud.safety.journal import Journal


def write_config(text: str) -> None:
    home = Path(os.environ["GPUCLOUD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_the_default_kind_is_database_when_a_team_state_url_is_set(monkeypatch):
    monkeypatch.delenv("GPUCLOUD_STATE_URL", raising=False)
    assert reaper_election.default_kind(load_config()) == "none"
    write_config('[state]\nurl = "postgresql://db.example.com:5432/gpucloud"\n')
    assert reaper_election.state_url(load_config()) == "postgresql://db.example.com:5432/gpucloud"
    assert reaper_election.default_kind(load_config()) == "database"
    write_config("")
    monkeypatch.setenv("GPUCLOUD_STATE_URL", "postgresql://other/gpucloud")
    assert reaper_election.default_kind(load_config()) == "database"


def test_without_a_url_or_a_kind_the_reaper_is_alone(monkeypatch):
    monkeypatch.delenv("GPUCLOUD_STATE_URL", raising=False)
    assert isinstance(reaper_election.elector(None, 60, lease_seconds=60), Alone)


def test_the_database_kind_is_the_stores_lease_with_the_journal_and_interval(monkeypatch):
    made = []

    class DatabaseLease:
        kind = "database"

        def __init__(self, journal, interval):
            made.append((journal, interval))

    stand_in = types.ModuleType("gpucloud.safety.team_lease")
    stand_in.DatabaseLease = DatabaseLease  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpucloud.safety.team_lease", stand_in)
    monkeypatch.setenv("GPUCLOUD_STATE_URL", "postgresql://db/gpucloud")
    chosen = reaper_election.elector(None, 30.0, lease_seconds=30)
    assert isinstance(chosen, DatabaseLease)
    [(journal, interval)] = made
    assert isinstance(journal, Journal) and interval == 30.0


def test_a_gpucloud_without_the_database_lease_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "gpucloud.safety.team_lease", None)  # import fails
    with pytest.raises(ConfigurationError, match="no team-database lease") as info:
        reaper_election.elector("database", 60, lease_seconds=60)
    assert "--lease kubernetes" in (info.value.hint or "")


def test_the_lease_namespace_comes_from_the_reaper_section():
    assert reaper_election.lease_namespace(load_config()) is None
    write_config('[reaper]\nlease_namespace = "ops"\n')
    assert reaper_election.lease_namespace(load_config()) == "ops"
    write_config("[reaper]\nlease_namespace = 3\n")
    with pytest.raises(ConfigurationError, match="lease_namespace"):
        reaper_election.lease_namespace(load_config())
