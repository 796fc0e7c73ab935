"""`gpucloud ssh-config` with a temporary HOME: one Host entry per machine up
with an ssh connection, written atomically 600 in a 700 directory, rewritten
whole (gone machines lose their entry), and ~/.ssh/config touched only with
--install-include."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud.cli import app
from gpucloud.models import Connection, Instance
from gpucloud.machine.ssh_config import aliases, kept_blocks, unlisted

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lambda"
LIST = "https://cloud.lambda.ai/api/v1/instances"


def machine(machine_id, name, status="active", ip="198.51.100.2"):
    raw = copy.deepcopy(json.loads((FIXTURES / "get_instance_200.json").read_text())["data"])
    raw.update(id=machine_id, name=name, status=status, ip=ip)
    if ip is None:
        del raw["ip"]
    return raw


@pytest.fixture
def cloud(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "sk-ssh-config-0123456789")
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        route = router.get(LIST)

        def answer(*machines):
            route.mock(return_value=httpx.Response(200, json={"data": list(machines)}))
        answer.route = route
        answer(machine("a1", "trainer", ip="203.0.113.1"),
               machine("b2", "twin", ip="203.0.113.2"),
               machine("c3", "twin", ip="203.0.113.3"),
               machine("d4", "booting", status="booting", ip=None),
               machine("e5", "old", status="terminated", ip="203.0.113.5"))
        yield answer


def invoke(*args):
    return CliRunner().invoke(app, ["ssh-config", "--provider", "lambda", *args])


def home() -> Path:
    return Path(os.environ["HOME"])


def test_writes_one_entry_per_machine_up(cloud):
    result = invoke()
    assert result.exit_code == 0, result.output
    path = home() / ".ssh" / "gpucloud" / "config"
    text = path.read_text()
    assert "# gpucloud lambda/a1\nHost trainer\n    HostName 203.0.113.1\n    Port 22\n" \
           "    User ubuntu\n    StrictHostKeyChecking accept-new\n" \
           "    HostKeyAlias gpucloud-lambda-a1\n" in text
    # a name two machines share would send `ssh twin` to either: their ids instead
    assert "Host b2\n" in text and "Host c3\n" in text and "Host twin" not in text
    assert "d4" not in text and "e5" not in text
    assert "skipped lambda/d4: lambda/d4 has no address yet" in result.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "Include ~/.ssh/gpucloud/config" in result.stderr  # said, not done
    assert not (home() / ".ssh" / "config").exists()


def test_the_known_key_is_named(cloud):
    ssh_dir = home() / ".ssh"
    ssh_dir.mkdir()
    (ssh_dir / "id_ed25519").write_text("k")
    (ssh_dir / "id_ed25519.pub").write_text("k")
    invoke()
    text = (ssh_dir / "gpucloud" / "config").read_text()
    assert f'IdentityFile "{ssh_dir / "id_ed25519"}"\n    IdentitiesOnly yes' in text


def test_machines_that_are_gone_lose_their_entry(cloud):
    invoke()
    cloud(machine("a1", "trainer", ip="203.0.113.1"))
    invoke()
    text = (home() / ".ssh" / "gpucloud" / "config").read_text()
    assert "Host trainer" in text and "b2" not in text and "c3" not in text


def test_other_providers_entries_survive_a_provider_run(cloud):
    path = home() / ".ssh" / "gpucloud" / "config"
    path.parent.mkdir(parents=True)
    path.write_text("# header\n\n# gpucloud runpod/p1\nHost pod\n    HostName 1.2.3.4\n"
                    "\n# gpucloud lambda/zz\nHost stale\n    HostName 5.6.7.8\n")
    invoke()
    text = path.read_text()
    assert "# gpucloud runpod/p1\nHost pod\n    HostName 1.2.3.4\n" in text
    assert "stale" not in text and "Host trainer" in text


def test_print_writes_nothing(cloud):
    result = invoke("--print")
    assert result.exit_code == 0 and "Host trainer" in result.stdout
    assert not (home() / ".ssh").exists()


def test_install_include_goes_first_and_only_once(cloud):
    user_config = home() / ".ssh" / "config"
    user_config.parent.mkdir()
    user_config.write_text("Host work\n    User me\n")
    user_config.chmod(0o644)
    assert invoke("--install-include").exit_code == 0
    invoke("--install-include")
    lines = user_config.read_text().splitlines()
    assert lines[1] == "Include ~/.ssh/gpucloud/config"
    assert lines[0].startswith("#") and lines[-2:] == ["Host work", "    User me"]
    assert user_config.read_text().count("Include") == 1
    assert stat.S_IMODE(user_config.stat().st_mode) == 0o644  # the user's mode kept


def test_an_include_after_a_host_block_does_not_count(cloud):
    user_config = home() / ".ssh" / "config"
    user_config.parent.mkdir()
    user_config.write_text("Host work\n    User me\nInclude ~/.ssh/gpucloud/config\n")
    invoke("--install-include")
    assert user_config.read_text().splitlines()[1] == "Include ~/.ssh/gpucloud/config"


def test_json(cloud):
    result = invoke("--json")
    assert result.stderr == ""
    data = json.loads(result.stdout)
    assert data["written"] is True and data["included"] is False
    assert [h["host"] for h in data["hosts"]] == ["b2", "c3", "trainer"]
    assert data["skipped"] == [{"ref": "lambda/d4", "reason": data["skipped"][0]["reason"]}]
    assert data["include"] == "Include ~/.ssh/gpucloud/config"


def test_aliases_fall_back_from_names_to_ids_to_refs():
    def vm(provider, machine_id, name):
        return Instance(provider=provider, id=machine_id, name=name, status="running",
                        connection=Connection(method="ssh", host="h", port=22, user="u"))
    machines = [vm("lambda", "x1", "my run"), vm("runpod", "same", "a"),
                vm("verda", "same", "a"), vm("vastai", "9", "x1")]
    # "my run" is no Host word; "same" is two machines' id; "x1" would be both a
    # name and an id: each falls back, down to provider-id.
    assert aliases(machines) == {"lambda/x1": "lambda-x1", "runpod/same": "runpod-same",
                                 "verda/same": "verda-same", "vastai/9": "vastai-9"}


def test_a_provider_that_cannot_be_listed_keeps_its_entries(cloud, tmp_path):
    path = home() / ".ssh" / "gpucloud" / "config"
    invoke()
    before = path.read_text()
    cloud.route.mock(return_value=httpx.Response(401, json={"error": {
        "code": "global/invalid-api-key", "message": "API key was invalid"}}))
    assert CliRunner().invoke(app, ["ssh-config"]).exit_code == 4
    assert path.read_text() == before  # an error writes nothing
    # When other providers answer, the failure is a warning: its entries stay.
    other = tmp_path / "other"
    other.write_text("# gpucloud lambda/a1\nHost trainer\n    HostName 203.0.113.1\n"
                     "\n# gpucloud verda/v1\nHost gone\n    HostName 1.2.3.4\n")
    failed = unlisted(["lambda: could not list instances (HTTP 503)", "verda: other"])
    assert failed == {"lambda"}
    assert [ref for ref, _, _ in kept_blocks(other, lambda p: p in failed)] == ["lambda/a1"]
