"""Bad input gets one clear line and a documented exit code: never exit 1 (a bug)."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud.cli import app

SANDBOX = ["--provider", "sandbox"]


def invoke(*args):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("args, code", [
    (["estimate", "--gpu", "h100", "--hours", "1e30"], 2),
    (["estimate", "--gpu", "h100", "--hours", "-3"], 2),
    (["estimate", "--gpu", "h100", "--hours", "abc"], 2),
    (["create", "--gpu", "h100", *SANDBOX, "--auto-shutdown", "99999999999h", "--dry-run"], 2),
    (["create", "--gpu", "h100", *SANDBOX, "--auto-shutdown", "soon", "--dry-run"], 2),
    (["create", "--gpu", "h100", *SANDBOX, "--max-cost", "1e400", "--dry-run"], 2),
    (["create", "--gpu", "h100", *SANDBOX, "--max-cost", "-5", "--dry-run"], 2),
    (["create", "--gpu", "h100", *SANDBOX, "--max-cost", "nan", "--dry-run"], 2),
    (["offers", "--gpu", "h100", "--max-price", "-5"], 2),
    (["offers", "--gpu", "h100", "--count", "-8"], 2),
    (["create", "--gpu", "h100", "--count", "0", *SANDBOX, "--dry-run"], 2),
    (["estimate", "--gpu", "h100", "--hours", "72"], 2),  # a duration needs a unit
    (["create", "--gpu", "h100", *SANDBOX, "--auto-shutdown", "4", "--dry-run"], 2),
    (["get", "no-such-name"], 5),
    (["get", "nosuchcloud/abc"], 2),
    (["get", "runpod/abc"], 3),
])
def test_documented_exit_codes(args, code):
    for extra in ([], ["--json"]):
        result = invoke(*args, *extra)
        assert result.exit_code == code, (args, extra, result.output)
        assert "Traceback" not in result.output
        if extra:
            assert json.loads(result.stdout)["error"]["exit_code"] == code
            assert result.stderr == ""
        else:
            assert result.stderr.startswith(("error:", "Usage:"))


def write(relative, content):
    path = Path(os.environ["GPUCLOUD_HOME"]) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


BROKEN_CATALOG = """name = "vastai"\ndisplay_name = "x"\napi_base = "https://x.invalid"\n"""


@pytest.mark.parametrize("relative, content", [
    ("config.toml", "defaults = 5\n"),
    ("config.toml", "sandbox = 5\n"),
    ("config.toml", "[defaults]\nproviders = 'lambda'\n"),
    ("config.toml", b"\xff\xfe not utf-8"),
    ("config.toml", "[defaults\n"),
    ("providers/vastai.toml", BROKEN_CATALOG + "source = 5\n"),
    ("providers/vastai.toml", b"\xff\xfe"),
    ("providers/vastai.toml", BROKEN_CATALOG + '[[instance_types]]\nname = "a"\ngpu = "H100"\n'
                              'gpu_count = 1\nprice = "inf"\nregions = ["x"]\n'),
    ("providers/vastai.toml", BROKEN_CATALOG + '[[instance_types]]\nname = "a"\ngpu = "H100"\n'
                              'gpu_count = 1\nvcpus = "many"\nprice = "1"\nregions = ["x"]\n'),
    ("providers/vastai.toml", BROKEN_CATALOG + '[[instance_types]]\nname = "a"\ngpu = "H100"\n'),
    ("providers/lambda.toml", 'name = "verda"\napi_base = "https://x.invalid"\n'),
])
def test_broken_files_are_configuration_errors(relative, content):
    path = write(relative, content)
    result = invoke("offers", "--gpu", "h100")
    assert result.exit_code == 3, result.output
    assert str(path) in result.stderr or path.name in result.stderr
    assert "Traceback" not in result.output
