"""The wheel carries the catalogs, where importlib.resources finds them."""

import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_contains_every_catalog(tmp_path):
    builders = pytest.importorskip("hatchling.builders.wheel")
    builder = builders.WheelBuilder(str(ROOT))
    [wheel] = list(builder.build(directory=str(tmp_path), versions=["standard"]))
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(n.split("/")[-1] for n in names if n.startswith("gpucloud/catalog/data/"))
    assert shipped == sorted(p.name for p in (ROOT / "providers").glob("*.toml"))
    assert "gpucloud/cli/__init__.py" in names and "gpucloud/providers/sandbox/server.py" in names
