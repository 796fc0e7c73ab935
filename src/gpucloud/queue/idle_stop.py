"""The embedded server's idle watchdog: a process started beside the server
(``python -m gpucloud.queue.idle_stop DATA_FILE SOCKET PID SECONDS``) that stops
it, saving, once no client has been connected and no command has run for
SECONDS. Redis itself has no idle shutdown, and the server must not stop under
a connected worker or a command in flight, so this process asks INFO a few
times per idle period: connected_clients (itself: 1) and
total_commands_processed (its own INFO adds 1 between polls). It exits when
the server is gone or another server took the socket.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def watch(path: Path, socket_path: str, pid: int, idle: float) -> None:
    import redis

    from gpucloud.queue.embedded import shut_down, start_lock

    poll = min(5.0, max(0.1, idle / 10))
    conn = redis.Redis(unix_socket_path=socket_path, socket_timeout=30)
    last = None
    quiet_since = time.monotonic()
    while True:
        time.sleep(poll)
        try:
            info = conn.info()
        except redis.RedisError:
            return  # stopped (or crashed): nothing left to watch
        if int(info.get("process_id", 0)) != pid:
            return  # a new server on the same socket has a watchdog of its own
        total = int(info["total_commands_processed"])
        busy = (int(info["connected_clients"]) > 1
                or (last is not None and total > last + 1))
        last = total
        if busy:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= idle:
            # Again under the start lock: a process attaching now PINGs under
            # it, so one more command than this INFO means someone came.
            with start_lock(path):
                try:
                    again = conn.info()
                    if (int(again["connected_clients"]) <= 1
                            and int(again["total_commands_processed"]) <= total + 1):
                        shut_down(path, conn, socket_path, pid)
                        return
                except redis.RedisError:
                    return
            quiet_since = time.monotonic()  # it came alive: watch on


if __name__ == "__main__":
    data, sock, server_pid, seconds = sys.argv[1:5]
    watch(Path(data), sock, int(server_pid), float(seconds))
