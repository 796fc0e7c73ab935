"""The 0.1.0 module paths (gpucloud.compat.MOVED) still import, as deprecated
aliases: the old name is the new module object itself, with a DeprecationWarning
that names the new path; a monkeypatch through an old path patches the new
module; a name an old module held is forwarded by the package that took its
name; and the new paths import without a DeprecationWarning."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from gpucloud import compat

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

# Runs in a fresh interpreter: each old path imported once, its warnings recorded.
_IMPORT_OLD = r"""
import importlib, json, sys, warnings
from gpucloud import compat
out = {}
for old in json.loads(sys.argv[1]):
    new = "gpucloud." + compat.new_name(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module("gpucloud." + old)
    target = importlib.import_module(new)
    if any(key.startswith(old + ".") for key in compat.MOVED):
        # an old package whose modules moved under other names: a stand-in that
        # forwards to the new package (so importing an old submodule never sets
        # a wrong attribute on the new one)
        names = getattr(target, "__all__", [])
        same = bool(names) and all(getattr(module, n) is getattr(target, n) for n in names)
    else:
        same = module is target and sys.modules["gpucloud." + old] is sys.modules[new]
    out[old] = {"same": same,
                "new": new,
                "warnings": [str(w.message) for w in caught
                             if issubclass(w.category, DeprecationWarning)]}
print(json.dumps(out))
"""


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(SRC), "PATH": ""}, check=False)


def _import_old(paths: list[str]) -> dict[str, dict[str, object]]:
    result = _python("-c", _IMPORT_OLD, json.dumps(paths))
    assert result.returncode == 0, result.stderr
    answer: dict[str, dict[str, object]] = json.loads(result.stdout)
    return answer


def test_every_old_path_is_the_new_module_with_a_warning_naming_it() -> None:
    found = _import_old(sorted(compat.MOVED))
    wrong = []
    for old, seen in found.items():
        expected = f"gpucloud.{old} moved to {seen['new']}"
        if not seen["same"]:
            wrong.append(f"gpucloud.{old}: a second module object, not {seen['new']}")
        if not any(expected in str(m) for m in seen["warnings"]):  # type: ignore[attr-defined]
            wrong.append(f"gpucloud.{old}: no DeprecationWarning naming {seen['new']}: "
                         f"{seen['warnings']}")
    assert wrong == [], "\n".join(wrong)
    assert set(found) == set(compat.MOVED)


@pytest.mark.parametrize("old", ["ssh", "adapters.sandbox.server", "cli.instance_cmds"])
def test_an_old_path_first_thing_in_a_fresh_interpreter(old: str) -> None:
    # alone, before anything else of gpucloud's is loaded; a moved package's
    # submodule (adapters.sandbox.server) is covered by the package's entry
    seen = _import_old([old])[old]
    assert seen["same"] is True
    assert seen["new"] == "gpucloud." + compat.new_name(old)  # type: ignore[operator]
    # one warning per old name loaded: an old parent package (adapters) warns too
    messages = seen["warnings"]
    assert isinstance(messages, list)
    assert messages[-1].startswith(f"gpucloud.{old} moved to {seen['new']};")
    parts = old.split(".")
    prefixes = {"gpucloud." + ".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    assert all(m.split(" moved to ")[0] in prefixes for m in messages), messages


def test_a_monkeypatch_on_an_old_path_patches_the_new_module(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gpucloud.machine import ssh

    def fake_binary() -> str:
        return "/opt/fake/ssh"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        monkeypatch.setattr("gpucloud.ssh.ssh_binary", fake_binary)
    assert ssh.ssh_binary is fake_binary
    assert ssh.ssh_binary() == "/opt/fake/ssh"


def test_a_name_of_an_old_module_is_forwarded_by_the_package_with_a_warning() -> None:
    result = _python("-W", "always::DeprecationWarning", "-c",
                     "from gpucloud.config import load_config\n"
                     "from gpucloud.config.settings import load_config as new\n"
                     "assert load_config is new\n")
    assert result.returncode == 0, result.stderr
    assert "gpucloud.config.load_config moved to gpucloud.config.settings.load_config" \
        in result.stderr


def _new_module_names() -> list[str]:
    names = []
    for path in sorted((SRC / "gpucloud").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue  # runs the command line
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_the_new_paths_import_without_a_deprecation_warning() -> None:
    names = _new_module_names()
    assert "gpucloud.machine.ssh" in names and "gpucloud.providers.sandbox.server" in names
    result = _python("-W", "error::DeprecationWarning", "-c",
                     "import importlib, sys\n"
                     "for name in sys.argv[1:]:\n"
                     "    importlib.import_module(name)\n", *names)
    assert result.returncode == 0, result.stderr


def test_the_new_path_check_would_see_a_deprecated_import() -> None:
    # the same command, given one old path, fails: the check above can fail
    result = _python("-W", "error::DeprecationWarning", "-c",
                     "import importlib, sys\n"
                     "for name in sys.argv[1:]:\n"
                     "    importlib.import_module(name)\n", "gpucloud.machine.ssh", "gpucloud.ssh")
    assert result.returncode != 0
    assert "DeprecationWarning: gpucloud.ssh moved to gpucloud.machine.ssh" in result.stderr


def test_an_old_submodule_never_replaces_a_new_packages_attribute() -> None:
    # gpucloud.adapters.lambdalabs is providers.lambdalabs.adapter: importing it
    # must leave gpucloud.providers.lambdalabs the package.
    result = _python("-W", "ignore", "-c",
                     "import gpucloud.adapters.lambdalabs as old, gpucloud.providers as p, "
                     "gpucloud.providers.lambdalabs.adapter as new; "
                     "print(old is new, p.lambdalabs.__name__, p.lambdalabs.adapter is new)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "gpucloud.providers.lambdalabs", "True"]
