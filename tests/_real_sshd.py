"""A real OpenSSH server on 127.0.0.1 for the end-to-end tests (Debian's
`openssh-server`, installed by .ci/run): the `sshd` fixture, shared by the tests
of gpucloud's ssh paths (test_real_sshd.py) and of the ssh provider
(test_ssh_provider_real_sshd.py).

The server listens on 127.0.0.1 only, with a host key and an authorized key
made for the test, and puts a remote bin directory first on the remote PATH,
where a test places its stand-in scripts (nvidia-smi: no GPU here).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)
needs_openssh = pytest.mark.skipif(SSHD is None or shutil.which("ssh") is None
                                   or shutil.which("ssh-keygen") is None,
                                   reason="needs OpenSSH (server and client); .ci/run installs it")

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, capture_output=True)


@pytest.fixture
def sshd(tmp_path, monkeypatch):
    """A real sshd on 127.0.0.1 that lets the current user in with a fresh key.
    Yields (port, private key path, the remote bin directory on PATH)."""
    root = tmp_path / "sshd"
    root.mkdir()
    keygen(root / "host_key")
    keygen(root / "client_key")
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    remote_bin = root / "bin"
    remote_bin.mkdir()
    # ssh reads ~/.ssh from the password database, not $HOME: a wrapper first on
    # PATH points the real client at this test's known_hosts, so no test touches
    # the account's own (ssh takes the first value given for an option).
    client_bin = root / "client-bin"
    client_bin.mkdir()
    known_hosts = Path(os.environ["HOME"]) / ".ssh" / "known_hosts"
    known_hosts.parent.mkdir(mode=0o700, exist_ok=True)
    wrapper = client_bin / "ssh"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("ssh")} '
                       f'-o UserKnownHostsFile={known_hosts} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{client_bin}{os.pathsep}{os.environ['PATH']}")
    port = free_port()
    config = root / "sshd_config"
    config.write_text("\n".join([
        "ListenAddress 127.0.0.1",
        f"Port {port}",
        f"HostKey {root / 'host_key'}",
        f"AuthorizedKeysFile {root / 'authorized_keys'}",
        f"PidFile {root / 'sshd.pid'}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes no",  # pytest's tmp directories are not root-owned 0755 all the way
        # The remote shell finds the stand-in nvidia-smi first.
        f"SetEnv PATH={remote_bin}:/usr/local/bin:/usr/bin:/bin",
        "",
    ]))
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
    server = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                err = server.stderr.read().decode(errors="replace") if server.stderr else ""
                pytest.skip(f"sshd did not start here: {err.strip()[:300]}")
            time.sleep(0.05)
    try:
        yield port, root / "client_key", remote_bin
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
