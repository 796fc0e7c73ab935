"""Two users on one home, each `gpucloud` a process of its own: every launch
names who made it (GPUCLOUD_USER) and for which project, and the budgets of
config.toml apply per user and per project beside the total.

The sandbox 8x H100 costs $19.92 an hour, so a 1-hour create commits $19.92
and a budget of $25 fits one such machine, not two."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from .test_reconcile_sigkill import cloud_rows, environment

CREATE = ["create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
          "--auto-shutdown", "1h", "--yes"]
ROOM = {"GPUCLOUD_SANDBOX_CAPACITY": "50"}


def run(env: dict[str, str], user: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    mine = dict(env) | ROOM
    if user is not None:
        mine["GPUCLOUD_USER"] = user
    return subprocess.run([sys.executable, "-m", "gpucloud", *args], env=mine,
                          capture_output=True, text=True, timeout=120)


def home_with(tmp_path: Path, config: str) -> dict[str, str]:
    env = environment(tmp_path)
    home = Path(env["GPUCLOUD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config)
    return env


def launches(env: dict[str, str]) -> list[tuple[str, str | None, str | None, str | None]]:
    """(status, user_name, host, project) of every launch in the home's journal."""
    db = sqlite3.connect(Path(env["GPUCLOUD_HOME"]) / "state.sqlite")
    try:
        return db.execute("SELECT status, user_name, host, project FROM launches"
                          " ORDER BY created_at").fetchall()
    finally:
        db.close()


def test_alices_budget_refuses_her_second_machine_while_bob_still_creates(tmp_path):
    env = home_with(tmp_path, '[budget]\nmonthly = "500"\n[budget.users]\nalice = "25"\n')
    first = run(env, "alice", *CREATE)
    assert first.returncode == 0, first.stderr
    second = run(env, "alice", *CREATE)
    assert second.returncode == 7, second.stderr
    assert "over user alice's monthly budget $25.00" in second.stderr
    assert "committed $19.9" in second.stderr and "this request $19.92" in second.stderr
    assert "alice in [budget.users]" in second.stderr  # the hint names what to raise
    bob = run(env, "bob", *CREATE)  # bob has no budget of his own; the total fits
    assert bob.returncode == 0, bob.stderr
    made = [(r[0], r[1]) for r in launches(env)]
    assert made == [("delivered", "alice"), ("delivered", "bob")]
    assert len(cloud_rows(env)) == 2
    # Every intent names its host too (a label: the machine the CLI ran on).
    assert all(r[2] for r in launches(env))


def test_the_total_still_applies_to_a_user_without_a_budget_of_their_own(tmp_path):
    env = home_with(tmp_path, '[budget]\nmonthly = "25"\n[budget.users]\nalice = "1000"\n')
    assert run(env, "alice", *CREATE).returncode == 0
    bob = run(env, "bob", *CREATE)
    assert bob.returncode == 7
    assert "over the monthly budget $25.00" in bob.stderr and "user " not in bob.stderr


def test_a_project_budget_counts_the_projects_machines_whoever_made_them(tmp_path):
    env = home_with(tmp_path, '[budget.projects]\nvision = "25"\n')
    assert run(env, "alice", *CREATE, "--project", "vision").returncode == 0
    refused = run(env, "bob", *CREATE, "--project", "vision")
    assert refused.returncode == 7, refused.stderr
    assert "over project vision's monthly budget $25.00" in refused.stderr
    assert "vision in [budget.projects]" in refused.stderr
    # Another project, or none, is not held to vision's budget.
    assert run(env, "bob", *CREATE, "--project", "speech").returncode == 0
    assert run(env, "bob", *CREATE).returncode == 0
    assert [(r[1], r[3]) for r in launches(env)] == [
        ("alice", "vision"), ("bob", "speech"), ("bob", None)]


def test_an_extend_is_held_to_the_budget_of_the_machines_owner(tmp_path):
    env = home_with(tmp_path, '[budget.users]\nalice = "25"\nbob = "1000"\n')
    made = run(env, "alice", *CREATE, "--name", "a1", "--json")
    assert made.returncode == 0, made.stderr
    ref = json.loads(made.stdout)["instance"]["ref"]
    # bob moves alice's deadline: the hour more bills to alice, over her $25.
    refused = run(env, "bob", "extend", ref, "--by", "1h", "--yes")
    assert refused.returncode == 7, refused.stderr
    assert "over user alice's monthly budget $25.00" in refused.stderr
    assert run(env, "alice", "extend", ref, "--by", "10m", "--yes").returncode == 0


def test_a_batch_create_is_journaled_and_budgeted_under_its_project(tmp_path):
    env = home_with(tmp_path, '[budget.projects]\nvision = "90"\n')
    made = run(env, "alice", *CREATE, "--instances", "2", "--project", "vision")
    assert made.returncode == 0, made.stderr
    assert [(r[1], r[3]) for r in launches(env)] == [("alice", "vision")] * 2
    # $39.84 committed + 3 x $19.92 > $90: refused before anything is sent.
    refused = run(env, "bob", *CREATE, "--instances", "3", "--project", "vision")
    assert refused.returncode == 7, refused.stderr
    assert "over project vision's monthly budget $90.00" in refused.stderr
    assert len(cloud_rows(env)) == 2


JOB = """name: tiny
image: python:3.12-slim
command: [python, -c, "print(1)"]
resources:
  gpu: h100
  gpu_count: 8
max_runtime: 1h
"""


def test_submit_takes_a_project_and_is_held_to_its_budget(tmp_path):
    env = home_with(tmp_path, '[budget.projects]\nvision = "25"\n')
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    submit = ["submit", str(job), "--provider", "sandbox", "--yes", "--project", "vision"]
    first = run(env, "alice", *submit)
    assert first.returncode == 0, first.stderr
    assert [(r[1], r[3]) for r in launches(env)] == [("alice", "vision")]
    second = run(env, "bob", *submit)
    assert second.returncode == 7, second.stderr
    assert "over project vision's monthly budget $25.00" in second.stderr
    bad = run(env, "bob", "submit", str(job), "--provider", "sandbox", "--yes",
              "--project", "No Good")
    assert bad.returncode == 2 and "project name" in bad.stderr


def test_a_dry_run_shows_every_budget_that_applies(tmp_path):
    env = home_with(tmp_path, '[budget]\nmonthly = "500"\n[budget.users]\nalice = "100"\n'
                              '[budget.projects]\nvision = "300"\n')
    shown = run(env, "alice", *CREATE, "--project", "vision", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    for name in ("monthly budget $500.00", "user alice's monthly budget $100.00",
                 "project vision's monthly budget $300.00"):
        assert name in shown.stdout


@pytest.mark.parametrize("name", ["Vision", "a b", "-x", "x" * 41, "../etc"])
def test_a_bad_project_name_is_refused_with_a_hint(tmp_path, name):
    env = home_with(tmp_path, "")
    result = run(env, "alice", *CREATE, "--project", name)
    assert result.returncode == 2, result.stderr
    assert "project name" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr
    assert cloud_rows(env) == []


@pytest.mark.parametrize("config, key", [
    ('[budget.users]\nalice = "lots"\n', "budget.users.alice"),
    ('[budget.users]\nalice = "-5"\n', "budget.users.alice"),
    ('[budget.projects]\nvision = true\n', "budget.projects.vision"),
    ('[budget.projects]\n"Not A Slug" = "10"\n', "budget.projects.Not A Slug"),
    ('[budget]\nusers = "2000"\n', "budget.users must be a table"),
])
def test_a_bad_per_user_or_project_budget_is_a_clear_config_error(tmp_path, config, key):
    env = home_with(tmp_path, config)
    result = run(env, "alice", *CREATE, "--dry-run")
    assert result.returncode == 3, result.stderr
    assert key in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.stderr


def test_list_mine_shows_only_the_machines_this_user_launched(tmp_path):
    env = home_with(tmp_path, "")
    assert run(env, "alice", *CREATE, "--name", "a1").returncode == 0
    assert run(env, "bob", *CREATE, "--name", "b1").returncode == 0
    # Made by "alice" from another home on the same cloud: not in this
    # journal, so nobody's here, and never listed as mine.
    other = env | {"GPUCLOUD_HOME": str(tmp_path / "other-home")}
    assert run(other, "alice", *CREATE, "--name", "elsewhere").returncode == 0

    def names(user: str, *more: str) -> list[str]:
        result = run(env, user, "list", "--json", *more)
        assert result.returncode == 0, result.stderr
        return sorted(m["name"] for m in json.loads(result.stdout)["instances"])

    assert names("alice") == ["a1", "b1", "elsewhere"]
    assert names("alice", "--mine") == ["a1"]
    assert names("bob", "--mine") == ["b1"]
    assert names("carol", "--mine") == []
    text = run(env, "bob", "list", "--mine")
    # Whole words: a machine's random id may hold "a1" (sbx-aa1a9df0356f).
    words = text.stdout.split()
    assert "b1" in words and "a1" not in words


def test_costs_by_user_and_by_project_add_up_to_the_total(tmp_path):
    env = home_with(tmp_path, "")
    assert run(env, "alice", *CREATE, "--project", "vision").returncode == 0
    assert run(env, "alice", *CREATE).returncode == 0
    assert run(env, "bob", *CREATE, "--project", "vision").returncode == 0
    by_user = json.loads(run(env, "alice", "costs", "--by", "user", "--json").stdout)
    lines = {line["key"]: line for line in by_user["lines"]}
    assert sorted(lines) == ["alice", "bob"]
    assert len(lines["alice"]["instances"]) == 2 and len(lines["bob"]["instances"]) == 1
    total = Decimal(by_user["total"])
    assert total > 0
    # Each line is rounded to the cent on its own: they meet the total within
    # a cent per line after the first, and no machine is left out or counted twice.
    parts = sum(Decimal(line["total"]) for line in lines.values())
    assert abs(parts - total) <= Decimal("0.01") * (len(lines) - 1)
    by_project = json.loads(run(env, "bob", "costs", "--by", "project", "--json").stdout)
    keys = {line["key"]: len(line["instances"]) for line in by_project["lines"]}
    assert keys == {"vision": 2, "(no project)": 1}
    parts = sum(Decimal(line["total"]) for line in by_project["lines"])
    assert abs(parts - Decimal(by_project["total"])) <= Decimal("0.01")
    text = run(env, "alice", "costs", "--by", "user")
    assert text.returncode == 0 and "USER" in text.stdout and "bob" in text.stdout


def test_racing_creates_keep_alices_budget_and_never_block_bob(tmp_path):
    """Admission, the user's check included, is one exclusive transaction:
    alice's five racing creates make exactly the two her budget fits
    ($9.96 each for 30 minutes, $25), and bob's three, racing with them, all
    pass."""
    env = home_with(tmp_path, '[budget.users]\nalice = "25"\n') | {
        "GPUCLOUD_SANDBOX_HANG_AFTER_CREATE": "1"}
    argv = [*CREATE[:CREATE.index("--auto-shutdown")], "--auto-shutdown", "30m", "--yes"]
    users = ["alice"] * 5 + ["bob"] * 3
    gate = threading.Barrier(len(users))
    results: list[subprocess.CompletedProcess[str] | None] = [None] * len(users)

    def one(i: int) -> None:
        gate.wait()
        results[i] = run(env, users[i], *argv)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(users))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = {user: sorted(r.returncode for u, r in zip(users, results) if u == user and r)
             for user in ("alice", "bob")}
    assert codes == {"alice": [0, 0, 7, 7, 7], "bob": [0, 0, 0]}
    refused = [r.stderr for u, r in zip(users, results) if r and r.returncode == 7]
    assert all("user alice's monthly budget $25.00" in message for message in refused)
    assert sorted(r[1] for r in launches(env) if r[0] == "delivered") == \
        ["alice", "alice", "bob", "bob", "bob"]
    assert len(cloud_rows(env)) == 5


# The state file as gpucloud made it before owners were recorded: these
# statements are that release's (safety/journal.py, safety/ledger.py,
# safety/ledger_volumes.py), with the journal's columns added by then.
OLD_SCHEMA = """
CREATE TABLE launches (
    launch_id     TEXT PRIMARY KEY,
    provider      TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    region        TEXT NOT NULL,
    name          TEXT,
    status        TEXT NOT NULL,
    instance_id   TEXT,
    price_per_hour TEXT,
    shutdown_at   TEXT,
    error         TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    batch_key TEXT, slot INTEGER, ssh_key_path TEXT, committed TEXT
);
CREATE INDEX launches_instance ON launches (provider, instance_id);
CREATE TABLE ledger (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    at            TEXT NOT NULL,
    provider      TEXT NOT NULL,
    instance_id   TEXT NOT NULL,
    event         TEXT NOT NULL,
    source        TEXT NOT NULL,
    state         TEXT NOT NULL,
    price_per_hour TEXT,
    stopped_price_per_hour TEXT,
    shutdown_at   TEXT,
    name          TEXT,
    instance_type TEXT,
    region        TEXT,
    launch_id     TEXT,
    simulated     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE volume_ledger (
    provider        TEXT NOT NULL,
    volume_id       TEXT NOT NULL,
    name            TEXT NOT NULL,
    region          TEXT,
    size_gb         INTEGER NOT NULL,
    price_per_gb_month TEXT,
    hours_per_month INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    deleted_at      TEXT,
    last_attached_at TEXT,
    source          TEXT NOT NULL,
    job_ref         TEXT,
    simulated       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (provider, volume_id)
);
"""


def columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def test_an_old_state_file_gains_the_owner_columns_and_keeps_working(tmp_path):
    env = home_with(tmp_path, '[budget]\nmonthly = "500"\n[budget.users]\nalice = "25"\n')
    state = Path(env["GPUCLOUD_HOME"]) / "state.sqlite"
    now = datetime.now(timezone.utc)
    two_hours_ago = (now - timedelta(hours=2)).isoformat()
    db = sqlite3.connect(state)
    db.executescript(OLD_SCHEMA)
    # A machine launched by the old release, ended an hour later: $1.00/h for 1 h.
    db.execute("INSERT INTO launches (launch_id, provider, instance_type, region, name, status,"
               " instance_id, price_per_hour, created_at, updated_at) VALUES"
               " ('gl-old', 'sandbox', 'x', 'r', 'old', 'deleted', 'old-1', '1.00', ?, ?)",
               (two_hours_ago, two_hours_ago))
    db.executemany(
        "INSERT INTO ledger (at, provider, instance_id, event, source, state, price_per_hour,"
        " name, launch_id) VALUES (?, 'sandbox', 'old-1', ?, ?, ?, '1.00', 'old', 'gl-old')",
        [(two_hours_ago, "started", "launch", "running"),
         ((now - timedelta(hours=1)).isoformat(), "terminated", "delete", "ended")])
    db.commit()
    db.close()

    made = run(env, "alice", *CREATE)
    assert made.returncode == 0, made.stderr
    db = sqlite3.connect(state)
    try:
        for table in ("launches", "ledger", "volume_ledger"):
            assert {"user_name", "host", "project"} <= columns(db, table), table
        owners = db.execute("SELECT launch_id, user_name FROM launches ORDER BY created_at"
                            ).fetchall()
        ledger_owners = db.execute("SELECT instance_id, user_name FROM ledger ORDER BY seq"
                                   ).fetchall()
    finally:
        db.close()
    assert owners[0] == ("gl-old", None) and owners[1][1] == "alice"
    assert [o for _, o in ledger_owners] == [None, None, "alice"]
    # The old machine is nobody's: in the total, not in alice's budget.
    costs = json.loads(run(env, "alice", "costs", "--by", "user", "--json").stdout)
    lines = {line["key"]: line for line in costs["lines"]}
    assert Decimal(lines["(no user)"]["spent"]) == Decimal("1.00")
    assert set(lines) == {"(no user)", "alice"}
    again = run(env, "alice", *CREATE)
    assert again.returncode == 7 and "user alice's monthly budget" in again.stderr
