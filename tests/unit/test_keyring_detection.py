"""gpucloud chooses the keyring backend keyring itself would choose, without
importing keyring's macOS backend off macOS (its import alone costs ~40 ms of
ctypes library searches on Linux, on every run of a command that reads a key).

Each probe runs in a fresh interpreter, so keyring has chosen nothing yet, with
D-Bus pointed nowhere (no real keyring daemon is asked) and an empty config home.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "darwin", reason="the skip applies off macOS")

# Two extra backends of priority > 0 make keyring chain them (ChainerBackend).
TWO_RECOMMENDED = """
from keyring.backend import KeyringBackend
class First(KeyringBackend):
    priority = 1
    def get_password(self, service, username): return None
    def set_password(self, service, username, password): pass
    def delete_password(self, service, username): pass
class Second(First):
    priority = 2
"""


def probe(tmp_path, before="", env=None):
    code = before + """
import json, sys
from gpucloud import credentials
chosen = credentials._keyring().get_keyring()
ours = type(chosen).__module__ + "." + type(chosen).__qualname__
macos_skipped = "keyring.backends.macOS" not in sys.modules
from keyring import core
theirs = type(core._detect_backend())
print(json.dumps({"ours": ours, "theirs": theirs.__module__ + "." + theirs.__qualname__,
                  "macos_skipped": macos_skipped}))
"""
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTHON_KEYRING_BACKEND", "DBUS_SESSION_BUS_ADDRESS")}
    base.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(config), XDG_DATA_HOME=str(config),
                XDG_RUNTIME_DIR=str(tmp_path),
                DBUS_SESSION_BUS_ADDRESS=f"unix:path={tmp_path}/no-bus", **(env or {}))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env=base)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_choice_is_keyrings_own_without_the_macos_backend(tmp_path):
    found = probe(tmp_path)
    assert found["ours"] == found["theirs"]
    assert found["macos_skipped"]


def test_the_environment_variable_comes_first(tmp_path):
    found = probe(tmp_path, env={"PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"})
    assert found["ours"] == "keyring.backends.null.Keyring" == found["theirs"]


def test_the_keyring_config_file_comes_next(tmp_path):
    (tmp_path / "config" / "python_keyring").mkdir(parents=True)
    (tmp_path / "config" / "python_keyring" / "keyringrc.cfg").write_text(
        "[backend]\ndefault-keyring=keyring.backends.null.Keyring\n")
    found = probe(tmp_path)
    assert found["ours"] == "keyring.backends.null.Keyring" == found["theirs"]


def test_two_recommended_backends_are_chained_as_keyring_chains_them(tmp_path):
    found = probe(tmp_path, before=TWO_RECOMMENDED)
    assert found["ours"] == "keyring.backends.chainer.ChainerBackend" == found["theirs"]


def test_one_recommended_backend_is_chosen(tmp_path):
    one = TWO_RECOMMENDED.split("class Second")[0]
    found = probe(tmp_path, before=one)
    assert found["ours"] == "__main__.First" == found["theirs"]
    assert found["macos_skipped"]


def test_a_backend_set_before_stands(isolated):
    # conftest's `isolated` sets a memory keyring: gpucloud never replaces it.
    from gpucloud.config import credentials

    assert credentials._keyring().get_keyring() is isolated
