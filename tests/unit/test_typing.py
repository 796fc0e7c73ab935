"""The public API is typed: py.typed ships, mypy --strict
passes on the modules behind `gpucloud.__all__` and on a user's script of the
public API, and no public signature says `Any`. The transport (every module of
gpucloud/transport) passes mypy --strict too: it is what every adapter's
requests go through."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import gpucloud

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_MODULES = ["__init__.py", "client/__init__.py", "client/sync_client.py",
                  "client/async_client.py", "client/provider_calls.py", "models.py",
                  "errors.py", "catalog/gpus.py", "jobs/spec.py", "types.py",
                  "compat/__init__.py"]


def test_py_typed_ships_with_the_package() -> None:
    assert (Path(gpucloud.__file__).parent / "py.typed").is_file()


def _mypy_strict(files: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(cache), "--python-version", "3.11", *files],
        capture_output=True, text=True, cwd=ROOT, check=False)


def test_mypy_strict_on_the_public_api(tmp_path: Path) -> None:
    files = [str(ROOT / "src" / "gpucloud" / m) for m in PUBLIC_MODULES]
    files.append(str(ROOT / "tests" / "typing" / "public_api.py"))
    result = _mypy_strict(files, tmp_path / "mypy-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_on_the_transport(tmp_path: Path) -> None:
    files = sorted(str(p) for p in (ROOT / "src" / "gpucloud" / "transport").glob("*.py"))
    assert len(files) >= 6  # http, errors, ratelimit, tokens, bearer_auth, redaction
    result = _mypy_strict(files, tmp_path / "mypy-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_on_the_core_and_the_clients(tmp_path: Path) -> None:
    """The operations and the clients that run them: every module of core/ and
    client/ (the public modules above are checked with the user's script)."""
    src = ROOT / "src" / "gpucloud"
    files = sorted(str(p) for layer in ("core", "client") for p in (src / layer).glob("*.py"))
    assert any(f.endswith("instances.py") for f in files)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "mypy-cache"), "--python-version", "3.11", *files],
        capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_catches_a_misuse(tmp_path: Path) -> None:
    script = tmp_path / "misuse.py"
    script.write_text("from gpucloud import Client\n"
                      "machines: list[object] = Client().create(gpu='h100')\n"
                      "Client().create(gpu='h100', max_cost=1.5)\n")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "c"),
         str(script)], capture_output=True, text=True, check=False,
        env={"MYPYPATH": str(ROOT / "src"), "PATH": ""})
    assert result.returncode == 1
    assert "misuse.py:2" in result.stdout and "misuse.py:3" in result.stdout


def _public_callables() -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for name in gpucloud.__all__:
        value = getattr(gpucloud, name)
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                if callable(member) and (not attr.startswith("_") or attr == "__init__"):
                    out.append((f"{name}.{attr}", member))
        elif callable(value):
            out.append((name, value))
    return out


def test_no_any_in_public_signatures() -> None:
    offenders = []
    for name, member in _public_callables():
        try:
            annotations = inspect.get_annotations(member)  # type: ignore[arg-type]
        except TypeError:
            continue
        if any("Any" in str(a) for a in annotations.values()):
            offenders.append(name)
    assert offenders == []


def test_the_lazy_table_the_all_list_and_the_typing_imports_agree() -> None:
    import ast

    tree = ast.parse((ROOT / "src" / "gpucloud" / "__init__.py").read_text())
    typed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    typed |= {a.asname or a.name for a in stmt.names}
    lazy = set(gpucloud._LAZY)
    assert set(gpucloud.__all__) == lazy | {"__version__"}
    assert typed == lazy
    for name in gpucloud.__all__:
        assert getattr(gpucloud, name) is not None


def test_sdk_hints_name_the_argument_not_the_flag() -> None:
    import pytest

    from gpucloud import Client, SpecError

    # The CLI's run names --count and --max-price (tests/cli/test_cli_polish.py).
    with pytest.raises(SpecError) as err:
        Client().offers(gpu="h100", count=0)
    assert "count=" in (err.value.hint or "") and "--count" not in (err.value.hint or "")
    with pytest.raises(SpecError) as err:
        Client().offers(gpu="h100", count=8, max_price="-1")
    assert "max_price=" in (err.value.hint or "") and "--max-price" not in (err.value.hint or "")
