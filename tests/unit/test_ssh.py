"""ssh.py and exec_client over OpenSSH: the command line per provider, the key,
and the runner against a fake `ssh` on PATH (no network)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucloud import Connection, ExecResult, Instance
from gpucloud.errors import ConfigurationError, SpecError, WaitTimeoutError, exit_code_for
from gpucloud.machine.exec import reachable, run
from gpucloud.models import InstanceStatus
from gpucloud.machine.ssh import default_identity, identity_file, run_ssh, shell_line, ssh_args
from tests import _fake_ssh

# What each provider's adapter reads from the spec examples (tests/adapters/test_*_connection.py).
MACHINES = {
    "lambda": ("0920582c7ff041399e34823a0be62549", "198.51.100.2", 22, "ubuntu"),
    "runpod": ("7h9k2m4n6p", "195.26.233.3", 34446, "root"),
    "vastai": ("883", "ssh2281.vast.ai", 10882, "root"),
    "verda": ("deadc0de-a5d2-4972-ae4e-d429115d055b", "1.2.3.4", 22, "root"),
}


def machine(provider="lambda", status=InstanceStatus.RUNNING, **changes):
    machine_id, host, port, user = MACHINES[provider]
    fields = dict(provider=provider, id=machine_id, status=status,
                  connection=Connection(method="ssh", host=host, port=port, user=user))
    fields.update(changes)
    return Instance(**fields)


@pytest.mark.parametrize("provider,expected", [
    ("lambda", ["ssh", "-o", "StrictHostKeyChecking=accept-new",
                "-o", "HostKeyAlias=gpucloud-lambda-0920582c7ff041399e34823a0be62549",
                "ubuntu@198.51.100.2"]),
    ("runpod", ["ssh", "-p", "34446", "-o", "StrictHostKeyChecking=accept-new",
                "-o", "HostKeyAlias=gpucloud-runpod-7h9k2m4n6p", "root@195.26.233.3"]),
    ("vastai", ["ssh", "-p", "10882", "-o", "StrictHostKeyChecking=accept-new",
                "-o", "HostKeyAlias=gpucloud-vastai-883", "root@ssh2281.vast.ai"]),
    ("verda", ["ssh", "-o", "StrictHostKeyChecking=accept-new",
               "-o", "HostKeyAlias=gpucloud-verda-deadc0de-a5d2-4972-ae4e-d429115d055b",
               "root@1.2.3.4"]),
])
def test_interactive_command_line_per_provider(provider, expected):
    assert ssh_args(machine(provider), batch=False) == expected


def test_batch_mode_key_and_command_follow_a_double_dash():
    args = ssh_args(machine("runpod"), identity="/k/id_ed25519", command=["nvidia-smi -L"])
    assert args[:5] == ["ssh", "-p", "34446", "-i", "/k/id_ed25519"]
    assert "IdentitiesOnly=yes" in args and "BatchMode=yes" in args
    assert "ConnectTimeout=15" in args
    assert args[-3:] == ["root@195.26.233.3", "--", "nvidia-smi -L"]


def test_shell_line_quotes_what_a_shell_would_split():
    line = shell_line(ssh_args(machine("lambda"), identity="/my keys/id", batch=False,
                               command=["echo", "a b"]))
    assert "-i '/my keys/id'" in line and line.endswith("-- echo 'a b'")


def test_a_machine_without_ssh_has_no_command_line():
    with pytest.raises(ValueError):
        ssh_args(machine(connection=Connection(method="api")))
    with pytest.raises(ValueError):
        ssh_args(machine(connection=None))


def _keys(home, *names):
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(exist_ok=True)
    for name in names:
        (ssh_dir / name).write_text("key")
    return ssh_dir


def test_default_identity_is_the_private_half_of_creates_default_key(tmp_path):
    home = tmp_path / "home"
    assert default_identity() is None  # nothing: ssh chooses
    ssh_dir = _keys(home, "id_rsa.pub", "id_rsa")
    assert default_identity() == str(ssh_dir / "id_rsa")
    _keys(home, "id_ed25519.pub")  # a public key without its private half is skipped
    assert default_identity() == str(ssh_dir / "id_rsa")
    _keys(home, "id_ed25519")
    assert default_identity() == str(ssh_dir / "id_ed25519")


def test_identity_option_takes_a_private_key_or_its_pub(tmp_path):
    ssh_dir = _keys(tmp_path / "home", "work", "work.pub")
    assert identity_file(str(ssh_dir / "work")) == str(ssh_dir / "work")
    assert identity_file("~/.ssh/work.pub") == str(ssh_dir / "work")
    with pytest.raises(SpecError) as caught:
        identity_file(str(ssh_dir / "missing"))
    assert exit_code_for(caught.value) == 2 and caught.value.hint


def test_run_ssh_through_a_fake_ssh(tmp_path, monkeypatch):
    log = _fake_ssh.install(tmp_path / "bin", monkeypatch)
    monkeypatch.setenv("FAKE_SSH_EXIT", "3")
    monkeypatch.setenv("FAKE_SSH_STDERR", "oops\n")
    result = run_ssh(machine("vastai"), "nvidia-smi -L", 10)
    assert result == ExecResult(command="nvidia-smi -L", exit_code=3,
                                stdout=result.stdout, stderr="oops\n")
    [args] = _fake_ssh.calls(log)
    assert args[-3:] == ["root@ssh2281.vast.ai", "--", "nvidia-smi -L"]
    assert ["-p", "10882"] == args[0:2] and "BatchMode=yes" in args
    assert result.stdout.startswith("ran: -p 10882")


def test_run_ssh_uses_the_default_key(tmp_path, monkeypatch):
    log = _fake_ssh.install(tmp_path / "bin", monkeypatch)
    ssh_dir = _keys(tmp_path / "home", "id_ed25519", "id_ed25519.pub")
    assert run_ssh(machine(), "true", 10).ok
    [args] = _fake_ssh.calls(log)
    assert args[args.index("-i") + 1] == str(ssh_dir / "id_ed25519")


def test_a_command_that_overruns_is_a_wait_timeout(tmp_path, monkeypatch):
    _fake_ssh.install(tmp_path / "bin", monkeypatch)
    monkeypatch.setenv("FAKE_SSH_SLEEP", "5")
    with pytest.raises(WaitTimeoutError) as caught:
        run_ssh(machine(), "sleep 100", 0.5)
    assert exit_code_for(caught.value) == 9


def test_no_ssh_client_is_a_configuration_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigurationError) as caught:
        run_ssh(machine(), "true", 10)
    assert exit_code_for(caught.value) == 3 and "OpenSSH" in caught.value.message


@pytest.mark.parametrize("status", [InstanceStatus.STOPPED, InstanceStatus.FAILED,
                                    InstanceStatus.TERMINATING, InstanceStatus.TERMINATED])
def test_a_machine_that_is_not_up_is_not_reached(status, tmp_path, monkeypatch):
    log = _fake_ssh.install(tmp_path / "bin", monkeypatch)
    with pytest.raises(SpecError) as caught:
        run(None, machine(status=status), "true", 10)
    assert status.value in caught.value.message and caught.value.hint
    assert _fake_ssh.calls(log) == []


def test_pending_without_an_address_says_wait():
    with pytest.raises(SpecError) as caught:
        reachable(machine(status=InstanceStatus.PENDING, connection=None))
    assert "no address yet" in caught.value.message and "gpucloud get" in caught.value.hint


def test_api_machines_go_through_the_adapter_not_ssh(tmp_path, monkeypatch):
    log = _fake_ssh.install(tmp_path / "bin", monkeypatch)

    class Adapter:
        def exec_command(self, instance_id, command, timeout):
            return ExecResult(command=command, exit_code=0, stdout=instance_id)

    pod = machine(connection=Connection(method="api"))
    assert run(Adapter(), pod, "true", 5).stdout == pod.id
    assert _fake_ssh.calls(log) == []


HOSTILE = [
    dict(host="-oProxyCommand=touch /tmp/pwned", port=22, user="root"),
    dict(host="1.2.3.4", port=22, user="-oProxyCommand=sh"),
    dict(host="1.2.3.4\nProxyCommand sh", port=22, user="root"),
    dict(host="1.2.3.4", port=22, user="root\n  ProxyCommand sh"),
    dict(host="a b", port=22, user="root"),
    dict(host="evil@1.2.3.4", port=22, user="root"),
    dict(host="1.2.3.4", port=0, user="root"),
    dict(host="1.2.3.4", port=70000, user="root"),
]


@pytest.mark.parametrize("fields", HOSTILE)
def test_a_connection_built_by_hand_is_checked_like_a_providers_reply(fields):
    """An SDK user's Connection(...) goes through the adapters' own check."""
    with pytest.raises(ValueError, match="not a usable ssh endpoint"):
        Connection(method="ssh", **fields)


@pytest.mark.parametrize("fields", HOSTILE[:6])
def test_an_unchecked_connection_never_reaches_ssh_or_an_ssh_config(fields, tmp_path):
    """model_construct skips validation (and Instance(...) would catch it): the argv
    builder, reachable() and the ssh_config writer refuse such a machine anyway."""
    from gpucloud.machine.ssh_config import entries

    bad = machine().model_copy(  # neither copy nor construct validates
        update={"connection": Connection.model_construct(method="ssh", **fields)})
    with pytest.raises(ValueError, match="no usable ssh connection"):
        ssh_args(bad)
    with pytest.raises(SpecError, match="no usable ssh address") as caught:
        reachable(bad)
    assert exit_code_for(caught.value) == 2
    made, skipped = entries([bad], None)
    assert made == [] and skipped and "no usable ssh address" in skipped[0][1]


def test_an_ssh_connection_without_a_host_gets_no_command_line():
    with pytest.raises(ValueError, match="no usable ssh connection"):
        ssh_args(machine(connection=Connection(method="ssh", port=22, user="root")))


def test_a_checked_connection_is_not_checked_again_inside_an_instance(monkeypatch):
    """A listing builds one Instance per machine around an adapter-checked
    Connection: the check must not run a second time (the list overhead goal)."""
    import gpucloud.models as models

    checked = machine().connection
    calls = []
    monkeypatch.setitem(models._SSH_CHECKS, "host",
                        lambda host: calls.append(host) or True)
    Instance(provider="lambda", id="i-1", status=InstanceStatus.RUNNING, connection=checked)
    assert calls == []
    Connection(method="ssh", host="1.2.3.4", port=22, user="root")
    assert calls == ["1.2.3.4"]  # a Connection built from values is checked


def test_ipv6_and_names_with_dots_and_dashes_stay_usable():
    for host in ("2001:db8::1", "[2001:db8::1]", "ssh2281.vast.ai", "node-7.example"):
        assert ssh_args(machine(connection=Connection(method="ssh", host=host, port=22,
                                                      user="ubuntu")))[-1] == f"ubuntu@{host}"


@pytest.mark.parametrize("bad", ['/k/a"b', "/k/a\nProxyCommand sh", "/k/a\rb", "/k/a\x00b"])
def test_an_identity_path_that_would_break_an_ssh_config_is_refused(bad):
    with pytest.raises(SpecError, match="quote or a control character"):
        identity_file(bad)


def test_a_journaled_key_path_with_a_newline_is_ignored():
    from gpucloud.machine.ssh import private_half

    assert private_half("/k/work.pub") is not None
    assert private_half("/k/work\n    ProxyCommand sh.pub") is None
    assert private_half('/k/wo"rk.pub') is None


def test_percent_in_a_key_path_or_a_host_is_written_literally(tmp_path):
    from gpucloud.machine.ssh_config import entries

    key = tmp_path / "100%key"
    key.write_text("not a real key")
    args = ssh_args(machine(), identity=str(key))
    assert args[args.index("-i") + 1] == str(tmp_path / "100%%key")
    zoned = machine(connection=Connection(method="ssh", host="fe80::1%eth0", port=22,
                                          user="root"))
    [entry], _ = entries([zoned], str(key))
    text = entry.render()
    assert "    HostName fe80::1%%eth0\n" in text
    assert f'    IdentityFile "{tmp_path}/100%%key"\n' in text


PERMANENTLY_ADDED = (Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / "real" /
                     "ssh_permanently_added_stderr.txt").read_text()


def test_batch_ssh_keeps_its_own_notices_out_and_interactive_ssh_does_not():
    assert "LogLevel=ERROR" in ssh_args(machine(), command=["true"])
    assert "LogLevel=ERROR" not in ssh_args(machine(), batch=False)


def test_ssh_notices_are_not_the_commands_stderr_but_errors_are(tmp_path, monkeypatch):
    _fake_ssh.install(tmp_path / "bin", monkeypatch)
    monkeypatch.setenv("FAKE_SSH_EXIT", "255")
    monkeypatch.setenv("FAKE_SSH_STDERR", PERMANENTLY_ADDED
                       + "ubuntu@198.51.100.2: Permission denied (publickey).\n")
    result = run_ssh(machine(), "nvidia-smi -L", 10)
    assert result.stderr == "ubuntu@198.51.100.2: Permission denied (publickey).\n"
