"""A fake `ssh` executable for tests: a script put first on PATH that records
its arguments and answers like OpenSSH would, so nothing touches a network."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

SCRIPT = """#!{python}
import json, os, sys, time
log = os.environ.get("FAKE_SSH_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps(sys.argv[1:]) + "\\n")
time.sleep(float(os.environ.get("FAKE_SSH_SLEEP", "0")))
code, err = int(os.environ.get("FAKE_SSH_EXIT", "0")), os.environ.get("FAKE_SSH_STDERR", "")
# FAKE_SSH_RULES: [[remote command prefix, exit code, stderr], ...], first match wins
for prefix, rule_code, rule_err in json.loads(os.environ.get("FAKE_SSH_RULES", "[]")):
    if sys.argv[-1].startswith(prefix):
        code, err = rule_code, rule_err
        break
sys.stdout.write("ran: " + " ".join(sys.argv[1:]) + "\\n")
sys.stderr.write(err)
sys.exit(code)
"""


def install(directory: Path, monkeypatch) -> Path:
    """Put the fake ssh first on PATH; returns the log file of its calls."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "ssh"
    script.write_text(SCRIPT.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log = directory / "calls.jsonl"
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    return log


def calls(log: Path) -> list[list[str]]:
    if not log.is_file():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]
