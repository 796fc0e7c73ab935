"""The embedded server outlives the command that started it: the next one
attaches to it; it stops by itself when idle, or at `gpucloud queue stop`. A
busy server is waited for, never joined by a second one on its data file."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from typer.testing import CliRunner

from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import Queue
from gpucloud.queue import embedded

SPEC = JobSpec.model_validate({"name": "t", "image": "busybox", "resources": {"gpu": "h100"}})


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not embedded._alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_the_server_outlives_its_client_and_the_next_one_attaches():
    with Queue() as q:
        [task_id] = q.submit(SPEC)
        pid = q._server.pid
    assert embedded._alive(pid)  # no start and stop per command
    with Queue() as again:
        assert again._server.pid == pid and again.task(task_id).state == "pending"
    assert embedded.stop() == pid and _gone_within(pid, 5)
    assert not embedded.data_file().with_name("queue.db.settings").exists()
    assert embedded.stop() is None  # nothing left to stop
    with Queue() as restarted:  # saved at the stop
        assert restarted._server.pid != pid and restarted.task(task_id).state == "pending"


def test_an_idle_server_stops_itself_but_not_under_a_connected_client(monkeypatch):
    monkeypatch.setenv(embedded.IDLE_STOP_ENV, "0.5")
    held = Queue()
    [task_id] = held.submit(SPEC)
    pid = held._server.pid
    assert not _gone_within(pid, 2.0)  # a client is connected: not idle
    held.close()
    assert _gone_within(pid, 10.0)
    # The watchdog forgets the server just after it has exited: poll, don't race it.
    settings = embedded.data_file().with_name("queue.db.settings")
    deadline = time.monotonic() + 5.0
    while settings.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not settings.exists()
    with Queue() as q:  # saved as it stopped
        assert q.task(task_id).state == "pending"


def test_a_bad_idle_setting_is_a_clear_error(monkeypatch):
    from gpucloud.errors import ConfigurationError

    monkeypatch.setenv(embedded.IDLE_STOP_ENV, "ten minutes")
    try:
        Queue()
    except ConfigurationError as exc:
        assert embedded.IDLE_STOP_ENV in str(exc) and exc.hint
    else:
        raise AssertionError("no error")


def test_queue_stop_command():
    from gpucloud.cli import app

    cli = CliRunner()
    assert "No embedded Redis server is running" in cli.invoke(app, ["queue", "stop"]).output
    with Queue() as q:
        q.submit(SPEC)
        pid = q._server.pid
        refused = cli.invoke(app, ["queue", "stop"])
        assert refused.exit_code == 2 and "--force" in refused.output
        assert embedded._alive(pid)
    stopped = cli.invoke(app, ["queue", "stop", "--json"])
    assert stopped.exit_code == 0, stopped.output
    assert '"stopped": true' in stopped.output and _gone_within(pid, 5)


def _servers_on(data_dir: Path) -> list[int]:
    """The redis-server processes working in ``data_dir`` (a server chdirs to
    its data directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if ((entry / "comm").read_text().strip() == "redis-server"
                    and os.readlink(entry / "cwd") == str(data_dir)
                    and embedded._alive(int(entry.name))):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _debug_sleep(socket_path: str, seconds: int) -> tuple[socket.socket, threading.Thread]:
    """DEBUG SLEEP on a connection of its own, answered in a thread (a raw
    socket: redis-py would time out and send the command again)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(socket_path)
    conn.sendall(f"DEBUG SLEEP {seconds}\r\n".encode())
    thread = threading.Thread(target=conn.recv, args=(64,), daemon=True)
    thread.start()
    return conn, thread


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="reads /proc")
def test_a_busy_server_is_waited_for_not_joined_by_a_second_one():
    first = embedded.EmbeddedServer()
    data_dir = embedded.data_file().parent
    # Longer than one PING's timeout: the server is alive but answers nothing.
    busy, sleeping = _debug_sleep(first.socket, 6)
    try:
        time.sleep(0.3)
        second = embedded.EmbeddedServer()
        sleeping.join()
        assert (second.socket, second.pid) == (first.socket, first.pid)
        assert _servers_on(data_dir) == [first.pid]
        assert json.loads(embedded.data_file().with_name("queue.db.settings").read_text()
                          )["unixsocket"] == first.socket
    finally:
        sleeping.join()
        busy.close()
        for pid in _servers_on(data_dir):
            if pid != first.pid:  # a second server, started by mistake
                os.kill(pid, signal.SIGKILL)


def test_a_server_that_stays_busy_is_a_clear_error(monkeypatch):
    from gpucloud.errors import APITimeoutError

    first = embedded.EmbeddedServer()
    monkeypatch.setattr(embedded, "PING_TIMEOUT", 0.2)
    busy, sleeping = _debug_sleep(first.socket, 3)
    try:
        time.sleep(0.3)
        with pytest.raises(APITimeoutError) as caught:
            embedded._running(embedded.data_file(), wait=1.0)
        assert f"pid {first.pid}" in str(caught.value) and "busy" in str(caught.value)
        assert caught.value.hint and "queue stop" in caught.value.hint
        assert embedded.data_file().with_name("queue.db.settings").exists()  # kept
    finally:
        sleeping.join()
        busy.close()


def test_a_killed_server_is_replaced_at_once():
    first = embedded.EmbeddedServer()
    os.kill(first.pid, signal.SIGKILL)
    assert _gone_within(first.pid, 5)
    started = time.monotonic()
    second = embedded.EmbeddedServer()
    assert second.pid != first.pid and time.monotonic() - started < 5


def test_a_shutdown_keeps_the_registry_of_a_newer_server(tmp_path):
    import redis

    old = embedded.EmbeddedServer()
    newer = embedded.EmbeddedServer(tmp_path / "newer" / "queue.db")
    registry = embedded.data_file().with_name("queue.db.settings")
    # Since `old` was registered, another server took the registry over.
    registry.write_text((tmp_path / "newer" / "queue.db.settings").read_text())
    try:
        embedded.shut_down(embedded.data_file(), redis.Redis(unix_socket_path=old.socket),
                           old.socket, old.pid)
        assert _gone_within(old.pid, 5)
        assert json.loads(registry.read_text())["unixsocket"] == newer.socket
    finally:
        embedded.stop(tmp_path / "newer" / "queue.db", force=True)
