"""One run at a time per --batch key, against the sandbox: a second process (or
thread, or client) running the same key while the first launches is refused
before anything is planned or made; a SIGKILLed run leaves the key free for
the rerun that completes it; other keys run side by side. Machines are counted
in the simulated cloud itself, not taken from gpucloud's own reports."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from gpucloud import AsyncClient, BatchBusyError, Client
from gpucloud.batch.lock import lock_path
from gpucloud.config.settings import data_dir

from .test_reconcile_sigkill import LABEL, cloud_rows, environment

SLOW = {"GPUCLOUD_SANDBOX_HANG_AFTER_CREATE": "2.5"}  # each create answers 2.5 s late


def create(key: str, n: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gpucloud", "create", "--gpu", "h100", "--count", "8",
            "--provider", "sandbox", "--instances", str(n), "--batch", key,
            "--auto-shutdown", "2h", "--concurrency", "1", "--yes", *extra]


def wait_for_machines(env: dict[str, str], proc: subprocess.Popen[str], count: int) -> None:
    deadline = time.monotonic() + 60
    while len(cloud_rows(env)) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first batch never started launching"
        time.sleep(0.02)


def no_duplicates(env: dict[str, str]) -> None:
    by_launch = Counter(r[LABEL] for r in cloud_rows(env))
    assert all(c == 1 for c in by_launch.values()), by_launch


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX lock semantics")
def test_a_second_process_on_a_running_key_is_refused_and_makes_nothing(tmp_path):
    env = environment(tmp_path)
    first = subprocess.Popen(create("sweep", 4, "--json"), env=env | SLOW, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_machines(env, first, 1)
        refused = subprocess.run(create("sweep", 4, "--json"), env=env, capture_output=True,
                                 text=True, timeout=120)
        # Without --yes: refused before the plan is printed or anything is asked.
        refused_text = subprocess.run([a for a in create("sweep", 4) if a != "--yes"],
                                      env=env, capture_output=True, text=True, timeout=120,
                                      stdin=subprocess.DEVNULL)
        during = len(cloud_rows(env))
        other_key = subprocess.run(create("another", 2, "--json"), env=env,
                                   capture_output=True, text=True, timeout=120)
        assert first.poll() is None, "the first batch ended before the checks: make it slower"
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()

    assert refused.returncode == 2 and refused.stderr == ""
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "batch_busy" and error["exit_code"] == 2
    assert error["message"].startswith(
        f"batch 'sweep' is being run by another gpucloud process (pid {first.pid}, started ")
    assert "--batch sweep" in error["hint"] and "resumes" in error["hint"]
    assert refused_text.returncode == 2
    lines = refused_text.stderr.splitlines()
    assert lines[0].startswith(f"error: batch 'sweep' is being run by another gpucloud "
                               f"process (pid {first.pid}, started 20")
    assert lines[1].startswith("hint: wait for it to finish (or stop it)") and len(lines) == 2
    assert refused_text.stdout == ""  # no plan, no prompt, nothing launched
    assert during <= 4  # the refused runs added nothing beside the first's machines

    assert other_key.returncode == 0, other_key.stdout + other_key.stderr
    assert len(json.loads(other_key.stdout)["instances"]) == 2
    assert first.returncode == 0, out + err
    made = json.loads(out)["instances"]
    assert len(made) == 4 and len(cloud_rows(env)) == 6  # 4 for sweep, 2 for another
    no_duplicates(env)

    again = subprocess.run(create("sweep", 4, "--json"), env=env, capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert {i["id"] for i in json.loads(again.stdout)["instances"]} == {i["id"] for i in made}
    assert len(cloud_rows(env)) == 6  # resumed: nothing new


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_a_sigkilled_run_leaves_its_key_free_for_the_rerun(tmp_path):
    env = environment(tmp_path)
    first = subprocess.Popen(create("crash", 3, "--json"), env=env | SLOW, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for_machines(env, first, 1)  # its first create is committed, not yet answered
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == -signal.SIGKILL
    path = lock_path(tmp_path / "home", "crash")
    assert json.loads(path.read_text())["pid"] == first.pid  # its note stays; its lock not

    rerun = subprocess.run(create("crash", 3, "--json"), env=env, capture_output=True,
                           text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert len(json.loads(rerun.stdout)["instances"]) == 3
    assert len(cloud_rows(env)) == 3  # the killed run's machine adopted, not made again
    no_duplicates(env)


def test_the_same_key_in_two_threads_or_clients_of_one_process(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_HANG_AFTER_CREATE", "1")
    results: dict[str, object] = {}

    def run(key: str, n: int) -> None:
        try:
            results[key] = Client().create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                                auto_shutdown="1h", concurrency=1, batch=key)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
            results[key] = exc

    first = threading.Thread(target=run, args=("job", 2))
    first.start()
    path = lock_path(data_dir(), "job")
    deadline = time.monotonic() + 30
    while not (path.exists() and path.read_text()):  # the first thread holds the key
        assert time.monotonic() < deadline
        time.sleep(0.01)
    other = threading.Thread(target=run, args=("other", 1))
    other.start()
    with pytest.raises(BatchBusyError, match="already being run in this process") as caught:
        Client().create_many(gpu="h100", count=8, n=2, provider="sandbox",
                             auto_shutdown="1h", batch="job")
    assert caught.value.instances == [] and caught.value.attempts == []

    async def also_async() -> None:
        async with AsyncClient() as client:
            await client.create_many(gpu="h100", count=8, n=2, provider="sandbox",
                                     auto_shutdown="1h", batch="job")

    with pytest.raises(BatchBusyError):
        asyncio.run(also_async())
    assert first.is_alive(), "the first run ended before the checks: make it slower"
    first.join(60)
    other.join(60)
    assert results["job"].ok and len(results["job"].instances) == 2  # type: ignore[union-attr]
    assert results["other"].ok  # type: ignore[union-attr]
    again = Client().create_many(gpu="h100", count=8, n=2, provider="sandbox",
                                 auto_shutdown="1h", batch="job")
    assert [i.status for i in again.items] == ["adopted", "adopted"]
    machines = [i for i in Client().list(provider="sandbox")]
    assert len(machines) == 3  # 2 for job, 1 for other: the refused runs made none


def gate_second_create(monkeypatch) -> threading.Event:
    """The second POST /v1/instances waits (before reaching the cloud) until the
    returned event is set: a launch deterministically still in flight."""
    from gpucloud.providers.sandbox.server import SandboxTransport

    original = SandboxTransport.handle_request
    gate, seen, lock = threading.Event(), [0], threading.Lock()

    def handle(self, request):
        if request.method == "POST" and request.url.path == "/v1/instances":
            with lock:
                seen[0] += 1
                n = seen[0]
            if n == 2:
                assert gate.wait(30)
        return original(self, request)

    monkeypatch.setattr(SandboxTransport, "handle_request", handle)
    return gate


def test_an_interrupted_run_holds_its_key_until_its_launches_in_flight_end(monkeypatch):
    gate = gate_second_create(monkeypatch)

    def interrupt(item):  # Ctrl-C as the first machine settles; the second is in flight
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Client().create_many(gpu="h100", count=8, n=2, provider="sandbox", auto_shutdown="1h",
                             concurrency=2, batch="job", on_item=interrupt)
    # The run has returned, but its second launch goes on in its thread: a rerun
    # now would launch that slot again.
    with pytest.raises(BatchBusyError, match="already being run in this process"):
        Client().create_many(gpu="h100", count=8, n=2, provider="sandbox",
                             auto_shutdown="1h", batch="job")
    gate.set()
    path = lock_path(data_dir(), "job")
    deadline = time.monotonic() + 30
    while path.read_text():  # cleared when the last launch ends and the key is free
        assert time.monotonic() < deadline, "the key stayed held after every launch ended"
        time.sleep(0.01)
    again = Client().create_many(gpu="h100", count=8, n=2, provider="sandbox",
                                 auto_shutdown="1h", batch="job")
    assert [i.status for i in again.items] == ["adopted", "adopted"]
    assert len(Client().list(provider="sandbox")) == 2


def test_a_cancelled_async_run_frees_its_key_at_once(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_HANG_AFTER_CREATE", "1")

    async def main() -> list[str]:
        async with AsyncClient() as client:
            task = asyncio.create_task(client.create_many(
                gpu="h100", count=8, n=3, provider="sandbox", auto_shutdown="1h",
                concurrency=1, batch="job"))
            path = lock_path(data_dir(), "job")
            while not (path.exists() and path.read_text()):
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.5)  # its first launch is in flight
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # `task` (and its traceback) is still alive here: not left to the GC.
            result = await client.create_many(gpu="h100", count=8, n=3, provider="sandbox",
                                              auto_shutdown="1h", batch="job")
            return [i.status for i in result.items]

    statuses = asyncio.run(main())
    assert sorted(statuses) in (["adopted", "created", "created"], ["created"] * 3)
    rows = Client().list(provider="sandbox")
    assert len(rows) == 3 and len({i.launch_id for i in rows}) == 3
