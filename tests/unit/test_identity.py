"""Who acts (config/identity.py): GPUCLOUD_USER, else the OS user, else a
name made of the uid where there is no passwd entry (a container run as an
arbitrary uid); and the SDK's project= and list(mine=), sync and async,
journaled and filtered by it."""

from __future__ import annotations

import asyncio
import getpass
import os
import sqlite3

import pytest

from gpucloud import AsyncClient, Client, SpecError
from gpucloud.config.identity import check_project, who
from gpucloud.config.settings import state_db_path

SANDBOX = dict(gpu="h100", count=8, provider="sandbox", auto_shutdown="1h")


def test_gpucloud_user_names_the_user(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_USER", "alice")
    me = who()
    assert me.user == "alice" and me.host


def test_without_it_the_os_user(monkeypatch):
    monkeypatch.setenv("USER", "olduser")
    monkeypatch.setenv("LOGNAME", "olduser")
    assert who().user == getpass.getuser() == "olduser"


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX uids")
@pytest.mark.parametrize("error", [KeyError("getpwuid(): uid not found: 12345"),
                                   OSError("No username set in the environment")])
def test_a_uid_without_a_passwd_entry_is_named_by_its_uid(monkeypatch, error):
    def no_entry() -> str:
        raise error
    monkeypatch.setattr(getpass, "getuser", no_entry)
    assert who().user == f"uid-{os.getuid()}"


def test_a_blank_gpucloud_user_is_not_a_name(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_USER", "  ")
    monkeypatch.setenv("USER", "olduser")
    monkeypatch.setenv("LOGNAME", "olduser")
    assert who().user == "olduser"


@pytest.mark.parametrize("name", ["vision", "nlp-2", "a.b_c", "x" * 40])
def test_project_names_that_pass(name):
    assert check_project(name) == name


@pytest.mark.parametrize("name", ["", "Vision", "-x", "a/b", "x" * 41, 7, None])
def test_project_names_refused_in_the_sdks_words(name):
    with pytest.raises(SpecError) as caught:
        check_project(name)
    assert "project=" in (caught.value.hint or "")


def journaled() -> list[tuple[str, str, str | None]]:
    db = sqlite3.connect(state_db_path())
    try:
        return db.execute("SELECT user_name, host, project FROM launches"
                          " ORDER BY created_at").fetchall()
    finally:
        db.close()


def test_the_sdk_journals_who_and_the_project_and_lists_mine(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_USER", "alice")
    with Client(["sandbox"]) as client:
        mine = client.create(**SANDBOX, name="a", project="vision")
    monkeypatch.setenv("GPUCLOUD_USER", "bob")
    with Client(["sandbox"]) as client:
        client.create(**SANDBOX, name="b")
        assert [m.name for m in client.list(mine=True)] == ["b"]
        assert sorted(m.name for m in client.list()) == ["a", "b"]
        with pytest.raises(SpecError):
            client.create(**SANDBOX, project="Not Valid")
    monkeypatch.setenv("GPUCLOUD_USER", "alice")
    with Client(["sandbox"]) as client:
        assert [m.id for m in client.list(mine=True)] == [mine.id]
        assert [m.id for m in client.iter_list(mine=True)] == [mine.id]
    rows = journaled()
    assert [(user, project) for user, _, project in rows] == [("alice", "vision"), ("bob", None)]
    assert all(host for _, host, _ in rows)


def test_the_async_client_takes_project_and_mine(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_USER", "carol")

    async def run() -> tuple[str, list[str]]:
        async with AsyncClient(["sandbox"]) as client:
            made = await client.create(**SANDBOX, project="speech")
            return made.id, [m.id async for m in client.iter_list(mine=True)]

    made, listed = asyncio.run(run())
    assert listed == [made]
    assert journaled() == [("carol", journaled()[0][1], "speech")]
