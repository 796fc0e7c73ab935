"""Team mode against a real PostgreSQL server: many homes (laptops, CI
runners) with one team database and one simulated cloud. Real `gpucloud`
processes; machines are counted in the cloud itself, launches in the team
database, never taken from gpucloud's own reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from tests.support.postgres import pg_url, postgres_server  # noqa: F401

from .test_reconcile_sigkill import (
    LABEL, cloud_rows, environment, gpucloud, kill_once_the_cloud_has_it,
)

PRICE = Decimal("2.49")  # the sandbox's 1x H100 per hour; an hour each
BUDGET = '[budget]\nmonthly = "31"\n'  # fits 12 machines ($29.88), not 13 ($32.37)
CREATE = ["create", "--gpu", "h100", "--provider", "sandbox", "--auto-shutdown", "1h",
          "--yes", "--json"]


def team_env(tmp_path: Path, url: str, home: str) -> dict[str, str]:
    """A computer of the team: its own home, the team's database and cloud."""
    env = environment(tmp_path) | {"GPUCLOUD_HOME": str(tmp_path / home),
                                   "GPUCLOUD_STATE_URL": url,
                                   "GPUCLOUD_SANDBOX_CAPACITY": "50"}
    (tmp_path / home).mkdir(parents=True, exist_ok=True)
    return env


def launches(url: str) -> dict[str, tuple[str, str | None]]:
    with psycopg.connect(url) as db:
        return {launch: (status, ident) for launch, status, ident in
                db.execute("SELECT launch_id, status, instance_id FROM launches")}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
def test_twenty_creates_from_twenty_homes_make_exactly_what_the_team_budget_fits(
        tmp_path, pg_url):
    envs = []
    for n in range(20):
        env = team_env(tmp_path, pg_url, f"home{n}") | {
            "GPUCLOUD_SANDBOX_HANG_AFTER_CREATE": "1", "GPUCLOUD_USER": f"user{n}"}
        (Path(env["GPUCLOUD_HOME"]) / "config.toml").write_text(BUDGET)
        envs.append(env)
    gpucloud(envs[0], "costs")  # the team database's schema, made once before the race
    gate = threading.Barrier(20)
    results: list[subprocess.CompletedProcess[str] | None] = [None] * 20

    def one(i: int) -> None:
        gate.wait()
        results[i] = subprocess.run([sys.executable, "-m", "gpucloud", *CREATE], env=envs[i],
                                    capture_output=True, text=True, timeout=300)

    began = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [r for r in results if r is not None]
    codes = sorted(r.returncode for r in done)
    made = cloud_rows(envs[0])
    journaled = launches(pg_url)
    with psycopg.connect(pg_url) as db:
        ledger_ids = {i for (i,) in db.execute("SELECT DISTINCT instance_id FROM ledger")}
    costs = json.loads(gpucloud(envs[7], "costs", "--json").stdout)
    print(f"\n20 processes, 20 homes, one team database: machines in the cloud {len(made)}, "
          f"exit codes {codes}, launches journaled {len(journaled)}, machines in the ledger "
          f"{len(ledger_ids)}, costs total ${costs['total']} "
          f"({time.monotonic() - began:.1f} s)")
    assert len(made) == 12, [r.stderr for r in done if r.returncode not in (0, 7)]
    assert codes == [0] * 12 + [7] * 8, [(r.stdout, r.stderr) for r in done
                                         if r.returncode not in (0, 7)]
    for refused in (r for r in done if r.returncode == 7):
        assert "budget" in json.loads(refused.stdout)["error"]["message"]
    # The team's records and the cloud agree: every machine once, nothing else.
    assert {ident for _, ident in journaled.values()} == {row["id"] for row in made}
    assert sorted(status for status, _ in journaled.values()) == ["delivered"] * 12
    assert ledger_ids == {row["id"] for row in made}
    # Any computer of the team sees every machine of the month, at its price.
    assert len(costs["lines"]) == 12
    assert all(Decimal(line["price_per_hour"]) == PRICE for line in costs["lines"])


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_a_create_killed_on_one_computer_is_adopted_by_reconcile_on_another(
        tmp_path, pg_url):
    laptop = team_env(tmp_path, pg_url, "laptop")
    runner = team_env(tmp_path, pg_url, "ci-runner")
    assert kill_once_the_cloud_has_it(laptop, CREATE) == -signal.SIGKILL
    [row] = cloud_rows(laptop)
    launch_id = row[LABEL]
    assert launches(pg_url)[launch_id] == ("intent", None)
    # Another computer of the team, which never ran that create, repairs it.
    result = gpucloud(runner, "reconcile", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    print(f"\nkilled on the laptop, reconciled on the runner: adopted "
          f"{[a['launch_id'] for a in report['adopted']]}, orphans {report['orphans']}")
    [adopted] = report["adopted"]
    assert adopted["id"] == row["id"] and adopted["launch_id"] == launch_id
    assert report["orphans"] == [] and report["failed"] == []
    assert launches(pg_url)[launch_id] == ("delivered", row["id"])
    assert len(cloud_rows(laptop)) == 1  # nothing was sent again
    # The laptop's own listing knows it too: one team, one journal.
    listed = json.loads(gpucloud(laptop, "list", "--json").stdout)
    assert [i["launch_id"] for i in listed["instances"]] == [launch_id]
    assert listed["warnings"] == []
    assert not (Path(laptop["GPUCLOUD_HOME"]) / "state.sqlite").exists()
    assert not (Path(runner["GPUCLOUD_HOME"]) / "state.sqlite").exists()
    assert "PGPASSWORD" in os.environ  # the password came from libpq's own source


def test_a_batch_key_held_on_one_computer_is_refused_on_another(tmp_path, pg_url):
    """Two computers of a team must not run one batch key at once: both would
    see the same missing slots and launch them twice."""
    from gpucloud.batch.lock import held
    from gpucloud.safety.journal import Journal
    from gpucloud.safety.store_postgres import PostgresStore

    laptop = Journal(tmp_path / "laptop" / "state.sqlite", PostgresStore(pg_url))
    runner = team_env(tmp_path, pg_url, "ci-runner")
    argv = ["create", "--gpu", "h100", "--provider", "sandbox", "--instances", "2",
            "--batch", "sweep-7", "--auto-shutdown", "1h", "--yes", "--json"]
    with held(laptop, "sweep-7"):
        refused = gpucloud(runner, *argv)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "batch_busy" and "another gpucloud process of the team" in \
        error["message"]
    assert cloud_rows(runner) == []  # refused before anything was planned or sent
    done = gpucloud(runner, *argv)  # let go: the key runs
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(cloud_rows(runner)) == 2


def test_a_launch_delivered_by_another_computer_mid_admission_still_counts(
        tmp_path, pg_url, monkeypatch):
    """The admission lock keeps out other admissions only: another computer's
    ledger row may land between the budget's reads of launches in flight and
    of the ledger. A launch delivered just then must count in one of them,
    never in neither (it would let this plan past the budget)."""
    from datetime import datetime, timedelta, timezone

    from gpucloud import BudgetExceededError, Client
    from gpucloud.safety.journal import Journal
    from gpucloud.safety.ledger import Ledger
    from gpucloud.safety.store_postgres import PostgresStore

    monkeypatch.setenv("GPUCLOUD_STATE_URL", pg_url)
    home = Path(os.environ["GPUCLOUD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[budget]\nmonthly = "150"\n')
    other = Journal(tmp_path / "other" / "state.sqlite", PostgresStore(pg_url))
    now = datetime.now(timezone.utc)
    other.record_intent(launch_id="gc-other", provider="sandbox", instance_type="sim.1xH100",
                        region="sim-east-1", name=None, price_per_hour="2.49",
                        shutdown_at=now + timedelta(hours=40), committed=Decimal("99.60"))
    real_rows = Ledger.rows

    def rows_then_the_other_delivers(self, *args, **kwargs):
        found = real_rows(self, *args, **kwargs)
        with psycopg.connect(pg_url, autocommit=True) as db:  # another computer's commit
            db.execute("INSERT INTO ledger (at, provider, instance_id, event, source, state,"
                       " price_per_hour, shutdown_at, launch_id, simulated) VALUES"
                       " (%s, 'sandbox', 'sbx-other', 'started', 'launch', 'running', '2.49',"
                       " %s, 'gc-other', 1)",
                       (now.isoformat(), (now + timedelta(hours=40)).isoformat()))
        return found

    monkeypatch.setattr(Ledger, "rows", rows_then_the_other_delivers)
    with Client(providers=["sandbox"]) as client:
        # $74.70 more: within $150 only if the other launch's $99.60 is missed.
        with pytest.raises(BudgetExceededError) as refused:
            client.plan(gpu="h100", provider="sandbox", auto_shutdown="30h")
    assert "99.6" in refused.value.message


def test_list_mine_in_team_mode_shows_the_machines_this_user_launched_anywhere(
        tmp_path, pg_url):
    laptop = team_env(tmp_path, pg_url, "laptop") | {"GPUCLOUD_USER": "alice"}
    made = json.loads(gpucloud(laptop, *CREATE).stdout)["instance"]
    gpucloud(team_env(tmp_path, pg_url, "bob-box") | {"GPUCLOUD_USER": "bob"}, *CREATE)
    desk = team_env(tmp_path, pg_url, "desk") | {"GPUCLOUD_USER": "alice"}  # no local file
    mine = json.loads(gpucloud(desk, "list", "--mine", "--json").stdout)["instances"]
    assert [i["ref"] for i in mine] == [made["ref"]]
    everyone = json.loads(gpucloud(desk, "list", "--json").stdout)["instances"]
    assert len(everyone) == 2
