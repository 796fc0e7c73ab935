"""Which elector `reap --watch --lease KIND` gets (gpucloud.client.reaper_election):
the default follows the team state URL, the database kind is the team
database's lock (DatabaseLease), the Lease's namespace comes from [reaper]."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpucloud.client import reaper_election
from gpucloud.config.settings import load_config
from gpucloud.config.settings import state_url
from gpucloud.errors import ConfigurationError, StateError
from gpucloud.safety.election import Alone
from gpucloud.safety.team_lease import DatabaseLease


def write_config(text: str) -> None:
    home = Path(os.environ["GPUCLOUD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_the_default_kind_is_database_when_a_team_state_url_is_set(monkeypatch):
    monkeypatch.delenv("GPUCLOUD_STATE_URL", raising=False)
    assert reaper_election.default_kind(load_config()) == "none"
    write_config('[state]\nurl = "postgresql://db.example.com:5432/gpucloud"\n')
    assert state_url(load_config()) == "postgresql://db.example.com:5432/gpucloud"
    assert reaper_election.default_kind(load_config()) == "database"
    write_config("")
    monkeypatch.setenv("GPUCLOUD_STATE_URL", "postgresql://other/gpucloud")
    assert reaper_election.default_kind(load_config()) == "database"


def test_without_a_url_or_a_kind_the_reaper_is_alone(monkeypatch):
    monkeypatch.delenv("GPUCLOUD_STATE_URL", raising=False)
    assert isinstance(reaper_election.elector(None, 60, lease_seconds=60), Alone)


def test_the_database_kind_is_the_team_databases_lock(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_STATE_URL", "postgresql://alice@db.example.com/gpucloud")
    chosen = reaper_election.elector(None, 30.0, lease_seconds=30)
    assert isinstance(chosen, DatabaseLease) and chosen.interval == 30.0
    assert chosen.store.shown == "postgresql://alice@db.example.com/gpucloud"


def test_the_database_kind_without_a_team_database_says_so(monkeypatch):
    monkeypatch.delenv("GPUCLOUD_STATE_URL", raising=False)
    with pytest.raises(StateError, match="team database") as info:
        reaper_election.elector("database", 60, lease_seconds=60)
    assert "--lease kubernetes" in (info.value.hint or "")


def test_the_lease_namespace_comes_from_the_reaper_section():
    assert reaper_election.lease_namespace(load_config()) is None
    write_config('[reaper]\nlease_namespace = "ops"\n')
    assert reaper_election.lease_namespace(load_config()) == "ops"
    write_config("[reaper]\nlease_namespace = 3\n")
    with pytest.raises(ConfigurationError, match="lease_namespace"):
        reaper_election.lease_namespace(load_config())
