"""On a headless Linux box keyring has no usable backend: gpucloud remembers
that (keyring_probe) so later runs skip importing keyring, until anything that
could change keyring's answer changes; the verdict never hides a key.

The conftest installs an in-memory keyring in this process, so every probe runs
in a fresh interpreter, where keyring is untouched: D-Bus unset, an empty
runtime dir, and HOME, GPUCLOUD_HOME and the working directory (on sys.path
with -c) of the test's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.path.exists(f"/run/user/{os.getuid()}/bus"),
    reason="the verdict is only kept on Linux where no D-Bus session bus can be reached")

SRC = str(Path(__file__).resolve().parents[2] / "src")
NO_BACKEND = "NoKeyringError (No recommended backend was available)"

FIND = """
import json, sys
from gpucloud.config.credentials import CredentialStore
store = CredentialStore()
found = store.find("lambda")
print(json.dumps({"key": found.secret.get_secret_value() if found else None,
                  "source": found.source if found else None,
                  "problem": store.keyring_problem, "imported": "keyring" in sys.modules,
                  "hint": store.how_to_set("lambda")}))
"""

# A real backend that holds a key (and can store one).
RING = """
from keyring.backend import KeyringBackend
class Ring(KeyringBackend):
    priority = 1
    def get_password(self, service, username):
        return "sk-held-by-ring" if (service, username) == ("gpucloud", "lambda") else None
    def set_password(self, service, username, password):
        pass
    def delete_password(self, service, username):
        pass
"""


@pytest.fixture
def box(tmp_path):
    """A headless environment: its directories and a runner."""
    for name in ("userhome", "runtime", "cwd", "plugins"):
        (tmp_path / name).mkdir()

    class Box:
        path = tmp_path
        cache = tmp_path / "gpucloud-home" / "cache" / "keyring.json"

        def run(self, code=FIND, env=None):
            base = {k: v for k, v in os.environ.items()
                    if not k.startswith(("GPUCLOUD_", "KEYRING_PROPERTY_")) and k not in (
                        "DBUS_SESSION_BUS_ADDRESS", "PYTHON_KEYRING_BACKEND", "DISPLAY",
                        "XDG_CONFIG_HOME", "XDG_DATA_HOME")}
            base.update(HOME=str(tmp_path / "userhome"), XDG_RUNTIME_DIR=str(tmp_path / "runtime"),
                        GPUCLOUD_HOME=str(tmp_path / "gpucloud-home"),
                        PYTHONPATH=os.pathsep.join([SRC, str(tmp_path / "plugins")]))
            base.update(env or {})
            result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, env=base, cwd=tmp_path / "cwd")
            assert result.returncode == 0, result.stderr
            return json.loads(result.stdout.strip().splitlines()[-1])

        def primed(self):
            """Two runs: keyring asked once, then remembered."""
            first = self.run()
            assert first["imported"] and first["problem"] == NO_BACKEND
            second = self.run()
            assert not second["imported"] and second == {**first, "imported": False}
            return second

    return Box()


def test_the_first_run_asks_keyring_and_the_next_does_not(box):
    first = box.run()
    assert first["imported"] and first["key"] is None
    assert first["problem"] == NO_BACKEND and NO_BACKEND in first["hint"]
    assert box.cache.is_file()
    kept = json.loads(box.cache.read_text())
    # Only the verdict: no secret, no provider name.
    assert [e["problem"] for e in kept["no_backend"]] == [NO_BACKEND]
    assert "lambda" not in box.cache.read_text()
    second = box.run()
    assert not second["imported"]
    assert (second["problem"], second["hint"]) == (first["problem"], first["hint"])


def touch_plugins(box):
    st = os.stat(box.path / "plugins")
    os.utime(box.path / "plugins", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    return {}


def keyring_config(box):
    config = box.path / "userhome" / ".config" / "python_keyring"
    config.mkdir(parents=True)
    (config / "keyringrc.cfg").write_text("# nothing chosen: keyring detects\n")
    return {}


def bus_socket(box):
    (box.path / "runtime" / "bus").write_text("")
    return {}


CHANGES = {
    "PYTHON_KEYRING_BACKEND":
        lambda box: {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"},
    "keyringrc.cfg created": keyring_config,
    "XDG_CONFIG_HOME moved": lambda box: {"XDG_CONFIG_HOME": str(box.path / "userhome")},
    "sys.path dir touched": touch_plugins,
    "DBUS_SESSION_BUS_ADDRESS": lambda box: {"DBUS_SESSION_BUS_ADDRESS":
                                             f"unix:path={box.path}/no-bus"},
    "runtime dir bus socket": bus_socket,
    "DISPLAY (bus autolaunch)": lambda box: {"DISPLAY": ":99"},
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=list(CHANGES))
def test_any_change_that_could_move_keyring_makes_it_asked_again(box, change):
    before = box.primed()
    env = change(box)
    after = box.run(env=env)
    assert after["imported"]
    assert after["problem"] == before["problem"] and after["hint"] == before["hint"]


@pytest.mark.parametrize("env", [{"DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"},
                                 {"DISPLAY": ":99"}], ids=["dbus", "display"])
def test_where_a_bus_could_be_reached_keyring_is_always_asked(box, env):
    assert box.run(env=env)["imported"] and box.run(env=env)["imported"]
    assert not box.cache.exists()


def test_a_key_in_a_real_backend_is_found(box):
    box.primed()
    (box.path / "plugins" / "ring.py").write_text(RING)
    found = box.run(env={"PYTHON_KEYRING_BACKEND": "ring.Ring"})
    assert found["key"] == "sk-held-by-ring" and found["source"] == "keyring"
    assert found["problem"] is None


def test_a_backend_set_in_the_process_is_always_asked(box):
    # Same fingerprint as the remembered verdict: only keyring being imported differs.
    box.primed()
    code = RING + "\nimport keyring\nkeyring.set_keyring(Ring())\n" + FIND
    found = box.run(code=code)
    assert found["key"] == "sk-held-by-ring" and found["problem"] is None


def test_a_use_keyring_false_store_never_reads_the_verdict(box):
    box.primed()
    code = FIND.replace("CredentialStore()", "CredentialStore(use_keyring=False)")
    assert box.run(code=code)["problem"] is None


def test_a_third_party_plugin_is_never_trusted_to_stay_unviable(box):
    dist = box.path / "plugins" / "someplugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: someplugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[keyring.backends]\nsome = someplugin\n")
    (box.path / "plugins" / "someplugin.py").write_text("")
    assert box.run()["imported"] and box.run()["imported"]
    assert not box.cache.exists()


@pytest.mark.parametrize("garbage", ["{not json", "[1, 2]", '{"format": 99, "no_backend": []}',
                                     '{"format": 1, "no_backend": [{"problem": 5}]}'])
def test_a_garbage_cache_file_is_ignored(box, garbage):
    box.cache.parent.mkdir(parents=True)
    box.cache.write_text(garbage)
    found = box.run()
    assert found["imported"] and found["problem"] == NO_BACKEND
    assert not box.run()["imported"]  # replaced by a good one


def test_an_unwritable_cache_never_fails_a_lookup(box):
    (box.path / "gpucloud-home").mkdir(exist_ok=True)
    (box.path / "gpucloud-home" / "cache").write_text("a file where the directory goes")
    for _ in range(2):
        found = box.run()
        assert found["imported"] and found["problem"] == NO_BACKEND


def test_a_backend_found_by_auth_login_drops_the_verdict(box):
    box.primed()
    (box.path / "plugins" / "ring.py").write_text(RING)
    code = ("from gpucloud.config.credentials import store_credential\n"
            "import json; print(json.dumps(store_credential('lambda', 'api_key', 'k').name))")
    assert box.run(code=code, env={"PYTHON_KEYRING_BACKEND": "ring.Ring"}) == "ring.Ring"
    assert not box.cache.exists()


def test_a_second_catalog_only_offers_never_imports_keyring(box):
    code = """
import contextlib, io, json, sys
from gpucloud.cli import app
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        app(["offers", "--gpu", "h100", "--count", "8"])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "imported": "keyring" in sys.modules, "out": out.getvalue()}))
"""
    first, second = box.run(code=code), box.run(code=code)
    assert first["code"] == second["code"] == 0
    assert first["imported"] and not second["imported"]
    assert first["out"] == second["out"]
