"""The Vast.ai self-guard: the create body carries an onstart
script that destroys the machine at deadline + grace with the per-instance key
Vast injects, re-reading the label first so an extend is honoured. The guard's
python is extracted from the request actually sent and run here against
recorded bodies, with its HTTP calls faked (no network)."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any

import pytest

from gpucloud.providers.vastai import VastProvider
from gpucloud.providers.vastai._guard import GUARD_GRACE, ONSTART_MAX, onstart
from tests.adapters._vastai_support import (  # noqa: F401 (fixtures)
    KEY,
    api_fixture,
    create_routes,
    make_spec,
    provider_fixture,
    run_fixture,
    sent,
    show,
    sleeps_fixture,
)

DEADLINE = datetime(2026, 12, 1, 18, tzinfo=timezone.utc)
T = DEADLINE.timestamp()
GRACE = GUARD_GRACE.total_seconds()


def sent_onstart(api, run, provider) -> tuple[str, Any]:
    put, _ = create_routes(api)
    run(provider.create(make_spec(shutdown_at=DEADLINE)))
    return sent(put)["onstart"], put.calls.last.request


def guard_code(script: str) -> str:
    match = re.search(r"<<'GPUCLOUD_GUARD'\n(.*?)\nGPUCLOUD_GUARD\n", script, re.DOTALL)
    assert match, script
    return match.group(1)


def load_guard(script: str, env: dict[str, str], monkeypatch) -> dict[str, Any]:
    for name in ("CONTAINER_API_KEY", "CONTAINER_ID", "GPUCLOUD_SHUTDOWN_AT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    namespace: dict[str, Any] = {"__name__": "gpucloud_guard_under_test"}
    exec(compile(guard_code(script), "gpucloud-guard.py", "exec"), namespace)  # noqa: S102
    return namespace


def test_capability_says_vast_guards_itself():
    assert VastProvider.capabilities.self_guard is True


def test_create_carries_the_guard_and_no_account_key(api, run, provider):
    script, request = sent_onstart(api, run, provider)
    assert "CONTAINER_API_KEY" in script and "DELETE" in script
    assert len(script) <= ONSTART_MAX
    # The account key travels in the Authorization header only: nowhere in the
    # body (onstart, env, label) or the URL.
    assert KEY.encode() not in request.content and KEY not in str(request.url)
    # The guard's only credential is the one Vast injects into the container.
    assert script.count("Bearer") == 1 and 'Bearer %s" % env("CONTAINER_API_KEY")' in script


def test_the_onstart_is_valid_shell():
    result = subprocess.run(["sh", "-n"], input=onstart("echo hi"), text=True,
                            capture_output=True, check=False)
    assert result.returncode == 0, result.stderr


def test_a_user_onstart_is_kept_after_the_guard():
    script = onstart("python train.py --epochs 3")
    assert script.startswith(onstart())  # the guard first, backgrounded
    assert script.endswith("python train.py --epochs 3\n")
    assert len(script) <= ONSTART_MAX
    assert onstart("   ") == onstart()


def test_the_guard_reads_the_later_of_label_and_env(api, run, provider, monkeypatch):
    script, _ = sent_onstart(api, run, provider)
    guard = load_guard(script, {"GPUCLOUD_SHUTDOWN_AT": "2026-12-01T18:00:00Z"}, monkeypatch)
    later = show(label="gpucloud:lid-7f3a9c shutdown:2026-12-02T06:00:00Z train")
    assert guard["deadline"](later) == datetime(2026, 12, 2, 6, tzinfo=timezone.utc).timestamp()
    stale = show(label="gpucloud:lid-7f3a9c shutdown:2026-11-01T00:00:00Z train")
    assert guard["deadline"](stale) == T
    for garbage in (show(label="gpucloud:x shutdown:soon y"), show(label=None),
                    {"instances": None}, [], "not json"):
        assert guard["deadline"](garbage) == T


def fake_cloud(guard: dict[str, Any], bodies: list[Any]) -> list[str]:
    calls: list[str] = []

    def call(method: str) -> Any:
        calls.append(method)
        if method == "DELETE":
            return {"success": True}
        answer = bodies.pop(0) if len(bodies) > 1 else bodies[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    guard["call"] = call
    return calls


def test_the_guard_destroys_after_deadline_plus_grace(api, run, provider, monkeypatch):
    script, _ = sent_onstart(api, run, provider)
    guard = load_guard(script, {"CONTAINER_API_KEY": "per-instance", "CONTAINER_ID": "883"},
                       monkeypatch)
    calls = fake_cloud(guard, [show(label="gpucloud:lid shutdown:2026-12-01T18:00:00Z x")])
    clock = [T]  # at the deadline: still within the grace period
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    guard["main"](now=lambda: clock[0], sleep=sleep)
    assert calls[-1] == "DELETE" and calls.count("DELETE") == 1
    assert clock[0] >= T + GRACE and sum(slept) == pytest.approx(GRACE)


def test_the_guard_honours_an_extend_seen_on_the_label(api, run, provider, monkeypatch):
    script, _ = sent_onstart(api, run, provider)
    guard = load_guard(script, {"CONTAINER_API_KEY": "k", "CONTAINER_ID": "883",
                                "GPUCLOUD_SHUTDOWN_AT": "2026-12-01T18:00:00Z"}, monkeypatch)
    extended = show(label="gpucloud:lid shutdown:2026-12-01T20:00:00Z x")
    calls = fake_cloud(guard, [OSError("network down"), extended])
    clock = [T + GRACE + 1]  # past the create's deadline + grace
    deleted_at: list[float] = []

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    def call_tracking(method: str) -> Any:
        if method == "DELETE":
            deleted_at.append(clock[0])
        return real(method)

    real = guard["call"]
    guard["call"] = call_tracking
    guard["main"](now=lambda: clock[0], sleep=sleep)
    # A failed read never destroys; the extended deadline (+ grace) is waited for.
    assert calls[0] == "GET" and deleted_at
    assert deleted_at[0] >= datetime(2026, 12, 1, 20, tzinfo=timezone.utc).timestamp() + GRACE


def test_the_guard_does_nothing_without_its_key():
    # Run as a program, as onstart does: no CONTAINER_API_KEY, so it exits at once
    # (and never touches the network).
    code = guard_code(onstart())
    env = {"PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=20, check=False)
    assert result.returncode == 0 and result.stdout == "", result.stderr
