"""Proof that deadlines hold without the laptop.

One GPUCLOUD_HOME creates 100 sandbox machines with random deadlines a few
seconds apart (the clock is compressed: seconds stand for hours). A reaper
runs in a separate process with a *different* GPUCLOUD_HOME — a second
machine that never saw the creates — on the same simulated cloud, with
``reap --watch``. The sandbox's own timer is off (NATIVE_TIMER=0), so nothing
but the reaper ends a machine. Every machine must be terminated, none later
than its deadline plus one reaper cycle (the interval plus the time a pass
takes, both measured here) and the time the next pass takes to reach it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

from gpucloud import Client

MACHINES = 100
INTERVAL = 1.0  # seconds between reaper passes
US = 1_000_000


def test_a_reaper_elsewhere_terminates_every_machine_at_its_deadline(tmp_path, monkeypatch):
    cloud = tmp_path / "shared-cloud.sqlite"
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", str(cloud))
    monkeypatch.setenv("GPUCLOUD_SANDBOX_NATIVE_TIMER", "0")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_CAPACITY", str(MACHINES))
    monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path / "laptop"))

    # The reaper runs first (a box that is always on), before any machine exists.
    env = {**os.environ, "GPUCLOUD_HOME": str(tmp_path / "always-on-box"),
           "PYTHONUNBUFFERED": "1"}
    reaper = subprocess.Popen(
        [sys.executable, "-m", "gpucloud", "reap", "--watch", f"{INTERVAL:g}s", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(reaper.stdout), daemon=True)
    reader.start()
    try:
        started = time.monotonic()
        while not lines and time.monotonic() - started < 60 and reaper.poll() is None:
            time.sleep(0.05)
        assert lines, "the reaper never completed a pass"
        rng = random.Random(7)
        made = []
        with Client(providers=["sandbox"]) as laptop:
            start = datetime.now(timezone.utc)
            for _ in range(MACHINES):
                until = datetime.now(timezone.utc) + timedelta(seconds=rng.uniform(2.0, 8.0))
                made.append(laptop.create(gpu="h100", count=1, provider="sandbox",
                                          until=until))
        assert len({m.id for m in made}) == MACHINES
        created_in = (datetime.now(timezone.utc) - start).total_seconds()
        last_deadline = max(m.shutdown_at for m in made)
        stop_at = time.monotonic() + (last_deadline - datetime.now(timezone.utc)
                                      ).total_seconds() + 30
        while time.monotonic() < stop_at:
            if _alive(cloud) == 0:
                break
            time.sleep(0.25)
        # The pass that made the last delete may still be running: let it
        # finish and report (two more lines) before stopping the reaper.
        seen = len(lines)
        settle = time.monotonic() + 30
        while len(lines) < seen + 2 and time.monotonic() < settle:
            time.sleep(0.1)
    finally:
        reaper.send_signal(signal.SIGINT)
        try:
            reaper.wait(timeout=20)
        except subprocess.TimeoutExpired:
            reaper.kill()
        reader.join(timeout=5)
        err = reaper.stderr.read()
    out = "".join(lines)

    passes = [json.loads(line) for line in out.splitlines() if line.strip()]
    reports = [p for p in passes if "actions" in p]
    assert reports, (out, err)
    assert "Traceback" not in err
    times = [datetime.fromisoformat(r["at"].replace("Z", "+00:00")) for r in reports]
    # One reaper cycle: the interval plus how long a pass takes, as measured.
    cycle = max((b - a).total_seconds() for a, b in zip(times, times[1:])) if len(times) > 1 \
        else INTERVAL
    terminated = {a["instance"]["id"] for r in reports for a in r["actions"]
                  if a["action"] == "terminated"}
    rows = _rows(cloud)
    late = [(rows[m.id][1] - rows[m.id][0]) / US for m in made if rows[m.id][1] is not None]
    never = [m.ref for m in made if rows[m.id][1] is None]
    print(f"\nreaper proof: {MACHINES} machines created in {created_in:.1f} s; "
          f"{len(reports)} reaper passes; cycle {cycle:.2f} s (interval {INTERVAL:g} s); "
          f"terminated {len(terminated)}; never terminated {len(never)}; "
          f"lateness max {max(late):.2f} s, mean {sum(late) / len(late):.2f} s")
    assert never == []
    assert terminated == {m.id for m in made}
    # Deleted only once due: never before its deadline.
    assert min(late) >= 0
    # Due just after one pass looked: the next pass starts at most one cycle
    # later and deletes it within its own run (at most another cycle).
    assert max(late) <= 2 * cycle, (max(late), cycle)


def _rows(cloud) -> dict[str, tuple[int, int | None]]:
    with sqlite3.connect(cloud) as db:
        return {r[0]: (r[1], r[2]) for r in
                db.execute("SELECT id, shutdown_us, deleted_us FROM instances")}


def _alive(cloud) -> int:
    return sum(1 for _, deleted in _rows(cloud).values() if deleted is None)
