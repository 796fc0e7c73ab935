"""`gpucloud --help` must stay close to the bare cost of importing typer."""

import json
import subprocess
import sys

HEAVY = ("httpx", "httpcore", "keyring", "pydantic", "gpucloud.adapters", "gpucloud.client",
         "gpucloud._http", "platformdirs", "sqlite3")

PROBE = """
import json, sys, io, contextlib
from gpucloud.cli import app
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        app(ARGS)
    except SystemExit:
        pass
print(json.dumps({"modules": sorted(sys.modules), "help": out.getvalue()}))
"""


def loaded(args):
    code = PROBE.replace("ARGS", repr(args))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_help_imports_nothing_heavy():
    probe = loaded(["--help"])
    assert "Commands" in probe["help"] and "create" in probe["help"]
    heavy = [m for m in probe["modules"] if m.split(".")[0] in HEAVY or
             any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == []


def test_command_help_imports_nothing_heavy():
    probe = loaded(["create", "--help"])
    assert "--max-cost" in probe["help"]
    # (typer itself loads pydantic to coerce parameters, so it is not checked here)
    assert not any(m.startswith(("httpx", "keyring", "gpucloud.adapters", "gpucloud.client"))
                   for m in probe["modules"])


def test_probe_would_notice_a_heavy_import():
    # Guard against a probe that cannot fail: importing the client does load httpx.
    code = "import sys, gpucloud.client; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
