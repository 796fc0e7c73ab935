"""`gpucloud get` takes provider/id, a machine's name, or a unique id prefix;
ambiguity is an error that lists the candidates, and a 404 says what to do."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.errors import NotFoundError, SpecError
from gpucloud.cli import app

import pytest


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def create(name):
    result = invoke("create", "--gpu", "h100", "--provider", "sandbox", "--yes", "--json",
                    "--name", name)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["instance"]


def test_by_name_by_id_prefix_and_by_ref():
    one, two = create("trainer"), create("evaluator")
    for ref in ("trainer", one["id"][:8 + 4], one["id"], one["ref"]):
        result = invoke("get", ref, "--json")
        assert result.exit_code == 0, (ref, result.output)
        assert json.loads(result.stdout)["ref"] == one["ref"]
    assert Client().get("evaluator").ref == two["ref"]  # the SDK resolves alike


def test_an_ambiguous_reference_lists_the_candidates():
    one, two = create("twin"), create("twin")
    result = invoke("get", "twin")
    assert result.exit_code == 2
    assert one["ref"] in result.stderr and two["ref"] in result.stderr
    assert "provider/id" in result.stderr
    prefix = invoke("get", "sbx-", "--json")  # every sandbox id starts so
    assert json.loads(prefix.stdout)["error"]["exit_code"] == 2
    with pytest.raises(SpecError):
        Client().get("twin")


def test_no_match_is_not_found_with_a_hint():
    create("present")
    result = invoke("get", "absent")
    assert result.exit_code == 5
    assert "absent" in result.stderr and "gpucloud list" in result.stderr
    with pytest.raises(NotFoundError):
        Client().get("absent")


def test_a_provider_404_has_a_hint():
    create("present")
    data = json.loads(invoke("get", "sandbox/sbx-doesnotexist", "--json").stdout)
    assert data["error"]["exit_code"] == 5
    assert "gpucloud list" in data["error"]["hint"]


def test_stop_and_start_a_sandbox_machine_by_name():
    made = create("worker")
    stopped = json.loads(invoke("stop", "worker", "--json").stdout)
    assert stopped["instances"][0]["ref"] == made["ref"]
    assert stopped["instances"][0]["status"] == "stopped"
    listed = invoke("list").stdout
    assert "stopped" in listed
    started = json.loads(invoke("start", "worker", "--yes", "--json").stdout)
    assert started["instances"][0]["status"] in ("pending", "running")
