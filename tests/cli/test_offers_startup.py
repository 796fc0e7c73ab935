"""A catalog-only `gpucloud offers` renders catalog rows without pydantic
(its start-up is held to 2.5x `import typer`, and pydantic alone is
~0.8x), yet prints what the SDK's Offer objects say, in text and in --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.cli import app

PROBE = """
import contextlib, io, json, sys
from gpucloud.cli import main
sys.argv = ["gpucloud"] + ARGS
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main()
    except SystemExit:
        pass
print(json.dumps({"modules": sorted(k for k, v in sys.modules.items() if v is not None),
                  "out": out.getvalue()}))
"""


def probe(args: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLOUD_")}
    env.update(GPUCLOUD_HOME=os.environ["GPUCLOUD_HOME"], HOME=os.environ["GPUCLOUD_HOME"],
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    env.pop("KUBECONFIG", None)
    done = subprocess.run([sys.executable, "-c", PROBE.replace("ARGS", repr(args))],
                          capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in ("pydantic", "pydantic_core", "httpx")]


def test_catalog_only_offers_import_no_pydantic_and_no_httpx():
    for args in (["offers", "--gpu", "h100", "--count", "8"],
                 ["offers", "--gpu", "a100", "--count", "1", "--json"],
                 ["offers", "--gpu", "h100", "--count", "8", "--max-price", "40"],
                 ["offers", "--gpu", "h100", "--count", "1", "--spot"]):
        result = probe(args)
        assert result["out"], args
        assert heavy(result["modules"]) == [], args


def test_offers_json_is_the_sdks_offers_dumped():
    result = probe(["offers", "--gpu", "h100", "--count", "8", "--json", "--limit", "0"])
    printed = json.loads(result["out"])
    sdk = Client(use_keyring=False).offers(gpu="h100", count=8)
    assert [{k: v for k, v in o.items() if k != "unknown"} for o in printed["offers"]] \
        == [o.model_dump(mode="json") for o in sdk]
    assert printed["warnings"]  # verda has no 8x H100 row: said, not dropped


def test_offers_text_is_the_same_from_rows_and_from_offers(monkeypatch):
    """The table from CatalogOffer rows equals the one from the Offers they become."""
    from gpucloud.catalog.offer import as_offers

    rows_out = CliRunner().invoke(app, ["offers", "--gpu", "h100", "--count", "8"])
    assert rows_out.exit_code == 0, rows_out.output
    real = Client._offer_rows
    monkeypatch.setattr(Client, "_offer_rows",
                        lambda self, *a, **k: as_offers(real(self, *a, **k)))
    offers_out = CliRunner().invoke(app, ["offers", "--gpu", "h100", "--count", "8"])
    assert offers_out.output == rows_out.output
