"""Where gpucloud comes from on unattended machines: config.toml's [remote]
install / image, the one source the reaper's systemd units and CronJob and the
worker jobs all use; what `reap --install` and `queue workers add` say about
it; and that no provider key ever goes with it."""

from __future__ import annotations

import json
import os
import shlex
import sys
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from gpucloud import __version__
from gpucloud.safety import reaper_install
from gpucloud.machine import remote_install
from gpucloud.cli import app
from gpucloud.config.settings import load_config
from gpucloud.errors import ConfigurationError
from gpucloud.queue import provision

WHEEL = "https://example.com/releases/gpucloud-0.1.0-py3-none-any.whl#sha256=ab12"
GIT = "git+https://github.com/example/gpucloud@v0.1.0"
IMAGE = "ghcr.io/example/gpucloud:0.1.0"
REDIS = "rediss://default:pw-remote@redis.example.com:6380/0"


def write_config(text: str) -> Path:
    home = Path(os.environ["GPUCLOUD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)
    return home / "config.toml"


def source() -> remote_install.InstallSource:
    return remote_install.source(load_config())


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("value, kind", [
    ("gpucloud==0.1.0", "index"), ("gpucloud ~= 0.1", "index"),
    ("gpucloud[extra]>=0.1,<0.2", "index"), (WHEEL, "wheel"),
    ("file:///opt/wheels/gpucloud-0.1.0-py3-none-any.whl", "wheel"), (GIT, "git"),
])
def test_each_accepted_form_is_the_one_source(value: str, kind: str) -> None:
    write_config(f"[remote]\ninstall = {json.dumps(value)}\n")
    got = source()
    assert (got.requirement, got.kind, got.configured, got.image) == (value, kind, True, None)
    assert got.caveat() is None  # the user chose it: nothing to second-guess


@pytest.mark.parametrize("text, fragment", [
    ('install = "pip install gpucloud"', "is not gpucloud==VERSION"),
    ('install = "requests==2.0"', "is not gpucloud==VERSION"),
    ('install = "http://example.com/gpucloud-0.1.0-py3-none-any.whl"', "is not gpucloud"),
    ('install = "https://example.com/gpucloud.tar.gz"', "is not gpucloud"),
    ('install = "git+ssh://git@github.com/example/gpucloud"', "is not gpucloud"),
    ('install = "https://user:tok@example.com/gpucloud-0.1.0-py3-none-any.whl"',
     "may hold credentials"),
    ('install = "git+https://tok@github.com/example/gpucloud"', "may hold credentials"),
    ('install = "https://bucket.example.com/gpucloud-0.1.0-py3-none-any.whl'
     '?X-Amz-Credential=AKIA&X-Amz-Signature=tok"', "may hold credentials"),
    ('install = "https://gitlab.example.com/gpucloud-0.1.0-py3-none-any.whl'
     '?private_token=tok"', "may hold credentials"),
    ('install = "gpucloud==0.1.0\\nrm -rf /"', "one-line string"),
    ("install = 3", "one-line string"),
    ('image = "ghcr.io/x/y z"', "container image reference"),
    ('imag = "x"', "unknown key remote.imag"),
])
def test_a_bad_remote_section_is_one_line_with_a_hint(text: str, fragment: str) -> None:
    path = write_config(f"[remote]\n{text}\n")
    with pytest.raises(ConfigurationError) as caught:
        load_config()
    assert fragment in caught.value.message and str(path) in caught.value.message
    assert caught.value.hint
    assert "tok" not in caught.value.message + caught.value.hint  # the value is never echoed
    result = cli("reap", "--install")
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert fragment in result.stderr


def test_the_default_is_this_version_from_the_index_and_says_it_is_unverified() -> None:
    got = source()
    assert (got.requirement, got.kind, got.configured) == (f"gpucloud=={__version__}",
                                                          "index", False)
    caveat = got.caveat() or ""
    assert f"make sure gpucloud=={__version__} is on the package index" in caveat
    assert "[remote] install" in caveat


def test_a_local_build_is_named_as_one_no_public_index_can_hold() -> None:
    got = remote_install.source(load_config(), version="0.1.0+g1234abc")
    assert got.requirement == "gpucloud==0.1.0+g1234abc"
    assert "is a local build" in (got.caveat() or "")


def test_worker_jobs_install_the_configured_source() -> None:
    write_config(f'[remote]\ninstall = "{WHEEL}"\n')
    spec = provision.worker_spec("q", gpu="h100")
    assert spec.image == provision.DEFAULT_IMAGE
    assert spec.command == ["sh", "-c", f"pip install --no-cache-dir --quiet '{WHEEL}' && "
                                        "exec gpucloud worker --queue q --idle 10m"]


def test_a_git_source_brings_git_where_the_image_lacks_it() -> None:
    write_config(f'[remote]\ninstall = "{GIT}"\n')
    shell = provision.worker_spec("q", gpu="h100").command[2]
    assert shell.index("command -v git") < shell.index(f"pip install --no-cache-dir --quiet {GIT}")


def test_the_remote_image_runs_gpucloud_as_it_is_unless_image_is_given() -> None:
    write_config(f'[remote]\nimage = "{IMAGE}"\n')
    spec = provision.worker_spec("q", gpu="h100")
    assert spec.image == IMAGE
    assert spec.command == ["gpucloud", "worker", "--queue", "q", "--idle", "10m"]
    own = provision.worker_spec("q", gpu="h100", image="nvcr.io/nvidia/pytorch:24.05-py3")
    assert own.image == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert "pip install --no-cache-dir --quiet gpucloud==" in own.command[2]


def cronjob(text: str) -> dict[str, Any]:
    body = yaml.safe_load(text)
    kubernetes_validate.validate(body, "1.30.0", strict=True)
    return body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]


def test_the_cronjob_pip_installs_the_source_or_runs_the_image() -> None:
    odd = "https://example.com/a%20b/it's/\"z\"/gpucloud-0.1.0-py3-none-any.whl"
    write_config(f"[remote]\ninstall = {json.dumps(odd)}\n")
    container = cronjob(reaper_install.render(["GPUCLOUD_LAMBDA_API_KEY"], source()).cronjob)
    assert container["image"] == reaper_install.IMAGE
    assert container["command"] == ["sh", "-c"]
    assert container["args"] == [f"pip install --no-cache-dir --quiet {shlex.quote(odd)} && "
                                 "exec gpucloud reap"]
    write_config(f'[remote]\ninstall = "{WHEEL}"\nimage = "{IMAGE}"\n')
    container = cronjob(reaper_install.render(["GPUCLOUD_LAMBDA_API_KEY"], source()).cronjob)
    assert (container["image"], container["command"], container["args"]) == (
        IMAGE, ["gpucloud"], ["reap"])


def exec_start_pre(service: str) -> list[str]:
    """The ExecStartPre argv as systemd hands it over (systemd.service(5):
    quotes, C escapes, "$$" and "%%")."""
    [line] = [line for line in service.splitlines() if line.startswith("ExecStartPre=")]
    return shlex.split(line.removeprefix("ExecStartPre=").replace("$$", "$").replace("%%", "%"))


def test_without_remote_install_the_service_runs_this_computers_gpucloud() -> None:
    """The default source (this version from the index) may not exist: a unit
    that had to install it would fail every minute and never reap."""
    service = reaper_install.render([], source()).service
    assert "ExecStartPre=" not in service
    assert f"ExecStart={sys.executable} -m gpucloud reap" in service


def test_the_service_installs_into_its_own_venv_once_per_source(tmp_path: Path) -> None:
    odd = "https://example.com/it's%20here/gpucloud-0.1.0-py3-none-any.whl"
    write_config(f"[remote]\ninstall = {json.dumps(odd)}\n")
    service = reaper_install.render([], source()).service
    venv = Path(os.environ["GPUCLOUD_HOME"]) / reaper_install.VENV
    assert f"ExecStart={venv}/bin/gpucloud reap" in service
    argv = exec_start_pre(service)
    assert argv[-2:] == [str(venv), odd]
    # A python3 whose venv's pip records what it is asked to install.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        '#!/bin/sh\n[ "$1 $2" = "-m venv" ] || exit 9\nmkdir -p "$3/bin"\n'
        'printf \'#!/bin/sh\\necho "$*" >>"%s"\\n\' "$3/pip.log" >"$3/bin/pip"\n'
        'chmod +x "$3/bin/pip"\n')
    (bin_dir / "python3").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}

    def start(args: list[str]) -> None:
        subprocess.run(args, check=True, env=env, timeout=30)
    start(argv)
    start(argv)  # every minute: installed already, nothing to do
    log = (venv / "pip.log").read_text().splitlines()
    assert log == [f"install --quiet --disable-pip-version-check --upgrade {odd}"]
    start([*argv[:-1], WHEEL])  # the source changed: installed again
    assert (venv / "pip.log").read_text().splitlines()[1].endswith(WHEEL)


def test_reap_install_says_where_gpucloud_comes_from(tmp_path: Path) -> None:
    default = cli("reap", "--install")
    assert default.exit_code == 0
    assert (f"gpucloud will be installed on the machine from: gpucloud=={__version__} "
            "(the package index; the default: this version)") in default.stderr
    assert "warning: make sure gpucloud==" in default.stderr
    write_config(f'[remote]\ninstall = "{GIT}"\nimage = "{IMAGE}"\n')
    chosen = cli("reap", "--install")
    assert f"from: {GIT} (a git repository; [remote] install in config.toml)" in chosen.stderr
    assert f"the CronJob runs the image {IMAGE}" in chosen.stderr
    assert "warning" not in chosen.stderr
    data = json.loads(cli("reap", "--install", "--json").stdout)
    assert data["install_source"] == {"install": GIT, "kind": "git", "image": IMAGE,
                                      "configured": True, "caveat": None}


def workers_add(*extra: str) -> Any:
    return cli("queue", "workers", "add", "2", "--gpu", "h100", "--provider", "sandbox",
               "--redis", REDIS, "--dry-run", *extra)


def test_workers_add_dry_run_says_where_gpucloud_comes_from() -> None:
    default = workers_add()
    assert default.exit_code == 0, default.output
    assert f"gpucloud will be installed on the machine from: gpucloud=={__version__}" \
        in default.stdout
    assert f"warning: make sure gpucloud=={__version__} is on the package index" \
        in default.stderr
    write_config(f'[remote]\ninstall = "{WHEEL}"\nimage = "{IMAGE}"\n')
    imaged = workers_add()
    assert f"gpucloud will run on the machine from the image {IMAGE}" in imaged.stdout
    assert "warning" not in imaged.stderr
    own = workers_add("--image", "nvcr.io/nvidia/pytorch:24.05-py3", "--json")
    data = json.loads(own.stdout)
    assert data["install_source"]["image_used"] is False
    assert WHEEL in data["job"]["command"][2] and data["warnings"] == []


def test_no_provider_key_goes_with_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("GPUCLOUD_LAMBDA_API_KEY", "GPUCLOUD_RUNPOD_API_KEY"):
        monkeypatch.setenv(key, "provider-key-stays-here")
    write_config(f'[remote]\ninstall = "{WHEEL}"\n')
    files = reaper_install.render(["GPUCLOUD_LAMBDA_API_KEY"], source())
    job = provision.worker_spec("q", gpu="h100").model_dump(mode="json")
    for text in (files.service, files.cronjob, json.dumps(job)):
        assert "provider-key-stays-here" not in text
