"""Hostile files against the real CLI, each in its own process under a time and
memory bound (so a regression fails here instead of hanging the suite): an
alias bomb, 100,000 levels of nesting, an oversized file and NUL characters
are refused as spec errors (exit 2) naming the file; a config.toml nested past
what tomllib can recurse through is a configuration error (exit 3), never a
crash (exit 1)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

JOB = "name: train\nimage: busybox\nresources: {gpu: h100}\n"
LIMIT_S = 60                      # the fixed gpucloud answers in about a second
MEMORY = 3 * 1024 * 1024 * 1024   # bytes of address space: a bomb expanding hits this first


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """``levels`` anchors, each a list of ``width`` aliases of the one before:
    a few hundred bytes standing for width**levels strings."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    return "\n".join(lines) + f"\n{JOB}args: *a{levels - 1}\n"


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def gpucloud(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLOUD_")}
    env.update(GPUCLOUD_HOME=str(home), HOME=str(home),
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    env.pop("KUBECONFIG", None)
    try:
        return subprocess.run([sys.executable, "-m", "gpucloud", *args], capture_output=True,
                              text=True, env=env, timeout=LIMIT_S, preexec_fn=_bounded)
    except subprocess.TimeoutExpired:
        pytest.fail(f"gpucloud {' '.join(args)} still ran after {LIMIT_S} s")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir(exist_ok=True)
    return path


def write(tmp_path: Path, text: str, name: str = "job.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a run refused as a spec error (exit 2), never a crash."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    return done.stderr


@pytest.mark.parametrize("command", [["submit", "--dry-run", "--provider", "sandbox"],
                                     ["queue", "submit"]])
def test_an_alias_bomb_is_refused_at_once(tmp_path, home, command):
    bomb = alias_bomb()
    assert len(bomb.encode()) < 600  # the point: tiny text, 9**9 values
    path = write(tmp_path, bomb)
    err = refused(gpucloud(*command, path, home=home))
    assert path in err and "more than 100,000 values" in err and "alias" in err, err


@pytest.mark.parametrize("command", [["submit", "--dry-run", "--provider", "sandbox"],
                                     ["queue", "submit"]])
def test_nesting_100000_levels_deep_is_a_spec_error_naming_the_file(tmp_path, home, command):
    path = write(tmp_path, JOB + "args: " + "[" * 100_000 + "]" * 100_000 + "\n")
    err = refused(gpucloud(*command, path, home=home))
    assert path in err and "nested deeper than 64 levels" in err, err


def test_a_job_file_over_1_mib_is_refused_with_the_limit_named(tmp_path, home):
    path = write(tmp_path, JOB + "# padding\n" * 120_000)  # valid YAML, 1.2 MB
    err = refused(gpucloud("submit", "--dry-run", "--provider", "sandbox", path, home=home))
    assert path in err and "larger than 1 MiB" in err, err


@pytest.mark.parametrize("command", [["submit", "--dry-run", "--provider", "sandbox"],
                                     ["queue", "submit"]])
def test_a_nul_escape_in_a_job_field_is_refused_naming_the_field(tmp_path, home, command):
    path = write(tmp_path, JOB + 'args: ["--out", "run\\0.log"]\n')  # YAML's "\0" is NUL
    err = refused(gpucloud(*command, path, home=home))
    assert path in err and "args" in err and "NUL" in err and "item 1" in err, err


def test_a_config_toml_nested_100000_deep_is_a_configuration_error(home):
    (home / "config.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    done = gpucloud("offers", "--gpu", "h100", home=home)
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert "config.toml is refused: nested deeper than 32 levels" in done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
