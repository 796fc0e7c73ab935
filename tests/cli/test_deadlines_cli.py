"""Deadlines from the command line: --until, the config default, extend, reap,
reap --install. Against the sandbox with its native timer off, so only what
gpucloud itself does ends a machine."""

from __future__ import annotations

import json
import re
import os
import stat
import time
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.cli import app


@pytest.fixture(autouse=True)
def no_native_timer(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_NATIVE_TIMER", "0")


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(app, list(args), input=input)
    return invoke


def as_json(result):
    assert result.stderr == "", result.stderr
    return json.loads(result.stdout)


def at(moment: str) -> datetime:
    return datetime.fromisoformat(moment.replace("Z", "+00:00"))


def create(cli, *extra):
    result = cli("create", "--gpu", "h100", "-c", "1", "-p", "sandbox", "--yes", "--json", *extra)
    assert result.exit_code == 0, result.stdout
    return as_json(result)


def test_until_sets_the_absolute_deadline_on_the_machine_and_in_the_plan(cli):
    until = (datetime.now(timezone.utc) + timedelta(hours=3)).replace(microsecond=0)
    data = create(cli, "--until", until.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert at(data["plan"]["shutdown_at"]) == until
    assert at(data["instance"]["shutdown_at"]) == until
    listed = cli("list")
    assert until.strftime("%m-%d %H:%MZ") in listed.stdout and "DEADLINE" in listed.stdout


@pytest.mark.parametrize("args, fragment", [
    (("--until", "2020-01-01T00:00Z"), "in the past"),
    (("--until", "2030-01-01T00:00"), "no time zone"),
    (("--until", "tomorrow"), "not an ISO-8601 time"),
    (("--until", "2030-01-01T00:00Z", "--auto-shutdown", "4h"), "not both"),
])
def test_bad_deadlines_are_usage_errors_and_create_nothing(cli, args, fragment):
    result = cli("create", "--gpu", "h100", "-c", "1", "-p", "sandbox", "--yes", *args)
    assert result.exit_code == 2 and fragment in result.stderr
    assert "Traceback" not in result.output
    assert Client(providers=["sandbox"]).list() == []


def write_config(text: str) -> None:
    home = os.environ["GPUCLOUD_HOME"]
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.toml"), "w") as handle:
        handle.write(text)


def test_config_default_deadline_applies_and_can_be_opted_out_of(cli):
    write_config('[defaults]\nauto_shutdown = "8h"\n')
    before = datetime.now(timezone.utc)
    data = create(cli)
    deadline = at(data["instance"]["shutdown_at"])
    assert (timedelta(hours=8) - timedelta(minutes=1) < deadline - before
            <= timedelta(hours=8, seconds=5))
    assert any("[defaults] auto_shutdown" in n for n in data["plan"]["notes"])
    # Explicit flags win over the default; "never" opts out.
    assert at(create(cli, "--auto-shutdown", "1h")["instance"]["shutdown_at"]) < deadline
    assert create(cli, "--auto-shutdown", "never")["instance"]["shutdown_at"] is None


def test_a_bad_config_default_is_a_configuration_error(cli):
    write_config('[defaults]\nauto_shutdown = "soon"\n')
    result = cli("create", "--gpu", "h100", "-c", "1", "-p", "sandbox", "--yes")
    assert result.exit_code == 3 and "auto_shutdown" in result.stderr
    write_config('[defaults]\nauto_shutdown = 8\n')
    assert cli("create", "--gpu", "h100", "-c", "1", "-p", "sandbox", "--yes").exit_code == 3


def test_plan_always_states_the_deadline(cli):
    result = cli("create", "--gpu", "h100", "-c", "1", "-p", "sandbox", "--dry-run")
    assert "deadline: none (runs until deleted)" in result.stdout
    result = cli("create", "--gpu", "h100", "-c", "1", "-p", "sandbox", "--dry-run",
                 "--auto-shutdown", "2h")
    assert re.search(r"deadline: 20\S+Z \(in (1h59m|2h00m)\)", result.stdout), result.stdout


def test_extend_moves_the_deadline_on_the_provider_and_shows_the_cost(cli):
    made = create(cli, "--auto-shutdown", "1h", "--name", "run-a")["instance"]
    old = at(made["shutdown_at"])
    # Without --yes and without a terminal: confirmation needed, nothing moved.
    refused = cli("extend", "run-a", "--by", "2h", "--json")
    assert refused.exit_code == 8
    assert at(Client(providers=["sandbox"]).get(made["ref"]).shutdown_at.isoformat()) == old
    result = cli("extend", "run-a", "--by", "2h", "--yes")
    assert result.exit_code == 0, result.output
    assert "about $" in result.stderr and "extended" in result.stdout
    fresh = Client(providers=["sandbox"]).get(made["ref"])  # read back from the cloud
    assert fresh.shutdown_at == old + timedelta(hours=2)
    data = as_json(cli("extend", made["ref"], "--until",
                       (old + timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                       "--yes", "--json"))
    assert at(data["instance"]["shutdown_at"]) == old + timedelta(hours=5)
    # JSON times are to the second
    assert abs(at(data["previous_shutdown_at"]) - (old + timedelta(hours=2))) < timedelta(seconds=1)


@pytest.mark.parametrize("args, fragment", [
    (("--by", "2h", "--until", "2030-01-01T00:00Z"), "not both"),
    ((), "not both or neither"),
    (("--by", "-1h"), "duration"),
    (("--until", "2026-01-01T00:00Z"), "past"),
])
def test_extend_refuses_bad_requests(cli, args, fragment):
    made = create(cli, "--auto-shutdown", "1h")["instance"]
    result = cli("extend", made["ref"], "--yes", *args)
    assert result.exit_code == 2 and fragment in result.stderr, result.output


def test_extend_never_moves_a_deadline_earlier(cli):
    made = create(cli, "--auto-shutdown", "3h")["instance"]
    sooner = (at(made["shutdown_at"]) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = cli("extend", made["ref"], "--until", sooner, "--yes")
    assert result.exit_code == 2 and "only moves later" in result.stderr


def test_reap_dry_run_then_reap_terminates_only_the_overdue(cli, monkeypatch):
    overdue = create(cli, "--auto-shutdown", "1s", "--name", "late")["instance"]
    keep = create(cli, "--auto-shutdown", "1h", "--name", "keep")["instance"]
    time.sleep(1.2)
    dry = as_json(cli("reap", "--dry-run", "--json"))
    assert [(a["action"], a["instance"]["id"]) for a in dry["actions"]] == [
        ("would_terminate", overdue["id"])]
    assert Client(providers=["sandbox"]).get(overdue["ref"]).status.value == "running"
    # A second machine: another GPUCLOUD_HOME, same simulated cloud.
    db = os.path.join(os.environ["GPUCLOUD_HOME"], "sandbox", "cloud.sqlite")
    monkeypatch.setenv("GPUCLOUD_SANDBOX_DB", db)
    monkeypatch.setenv("GPUCLOUD_HOME", os.environ["GPUCLOUD_HOME"] + "-elsewhere")
    report = as_json(cli("reap", "--json"))
    assert [(a["action"], a["instance"]["id"]) for a in report["actions"]] == [
        ("terminated", overdue["id"])]
    assert report["checked"] == 2 and report["providers"] == ["sandbox"]
    statuses = {i.id: i.status.value for i in Client(providers=["sandbox"]).list()}
    assert statuses[overdue["id"]] in ("terminating", "terminated")
    assert statuses[keep["id"]] == "running"


def test_reap_install_prints_units_and_a_cronjob_without_any_key(cli, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "secret-lambda-key-123")
    result = cli("reap", "--install")
    assert result.exit_code == 0
    text = result.stdout
    assert "OnUnitActiveSec=1min" in text and "ExecStart=" in text and " reap" in text
    assert "kind: CronJob" in text and 'schedule: "* * * * *"' in text
    assert "GPUCLOUD_LAMBDA_API_KEY" in text and "secretKeyRef" in text
    assert "secret-lambda-key-123" not in result.output


def test_reap_install_write_writes_the_files_env_file_private(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUCLOUD_RUNPOD_API_KEY", "secret-runpod-key-456")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    data = as_json(cli("reap", "--install", "--write", "--json"))
    written = data["written"]
    assert any(p.endswith("gpucloud-reap.timer") for p in written)
    env_file = data["systemd"]["environment_file"]
    assert env_file in written
    assert stat.S_IMODE(os.stat(env_file).st_mode) == 0o600
    for path in written:
        assert "secret-runpod-key-456" not in open(path).read()
    assert (tmp_path / "gpucloud-reaper-cronjob.yaml").exists()


def test_reap_covers_every_provider_whatever_the_config_default_list(cli, monkeypatch):
    overdue = create(cli, "--auto-shutdown", "1s")["instance"]
    write_config('[defaults]\nproviders = ["lambda"]\n')
    time.sleep(1.2)
    report = as_json(cli("reap", "--json"))
    assert [a["instance"]["id"] for a in report["actions"]] == [overdue["id"]]


def gpucloud(*args: str):
    """The CLI in a process of its own, on this test's GPUCLOUD_HOME."""
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src"
    env = os.environ | {"PYTHONPATH": str(src)}
    return subprocess.run([sys.executable, "-m", "gpucloud", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_extend_keeps_the_monthly_budget_in_another_process(cli):
    # The sandbox's 1x H100 costs $2.49/h: 1 h is committed, 400 h more is not affordable.
    made = create(cli, "--auto-shutdown", "1h")["instance"]
    write_config('[budget]\nmonthly = "100"\n')
    over = gpucloud("extend", made["ref"], "--by", "400h", "--yes")
    assert over.returncode == 7, over.stderr
    assert "over the monthly budget $100.00" in over.stderr and "this extension $" in over.stderr
    assert at(Client(providers=["sandbox"]).get(made["ref"]).shutdown_at.isoformat()) == \
        at(made["shutdown_at"])  # nothing moved
    near = gpucloud("extend", made["ref"], "--by", "32h", "--yes")  # about 82 %
    assert near.returncode == 0, near.stderr
    assert "of the monthly budget" in near.stderr and "extended" in near.stdout


def test_an_extension_counts_against_the_budget_at_once(cli):
    """An extension is in the cost ledger as soon as it is admitted: the next
    create sees it without a listing in between (it was committed at the old
    deadline until a `list` noticed, so a create after it passed the budget)."""
    made = create(cli, "--auto-shutdown", "1h")["instance"]  # $2.49
    write_config('[budget]\nmonthly = "100"\n')
    extended = gpucloud("extend", made["ref"], "--by", "24h", "--yes")  # + $59.76
    assert extended.returncode == 0, extended.stderr
    # $62.25 committed: another 24 h ($59.76) would bring the month to $122.01.
    refused = gpucloud("create", "--gpu", "h100", "--provider", "sandbox",
                       "--auto-shutdown", "24h", "--yes", "--json")
    assert refused.returncode == 7, refused.stdout
    assert "over the monthly budget $100.00" in json.loads(refused.stdout)["error"]["message"]


def test_extend_until_has_the_ten_year_cap_in_another_process(cli):
    made = create(cli, "--auto-shutdown", "1h")["instance"]
    far = (datetime.now(timezone.utc) + timedelta(days=3660)).strftime("%Y-%m-%dT%H:%MZ")
    result = gpucloud("extend", made["ref"], "--until", far, "--yes")
    assert result.returncode == 2 and "more than 10 years away" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def whole_seconds(monkeypatch):
    """The sandbox keeps deadlines as the real clouds do: to the whole second,
    cutting off what it is sent."""
    monkeypatch.setenv("GPUCLOUD_SANDBOX_WHOLE_SECONDS", "1")


@pytest.mark.parametrize("deadline", ["never", "1s"])  # none; overdue once 1 s has passed
def test_extend_by_at_whole_seconds_succeeds_once_in_another_process(cli, whole_seconds,
                                                                     deadline):
    made = create(cli, "--auto-shutdown", deadline)["instance"]
    if deadline == "1s":
        time.sleep(1.2)
    before = datetime.now(timezone.utc)
    result = gpucloud("extend", made["ref"], "--by", "1h", "--yes")
    assert result.returncode == 0, result.stderr
    said = "had no deadline" if deadline == "never" else "was overdue"
    assert result.stdout.count("extended") == 1 and said in result.stdout, result.stdout
    kept = Client(providers=["sandbox"]).get(made["ref"]).shutdown_at
    assert kept is not None and kept.microsecond == 0  # what the cloud keeps
    assert timedelta(minutes=59) < kept - before <= timedelta(hours=1, seconds=1)


def test_extend_until_retried_moves_the_deadline_once(cli, whole_seconds):
    made = create(cli, "--auto-shutdown", "1h")["instance"]
    until = (at(made["shutdown_at"]) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    first = gpucloud("extend", made["ref"], "--until", until, "--yes")
    assert first.returncode == 0, first.stderr
    after_first = Client(providers=["sandbox"]).get(made["ref"]).shutdown_at
    again = gpucloud("extend", made["ref"], "--until", until, "--yes")
    assert again.returncode == 0, again.stderr
    assert Client(providers=["sandbox"]).get(made["ref"]).shutdown_at == after_first == at(until)


def test_extend_over_budget_refuses_before_asking(cli, monkeypatch):
    """The budget figures and the refusal (exit 7) come before the prompt: a user
    is never asked to confirm what would then be refused."""
    from gpucloud.cli.commands import instance as instance_cmds

    made = create(cli, "--auto-shutdown", "1h")["instance"]
    write_config('[budget]\nmonthly = "100"\n')
    monkeypatch.setattr(instance_cmds, "_interactive", lambda: True)
    result = cli("extend", made["ref"], "--by", "400h", input="y\n")
    assert result.exit_code == 7, result.output
    assert "over the monthly budget $100.00" in result.stderr
    assert "Extend " not in result.stderr + result.stdout  # never asked
    # Without a terminal and without --yes: still the budget's exit 7, not "confirm" (8).
    monkeypatch.setattr(instance_cmds, "_interactive", lambda: False)
    assert cli("extend", made["ref"], "--by", "400h").exit_code == 7


def test_extend_near_the_budget_warns_once_before_asking(cli, monkeypatch):
    from gpucloud.cli.commands import instance as instance_cmds

    made = create(cli, "--auto-shutdown", "1h")["instance"]
    write_config('[budget]\nmonthly = "100"\n')
    monkeypatch.setattr(instance_cmds, "_interactive", lambda: True)
    result = cli("extend", made["ref"], "--by", "32h", input="y\n")  # about 82 %
    assert result.exit_code == 0, result.output
    warned = result.stderr.index("of the monthly budget")
    assert warned < result.stderr.index("Extend ")
    assert result.stderr.count("of the monthly budget") == 1
