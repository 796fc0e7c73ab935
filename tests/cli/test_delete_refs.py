"""`delete` takes a machine's name or a unique id prefix, like get/stop/start:
every name is resolved before anything is deleted, an ambiguous one deletes
nothing (exit 2, the candidates listed), and the prompt shows the resolved refs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.cli import app
from gpucloud.cli.commands import instance as instance_cmds
from gpucloud.errors import SpecError


def invoke(*args, **kw):
    return CliRunner().invoke(app, list(args), **kw)


def create(name):
    result = invoke("create", "--gpu", "h100", "--provider", "sandbox", "--yes", "--json",
                    "--name", name)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["instance"]


def status(ref):
    return Client().get(ref).status.value


def test_delete_by_name_and_by_id_prefix():
    one, two = create("trainer"), create("evaluator")
    result = invoke("delete", "trainer", two["id"][:10], "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["deleted"] == [one["ref"], two["ref"]]
    assert {status(one["ref"]), status(two["ref"])} <= {"terminating", "terminated"}


def test_text_output_names_the_resolved_ref():
    one = create("trainer")
    result = invoke("delete", "trainer", "--yes")
    assert result.exit_code == 0, result.output
    assert f"deleting {one['ref']}" in result.stdout


def test_the_sdk_deletes_by_name():
    one = create("sdk-run")
    Client().delete("sdk-run")
    assert status(one["ref"]) in ("terminating", "terminated")


def test_the_sdk_refuses_an_ambiguous_name_and_deletes_nothing():
    one, two = create("twin"), create("twin")
    with pytest.raises(SpecError):
        Client().delete("twin")
    assert status(one["ref"]) == status(two["ref"]) == "running"


def test_an_ambiguous_prefix_is_exit_2_lists_the_candidates_and_deletes_nothing():
    one, two = create("alpha"), create("beta")
    result = invoke("delete", "sbx-", "--yes")  # every sandbox id starts so
    assert result.exit_code == 2, result.output
    assert one["ref"] in result.stderr and two["ref"] in result.stderr
    assert status(one["ref"]) == status(two["ref"]) == "running"


@pytest.mark.parametrize("bad", ["twin", "nobody"])
def test_a_bad_name_among_several_refs_deletes_none_of_them(bad):
    keep, other = create("keep"), create("other")
    create("twin"), create("twin")
    result = invoke("delete", keep["ref"], "other", bad, "--yes", "--json")
    assert json.loads(result.stdout)["error"]["exit_code"] == (2 if bad == "twin" else 5)
    assert status(keep["ref"]) == status(other["ref"]) == "running"


def test_the_prompt_shows_the_resolved_refs(monkeypatch):
    one = create("trainer")
    monkeypatch.setattr(instance_cmds, "_interactive", lambda: True)
    result = invoke("delete", "trainer", input="n\n")
    assert result.exit_code == 8
    assert f"Delete {one['ref']} (trainer)?" in result.stderr
    assert status(one["ref"]) == "running"


def test_a_name_and_its_ref_delete_the_machine_once():
    one = create("trainer")
    result = invoke("delete", "trainer", one["ref"], "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["deleted"] == [one["ref"]]


def test_a_machine_already_terminated_does_not_make_a_name_ambiguous(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_TERMINATE_SECONDS", "0")
    old = create("run")
    assert invoke("delete", old["ref"], "--yes").exit_code == 0
    assert status(old["ref"]) == "terminated"
    new = create("run")
    result = invoke("delete", "run", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["deleted"] == [new["ref"]]


def test_resolve_prefers_a_machine_still_up_but_never_guesses_between_two():
    from gpucloud.models import Instance
    from gpucloud.core.refs import resolve

    def machine(ident, status):
        return Instance(provider="sandbox", id=ident, name="run", status=status)

    gone, up, up2 = (machine("sbx-1", "terminated"), machine("sbx-2", "running"),
                     machine("sbx-3", "stopped"))
    assert resolve("run", [gone, up], ["sandbox"]) == up
    assert resolve("run", [gone], ["sandbox"]) == gone  # get can still show it
    with pytest.raises(SpecError, match="matches 2 machines"):
        resolve("run", [gone, up, up2], ["sandbox"])
