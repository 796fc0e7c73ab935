"""The embedded server outlives the command that started it: the next one
attaches to it; it stops by itself when idle, or at `gpucloud queue stop`."""

from __future__ import annotations

import time

from typer.testing import CliRunner

from gpucloud.jobspec import JobSpec
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
    assert not embedded.data_file().with_name("queue.db.settings").exists()
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
