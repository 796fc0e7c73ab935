"""Team mode's setup as a new user meets it, against a real PostgreSQL: the
switch, where the password comes from (and where it never goes), the
one-time copy of a home, and the least-privilege roles docs/team-mode.md
prints, run as written."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.postgres import pg_url, postgres_server  # noqa: F401

from .test_reconcile_sigkill import cloud_rows, environment, gpucloud

DOCS = Path(__file__).resolve().parents[2] / "docs" / "team-mode.md"
CREATE = ["create", "--gpu", "h100", "--provider", "sandbox", "--auto-shutdown", "2h",
          "--yes", "--json"]


def home_env(tmp_path: Path, home: str, **more: str) -> dict[str, str]:
    env = environment(tmp_path) | {"GPUCLOUD_HOME": str(tmp_path / home),
                                   "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
                                   **more}
    (tmp_path / home).mkdir(parents=True, exist_ok=True)
    return env


def one_line_error(result) -> dict:
    """The --json error document, with no traceback anywhere."""
    assert "Traceback" not in result.stderr + result.stdout
    return json.loads(result.stdout)["error"]


def test_a_home_is_copied_into_the_team_database_once(tmp_path, pg_url):
    local = home_env(tmp_path, "laptop")
    made = [json.loads(gpucloud(local, *CREATE).stdout)["instance"] for _ in range(3)]
    assert gpucloud(local, "delete", made[2]["ref"], "--yes").returncode == 0
    before = json.loads(gpucloud(local, "costs", "--json").stdout)
    seen = json.loads(gpucloud(local, "list", "--json").stdout)

    first = gpucloud(local, "state", "migrate", "--to", pg_url, "--json")
    assert first.returncode == 0, first.stderr
    copied = json.loads(first.stdout)
    again = json.loads(gpucloud(local, "state", "migrate", "--to", pg_url, "--json").stdout)
    print(f"\nfirst copy {copied}\nsecond copy {again}")
    assert copied["launches_copied"] == 3 and copied["machines_copied"] == 3
    assert copied["ledger_rows_copied"] >= 4  # three starts, one termination
    assert again["launches_copied"] == again["ledger_rows_copied"] == 0
    assert again["launches_present"] == 3 and again["machines_present"] == 3

    team = home_env(tmp_path, "ci-runner", GPUCLOUD_STATE_URL=pg_url)
    listed = json.loads(gpucloud(team, "list", "--json").stdout)
    # The team sees what the laptop saw, each machine with its launch and deadline.
    assert sorted((i["ref"], i["launch_id"], i["shutdown_at"]) for i in listed["instances"]) \
        == sorted((i["ref"], i["launch_id"], i["shutdown_at"]) for i in seen["instances"])
    assert {m["launch_id"] for m in made[:2]} <= {i["launch_id"] for i in listed["instances"]}
    assert listed["warnings"] == []
    after = json.loads(gpucloud(team, "costs", "--json").stdout)
    assert {line["key"] for line in after["lines"]} == {line["key"] for line in before["lines"]}
    shown = json.loads(gpucloud(team, "state", "show", "--json").stdout)
    assert shown["store"] == "postgresql" and shown["launches"] == 3
    assert not (tmp_path / "ci-runner" / "state.sqlite").exists()


def test_the_password_is_refused_in_the_url_and_never_printed(tmp_path, pg_url):
    secret = "s3cret-" + secrets.token_hex(6)
    parts = urlsplit(pg_url)
    with_password = pg_url.replace(f"{parts.username}@", f"{parts.username}:{secret}@")
    env = home_env(tmp_path, "a")
    (tmp_path / "a" / "config.toml").write_text(f'[state]\nurl = "{with_password}"\n')
    for result in (gpucloud(env, "list", "--json"),
                   gpucloud(home_env(tmp_path, "b", GPUCLOUD_STATE_URL=with_password),
                            "--debug", "list", "--json"),
                   gpucloud(home_env(tmp_path, "c"), "state", "migrate", "--to",
                            pg_url + f"?password={secret}", "--json")):
        assert result.returncode == 3, result.stdout + result.stderr
        error = one_line_error(result)
        assert "password" in error["message"] and "PGPASSWORD" in error["hint"]
        assert secret not in result.stdout + result.stderr


def test_a_wrong_password_is_one_line_exit_3_without_the_password(tmp_path, pg_url):
    wrong = "wrong-" + secrets.token_hex(6)
    env = home_env(tmp_path, "a", GPUCLOUD_STATE_URL=pg_url) | {"PGPASSWORD": wrong}
    result = gpucloud(env, "--debug", "create", "--gpu", "h100", "--provider", "sandbox",
                      "--auto-shutdown", "1h", "--yes", "--json")
    assert result.returncode == 3, result.stdout + result.stderr
    error = one_line_error(result)
    assert "password authentication failed" in error["message"]
    assert wrong not in result.stdout + result.stderr
    assert cloud_rows(env) == []  # refused before anything was sent


def test_an_unreachable_team_database_is_one_line_exit_3(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    env = home_env(tmp_path, "a", GPUCLOUD_STATE_URL=f"postgresql://u@127.0.0.1:{port}/db")
    result = gpucloud(env, "create", "--gpu", "h100", "--provider", "sandbox",
                      "--auto-shutdown", "1h", "--yes", "--json")
    assert result.returncode == 3
    error = one_line_error(result)
    assert "team state database" in error["message"] and error["hint"]
    assert cloud_rows(env) == []


def test_a_pgpass_file_gives_the_password(tmp_path, pg_url, postgres_server):
    env = home_env(tmp_path, "a", GPUCLOUD_STATE_URL=pg_url)
    env.pop("PGPASSWORD")
    home = Path(env["HOME"])
    parts = urlsplit(pg_url)
    passfile = home / ".pgpass"
    passfile.write_text(f"{parts.hostname}:{parts.port}:*:{parts.username}:"
                        f"{postgres_server.password}\n")
    passfile.chmod(0o600)  # libpq ignores a password file others can read
    result = gpucloud(env, "state", "show", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["store"] == "postgresql"


def test_the_keyring_gives_the_password_when_libpq_has_none(monkeypatch, isolated, pg_url,
                                                            postgres_server):
    from gpucloud import Client

    monkeypatch.delenv("PGPASSWORD")
    monkeypatch.setenv("GPUCLOUD_STATE_URL", pg_url)
    isolated.store[("gpucloud", "state")] = postgres_server.password
    client = Client(providers=["sandbox"])
    machine = client.create(gpu="h100", provider="sandbox", auto_shutdown="1h")
    assert [i.id for i in client.list()] == [machine.id]
    client.delete(machine.ref)


def _roles_sql() -> str:
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(r"```sql\n-- gpucloud-roles\n(.*?)```", text, re.S)
    assert block, "docs/team-mode.md lost its roles script"
    return block.group(1)


def test_the_documented_roles_can_work_and_cannot_change_the_schema(
        tmp_path, pg_url, postgres_server):
    import psycopg

    owner = home_env(tmp_path, "owner", GPUCLOUD_STATE_URL=pg_url)
    assert gpucloud(owner, "state", "show").returncode == 0  # the owner makes the schema
    dbname = urlsplit(pg_url).path.lstrip("/")
    suffix = secrets.token_hex(3)
    member, reaper = f"alice_{suffix}", f"reaper_{suffix}"
    password = secrets.token_urlsafe(12)
    # Role names are cluster-wide: each test's own, from the documented script.
    script = _roles_sql().replace("gpucloud_member", f"gpucloud_member_{suffix}") \
        .replace("gpucloud_reaper", f"gpucloud_reaper_{suffix}")
    with postgres_server.admin(dbname) as db:
        db.execute(script)
        db.execute(f"CREATE ROLE {member} LOGIN PASSWORD '{password}' "
                   f"IN ROLE gpucloud_member_{suffix}")
        db.execute(f"CREATE ROLE {reaper} LOGIN PASSWORD '{password}' "
                   f"IN ROLE gpucloud_reaper_{suffix}")
        db.execute(f"GRANT CONNECT ON DATABASE {dbname} TO {member}, {reaper}")
    as_member = pg_url.replace(f"{urlsplit(pg_url).username}@", f"{member}@")
    as_reaper = pg_url.replace(f"{urlsplit(pg_url).username}@", f"{reaper}@")

    alice = home_env(tmp_path, "alice", GPUCLOUD_STATE_URL=as_member) | {
        "PGPASSWORD": password, "GPUCLOUD_SANDBOX_NATIVE_TIMER": "0"}
    made = gpucloud(alice, "create", "--gpu", "h100", "--provider", "sandbox",
                    "--auto-shutdown", "2s", "--yes", "--json")
    assert made.returncode == 0, made.stdout + made.stderr
    ref = json.loads(made.stdout)["instance"]["ref"]
    assert json.loads(gpucloud(alice, "list", "--json").stdout)["instances"][0]["ref"] == ref

    box = home_env(tmp_path, "reaper", GPUCLOUD_STATE_URL=as_reaper) | {
        "PGPASSWORD": password, "GPUCLOUD_SANDBOX_NATIVE_TIMER": "0"}
    import time

    time.sleep(2.5)  # past the deadline
    reaped = gpucloud(box, "reap", "--json")
    assert reaped.returncode == 0, reaped.stdout + reaped.stderr
    actions = json.loads(reaped.stdout)["actions"]
    assert [a["instance"]["ref"] for a in actions if a["action"] == "terminated"] == [ref]
    # Neither role may change the schema.
    for role in (member, reaper):
        with psycopg.connect(pg_url.replace(f"{urlsplit(pg_url).username}@", f"{role}@"),
                             password=password, autocommit=True) as db:
            for ddl in ("DROP TABLE ledger", "CREATE TABLE x (a int)",
                        "ALTER TABLE launches ADD COLUMN x TEXT", "DELETE FROM launches"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    db.execute(ddl)
    assert os.environ["PGPASSWORD"] != password
