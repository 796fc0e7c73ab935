"""Help that says what to type, --debug anywhere, and retry lines on a failing
network (text mode only)."""

from __future__ import annotations

import json
import time

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud.cli import app

TYPE_NAMES = ("<int", "<str", "<float", "<list", "INTEGER", "TEXT", "FLOAT")


def invoke(*args, **kw):
    return CliRunner().invoke(app, list(args), **kw)


def all_commands():
    out = []
    top = invoke("--help").stdout
    names = [line.split()[0] for line in top.split("Commands:")[1].split("\n\n")[0].splitlines()
             if line.startswith("  ") and not line.startswith("   ")]
    for name in names:
        if name == "auth":
            out += [["auth", sub] for sub in ("login", "status", "logout")]
        else:
            out.append([name])
    return out


def test_every_command_is_listed():
    assert {c[0] for c in all_commands()} >= {"offers", "estimate", "create", "list", "get",
                                              "delete", "stop", "start", "auth", "providers"}


@pytest.mark.parametrize("command", [["offers"], ["estimate"], ["create"], ["get"],
                                     ["delete"], ["auth", "login"]])
def test_help_shows_metavars_not_type_names(command):
    text = invoke(*command, "--help").stdout
    for name in TYPE_NAMES:
        assert name not in text, (command, name)


def test_no_command_help_shows_a_type_name():
    for command in all_commands():
        text = invoke(*command, "--help").stdout
        assert not [n for n in TYPE_NAMES if n in text], command


def test_help_metavars_say_what_to_type():
    create = invoke("create", "--help").stdout
    for option, metavar in [("--gpu", "GPU"), ("--count", "N"), ("--auto-shutdown", "DURATION"),
                            ("--max-cost", "USD"), ("--disk-gb", "GB"), ("--timeout", "SECONDS"),
                            ("--instances", "N")]:
        assert f"{option} {metavar}" in create
    assert "--hours DURATION" in invoke("estimate", "--help").stdout
    assert "--max-price USD" in invoke("offers", "--help").stdout


@pytest.mark.parametrize("columns", ["80", "60"])
def test_command_summaries_are_not_cut(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    for args in (["--help"], ["auth", "--help"]):
        commands = invoke(*args).stdout.split("Commands:")[1]
        assert "..." not in commands
    assert "cheapest first." in " ".join(invoke("--help").stdout.split())


@pytest.mark.parametrize("how", ["end", "middle", "env"])
def test_debug_works_anywhere(how, monkeypatch):
    args = {"end": ["list", "--provider", "sandbox", "--debug"],
            "middle": ["list", "--debug", "--provider", "sandbox"],
            "env": ["list", "--provider", "sandbox"]}[how]
    if how == "env":
        monkeypatch.setenv("GPUCLOUD_DEBUG", "1")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "DEBUG gpucloud.http: sandbox GET /v1/instances -> 200" in result.stderr


def test_no_debug_output_without_debug():
    result = invoke("list", "--provider", "sandbox")
    assert result.exit_code == 0 and "DEBUG" not in result.stderr


@pytest.fixture
def unreachable_lambda(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "lambda-key")
    sleeps = []
    monkeypatch.setattr(time, "sleep", sleeps.append)
    with respx.mock(assert_all_mocked=True) as router:
        router.route(host="cloud.lambda.ai").mock(side_effect=httpx.ConnectError("unreachable"))
        yield sleeps


def test_a_failing_network_prints_retry_lines(unreachable_lambda):
    result = invoke("list", "--provider", "lambda")
    assert result.exit_code == 10
    lines = result.stderr.splitlines()
    assert lines[:4] == [f"retrying lambda ({n}/5) after connection error…" for n in (2, 3, 4, 5)]
    assert lines[4].startswith("error: ")
    # the first line comes before the first wait, and that wait is short
    assert unreachable_lambda[0] < 2


def test_retry_lines_never_appear_under_json(unreachable_lambda):
    result = invoke("list", "--provider", "lambda", "--json")
    assert result.exit_code == 10 and result.stderr == ""
    assert json.loads(result.stdout)["error"]["exit_code"] == 10


# The `gpucloud` script builds only the command a line runs (gpucloud.cli.registry);
# what it prints must not change.

@pytest.mark.parametrize("args, word", [
    (["offers", "--gpu", "h100"], "offers"), (["--debug", "offers"], "offers"),
    (["queue", "workers", "add"], "queue"), (["ssh", "box", "--", "list"], "ssh"),
    ([], None), (["--help"], None), (["-h", "offers"], None), (["--version", "list"], None),
    (["offerz"], None), (["--", "offers"], None), (["--json", "offers"], None),
    (["--debug"], None)])
def test_the_command_a_line_runs(args, word):
    from gpucloud.cli import registry

    assert registry.command_word(args) == word


def test_the_script_prints_what_the_whole_app_prints():
    from tests.cli.test_startup_imports import through_main

    lines = [["--help"], ["-h", "offers"], ["--debug", "--help"], ["--version"], ["offerz"],
             ["offerz", "--json"], ["offers", "--count", "x", "--json"], ["get", "--json"],
             ["queue", "nope", "--json"], ["auth", "--help"]]
    probe = through_main(*lines)
    for line in lines:
        whole = invoke(*line, prog_name="gpucloud")
        key = " ".join(line)
        assert (probe["codes"].get(key, 0), probe["helps"][key], probe["errors"][key]) == \
            (whole.exit_code, whole.stdout, whole.stderr), line
    # Byte for byte the same root help, which lists every command.
    assert "ssh-config" in probe["helps"]["--help"] and "queue" in probe["helps"]["-h offers"]
    assert "Did you mean 'offers'?" in probe["errors"]["offerz"]


def test_debug_anywhere_through_the_script():
    from tests.cli.test_startup_imports import through_main

    probe = through_main(["--debug", "list", "--provider", "sandbox"],
                         ["list", "--provider", "sandbox", "--json", "--debug"])
    for line in ("--debug list --provider sandbox", "list --provider sandbox --json --debug"):
        assert probe["codes"].get(line, 0) == 0, probe["errors"][line]
        assert "DEBUG gpucloud.http: sandbox GET /v1/instances -> 200" in probe["errors"][line]
    assert json.loads(probe["helps"]["list --provider sandbox --json --debug"])["instances"] == []
