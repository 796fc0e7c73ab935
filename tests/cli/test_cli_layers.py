"""The CLI goes through the client: no command imports the operations
(gpucloud.core), the adapters (gpucloud.providers) or the HTTP layer
(gpucloud.transport), nor reaches into a client's private context."""

from __future__ import annotations

import ast
import re
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "gpucloud" / "cli"
BELOW_THE_CLIENT = ("gpucloud.core", "gpucloud.providers", "gpucloud.transport")
PRIVATE = re.compile(r"\bclient\._(ctx|engine|runner)\b|\._ctx\b|\._engine\b")


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
    return found


def offences(files: list[Path]) -> list[str]:
    out = []
    for path in files:
        for module in _imports(path):
            if any(module == b or module.startswith(b + ".") for b in BELOW_THE_CLIENT):
                out.append(f"{path.name}: imports {module}")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PRIVATE.search(line):
                out.append(f"{path.name}:{number}: {line.strip()}")
    return out


def test_the_cli_uses_only_the_client_and_the_layers_above_the_operations():
    files = sorted(CLI.rglob("*.py"))
    assert len(files) > 20
    assert offences(files) == []


def test_the_check_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from gpucloud.core.refs import needs_lookup\n"
                   "import gpucloud.transport.redaction\n"
                   "x = client._ctx.config\n", encoding="utf-8")
    assert len(offences([bad])) == 3
