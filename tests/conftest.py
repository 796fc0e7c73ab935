"""Every test runs isolated: its own GPUCLOUD_HOME, no real HOME (so no real
SSH keys), no GPUCLOUD_* variables from the developer's shell, and an
in-memory keyring. No test reaches the network: real provider hosts are only
ever answered by respx, and the sandbox cloud lives on a .invalid host.
"""

from __future__ import annotations

import os

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class MemoryKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if (service, username) not in self.store:
            raise PasswordDeleteError("not found")  # as real backends do
        del self.store[(service, username)]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("GPUCLOUD_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("GPUCLOUD_HOME", str(tmp_path / "gpucloud-home"))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    # The sandbox's boot delay would only slow the suite down.
    monkeypatch.setenv("GPUCLOUD_SANDBOX_BOOT_SECONDS", "0")
    previous = keyring.get_keyring()
    memory = MemoryKeyring()
    keyring.set_keyring(memory)
    yield memory
    keyring.set_keyring(previous)


@pytest.fixture(autouse=True)
def fresh_rate_limits():
    """The request limiter is process-wide (one per provider account): a test's
    booked slots or 429 pause must not carry over into the next test."""
    from gpucloud.transport.ratelimit import LIMITERS

    LIMITERS.clear()
    yield
    LIMITERS.clear()


@pytest.fixture(autouse=True)
def no_embedded_server_left(isolated):
    """The embedded queue server outlives the process that started it (it stops
    when idle): whatever server runs on this test's GPUCLOUD_HOME is stopped."""
    yield
    from gpucloud.config.settings import data_dir

    if (data_dir() / "queue").exists():
        from gpucloud.queue.embedded import stop

        stop(force=True)
