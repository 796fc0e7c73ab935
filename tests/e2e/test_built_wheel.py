"""The package as a machine gets it: the wheel built from this tree, installed
into a fresh virtual environment, runs `gpucloud reap --dry-run` and `gpucloud
worker --help`; and the Dockerfile that builds the gpucloud image installs that
wheel. Offline: the wheel is built without build isolation (hatchling from the
test environment) and installed with --no-index --no-deps, its dependencies
seen from the running interpreter's site-packages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, (argv, result.stdout[-2000:], result.stderr[-2000:])
    return result


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("hatchling")
    tmp = tmp_path_factory.mktemp("wheel")
    offline = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
        "--no-index", "--wheel-dir", tmp / "dist", ROOT, env=offline)
    [wheel] = (tmp / "dist").glob("gpucloud-*.whl")
    home = tmp / "venv"
    run(sys.executable, "-m", "venv", home)
    # The fresh venv sees the test environment's packages (httpx, typer, ...)
    # after its own: gpucloud itself must come from the wheel.
    [own] = list(home.glob("lib/python*/site-packages"))
    (own / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(home / "bin" / "python", "-m", "pip", "install", "--no-index", "--no-deps", wheel,
        env=offline)
    return home


def test_the_installed_wheel_runs_the_reaper_and_the_worker(venv: Path,
                                                            tmp_path: Path) -> None:
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCLOUD_", "PYTHON"))}
    env |= {"GPUCLOUD_HOME": str(tmp_path / "home"), "HOME": str(tmp_path),
            "GPUCLOUD_SANDBOX_NATIVE_TIMER": "0"}
    where = run(venv / "bin" / "python", "-c", "import gpucloud; print(gpucloud.__file__)",
                env=env).stdout
    assert where.startswith(str(venv)), where  # not this source tree
    reap = run(venv / "bin" / "gpucloud", "reap", "--dry-run", env=env)
    assert re.search(r"reap: \d+ gpucloud machine\(s\) on .*would terminate 0", reap.stderr)
    worker = run(venv / "bin" / "gpucloud", "worker", "--help", env=env)
    assert "--queue" in worker.stdout and "--idle" in worker.stdout
    assert time.monotonic() - started < 60


def test_the_wheel_bundles_the_shadeform_catalog_and_adapter(venv: Path, tmp_path: Path) -> None:
    # The repository's providers/ becomes gpucloud/catalog/data in the wheel.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUCLOUD_", "PYTHON"))}
    env |= {"GPUCLOUD_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    out = run(venv / "bin" / "python", "-c",
              "from gpucloud.catalog.bundled import load_catalogs; "
              "from gpucloud.providers.registry import adapter_class; "
              "c = load_catalogs()['shadeform']; "
              "print(c.path, len(c.instance_types), adapter_class('shadeform').__name__)",
              env=env).stdout.split()
    assert out[0].startswith(str(venv)) and out[0].endswith("catalog/data/shadeform.toml")
    assert int(out[1]) > 0 and out[2] == "ShadeformProvider"


def test_the_dockerfile_builds_the_wheel_and_runs_gpucloud() -> None:
    """`docker build` needs a daemon the test machines lack: this reads the file.
    Every COPY source exists here, the wheel is built then pip-installed, and
    the entrypoint is gpucloud."""
    text = (ROOT / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert lines[0].startswith("FROM python:") and " AS build" in lines[0]
    copies = [line.split()[1:-1] for line in lines if line.startswith("COPY ")
              and "--from=" not in line]
    for source in (s for sources in copies for s in sources):
        assert (ROOT / source).exists(), source
    assert any(line.startswith("RUN pip wheel") and "--no-deps" in line for line in lines)
    final = lines[max(i for i, line in enumerate(lines) if line.startswith("FROM ")):]
    assert any(line.startswith("RUN pip install") and "/dist/gpucloud-" in line
               and ".whl" in line for line in final)
    assert 'ENTRYPOINT ["gpucloud"]' in final
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    for source in (s for sources in copies for s in sources):
        assert f"!{source.rstrip('/').removeprefix('./')}" in ignored, source
