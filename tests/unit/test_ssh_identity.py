"""The key `create --ssh-key PATH.pub` used is journaled (as a path) and its
private half is what ssh, ssh-config and exec log in with afterwards; an
explicit --identity still wins, and a machine this computer did not create
(or whose key is gone) gets the default key as before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud import Client, Connection
from gpucloud.cli import app
from gpucloud.config.settings import state_db_path
from gpucloud.core.context import ssh_key_file
from gpucloud.machine.ssh import login_identity, remembered_keys, ssh_args
from gpucloud.safety.journal import SCHEMA, Journal
from tests import _fake_ssh
from tests.cli import test_ssh_cli
from tests.unit.test_ssh import machine

ID, REF = test_ssh_cli.ID, test_ssh_cli.REF
vm = test_ssh_cli.vm  # the running Lambda machine and its fake ssh (a fixture)

BLOB = "AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T"
PRIVATE_TEXT = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-secret-0123\n"


def keypair(directory: Path, name: str) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    public, private = directory / f"{name}.pub", directory / name
    public.write_text(f"ssh-ed25519 {BLOB} me@laptop\n")
    private.write_text(PRIVATE_TEXT)
    return public, private


@pytest.fixture
def home() -> Path:
    return Path.home()  # the test's own (conftest): no real keys


def remember(public: Path, instance_id: str = ID, provider: str = "lambda") -> None:
    """The journal row create writes: the intent with the key file, then delivered."""
    journal = Journal(state_db_path())
    journal.record_intent(launch_id="L1", provider=provider, instance_type="gpu_1x_a10",
                          region="us-west-1", name="trainer", price_per_hour="0.75",
                          shutdown_at=None, ssh_key_path=ssh_key_file(str(public)))
    journal.mark("L1", "delivered", instance_id=instance_id)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def over_ssh(instance):
    return instance.model_copy(update={"connection": Connection(
        method="ssh", host="198.51.100.9", port=22, user="root")})


def test_create_journals_the_path_and_login_uses_its_private_half(home, monkeypatch):
    public, private = keypair(home / "keys", "work")
    keypair(home / ".ssh", "id_ed25519")  # a default key that must not be chosen
    monkeypatch.chdir(home / "keys")
    instance = Client(["sandbox"]).create(gpu="h100", count=8, provider="sandbox",
                                          ssh_key="work.pub")  # relative: stored absolute
    record = Journal(state_db_path()).by_instance("sandbox", instance.id)
    assert record is not None and record.ssh_key_path == str(public)
    argv = ssh_args(over_ssh(instance), identity=login_identity(over_ssh(instance), None))
    assert argv[argv.index("-i") + 1] == str(private)
    # Nothing secret in the journal: neither the public key's text nor the private key's.
    Client(["sandbox"]).delete(instance.ref)
    from gpucloud.safety import journal as state
    state.release()  # the write-ahead log folded into the file, to read it whole
    raw = state_db_path().read_bytes()
    assert b"keys/work.pub" in raw and BLOB.encode() not in raw
    assert b"PRIVATE KEY" not in raw and b"not-a-real-secret" not in raw


def test_a_registered_key_name_remembers_nothing(home):
    keypair(home / ".ssh", "id_ed25519")
    instance = Client(["sandbox"]).create(gpu="h100", count=8, provider="sandbox",
                                          ssh_key="team-key")
    assert Journal(state_db_path()).ssh_key_path("sandbox", instance.id) is None
    assert login_identity(over_ssh(instance), None) == str(home / ".ssh" / "id_ed25519")


def test_the_default_key_used_by_create_is_remembered_too(home):
    public, private = keypair(home / ".ssh", "id_rsa")
    instance = Client(["sandbox"]).create(gpu="h100", count=8, provider="sandbox")
    assert Journal(state_db_path()).ssh_key_path("sandbox", instance.id) == str(public)
    # An id_ed25519 made later does not hide the key the machine really has.
    keypair(home / ".ssh", "id_ed25519")
    assert login_identity(over_ssh(instance), None) == str(private)


def test_ssh_logs_in_with_the_remembered_key(vm, home):
    _, log = vm
    public, private = keypair(home / "keys", "work")
    keypair(home / ".ssh", "id_ed25519")
    remember(public)
    result = invoke("ssh", REF, "--", "nvidia-smi")
    assert result.exit_code == 0 and result.stderr == ""
    [args] = _fake_ssh.calls(log)
    assert args[args.index("-i") + 1] == str(private)


def test_an_explicit_identity_still_wins(vm, home):
    public, _ = keypair(home / "keys", "work")
    _, other = keypair(home / "keys", "other")
    remember(public)
    result = invoke("ssh", REF, "--print", "--identity", str(other))
    assert result.exit_code == 0
    assert f" -i {other} " in result.stdout and "keys/work " not in result.stdout


def test_a_machine_without_a_journal_row_uses_the_default_quietly(vm, home):
    _, default = keypair(home / ".ssh", "id_ed25519")
    public, _ = keypair(home / "keys", "work")
    remember(public, instance_id="some-other-machine")
    result = invoke("ssh", REF, "--print")
    assert result.exit_code == 0 and result.stderr == ""
    assert f" -i {default} " in result.stdout


def test_a_deleted_remembered_key_falls_back_with_a_note(vm, home, monkeypatch):
    _, log = vm
    _, default = keypair(home / ".ssh", "id_ed25519")
    public, private = keypair(home / "keys", "work")
    remember(public)
    private.unlink()
    monkeypatch.setenv("FAKE_SSH_EXIT", "255")
    result = invoke("ssh", REF, "--", "true")
    assert result.exit_code == 255
    [args] = _fake_ssh.calls(log)
    assert args[args.index("-i") + 1] == str(default)
    assert f"{private}, the key {REF} was created with, is gone" in result.stderr
    assert "hint: ssh failed (exit 255" in result.stderr and "--identity PATH" in result.stderr
    assert result.stderr.count("--identity PATH") == 2


def test_exec_uses_the_remembered_key(vm, home):
    _, log = vm
    public, private = keypair(home / "keys", "work")
    remember(public)
    assert Client().exec(REF, "nvidia-smi -L").ok
    [args] = _fake_ssh.calls(log)
    assert args[args.index("-i") + 1] == str(private)


def test_ssh_config_writes_each_hosts_remembered_key(vm, home):
    public, private = keypair(home / "keys", "work")
    remember(public)
    text = invoke("ssh-config", "--print").stdout
    assert f'    IdentityFile "{private}"\n' in text
    _, other = keypair(home / "keys", "other")
    text = invoke("ssh-config", "--print", "--identity", str(other)).stdout
    assert f'    IdentityFile "{other}"\n' in text and str(private) not in text


def test_remembered_keys_skips_machines_whose_key_is_gone(home):
    public, private = keypair(home / "keys", "work")
    remember(public)
    machine = over_ssh(Client(["sandbox"]).create(gpu="h100", count=8, provider="sandbox",
                                                  ssh_key="team-key"))
    lambda_vm = machine.model_copy(update={"provider": "lambda", "id": ID})
    assert remembered_keys([lambda_vm, machine]) == {lambda_vm.ref: str(private)}
    private.unlink()
    assert remembered_keys([lambda_vm, machine]) == {}


def test_an_old_journal_without_the_column_opens_and_records(tmp_path):
    path = tmp_path / "old.sqlite"
    first_release = SCHEMA  # the original table: no batch_key, slot nor ssh_key_path
    with sqlite3.connect(path) as db:
        db.executescript(first_release)
        db.execute("INSERT INTO launches (launch_id, provider, instance_type, region, status,"
                   " instance_id, created_at, updated_at) VALUES ('old', 'lambda', 't', 'r',"
                   " 'delivered', 'i-old', '2026-01-01T00:00:00+00:00',"
                   " '2026-01-01T00:00:00+00:00')")
    db.close()
    journal = Journal(path)
    assert journal.ssh_key_path("lambda", "i-old") is None
    assert journal.by_instance("lambda", "i-old").status == "delivered"
    journal.record_intent(launch_id="new", provider="lambda", instance_type="t", region="r",
                          name=None, price_per_hour="1", shutdown_at=None,
                          ssh_key_path="/home/me/.ssh/work.pub")
    journal.mark("new", "delivered", instance_id="i-new")
    assert journal.ssh_key_path("lambda", "i-new") == "/home/me/.ssh/work.pub"


def test_looking_a_key_up_never_creates_the_journal(home, tmp_path):
    missing = tmp_path / "nowhere" / "state.sqlite"
    assert Journal(missing).ssh_key_path("lambda", ID) is None
    assert not missing.exists() and not missing.parent.exists()
    _, default = keypair(home / ".ssh", "id_ed25519")
    assert login_identity(machine(), None) == str(default)
    assert remembered_keys([machine()]) == {}
    assert not state_db_path().exists()
