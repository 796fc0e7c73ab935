"""What a provider's own figures say that an offer's price cannot reaches the
user: `gpucloud offers --json` carries the offer's notes. Vast.ai answers at the
HTTP transport (respx) with the spec-derived search body
(tests/fixtures/vastai/search_offers_200_wrapped_list.json)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import respx
from typer.testing import CliRunner

from gpucloud.cli import app

SEARCH = Path(__file__).resolve().parent.parent / "fixtures" / "vastai" / \
    "search_offers_200_wrapped_list.json"


def test_offers_json_carries_a_quote_its_parts_do_not_add_up_to(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_VASTAI_API_KEY", "vast-key-0123456789")
    payload = json.loads(SEARCH.read_text())
    # dph_base 2 + storage_cost 0.45 x 32 GB / 720 = 2.02; Vast quotes 2.5.
    payload["offers"][0].update(gpu_name="H100 SXM", gpu_ram=81920, num_gpus=1,
                                dph_base=2, storage_cost=0.45, dph_total=2.5)
    with respx.mock(assert_all_mocked=True, assert_all_called=True) as router:
        router.post("https://console.vast.ai/api/v0/bundles/").mock(
            return_value=httpx.Response(200, json=payload))
        result = CliRunner().invoke(app, ["offers", "--gpu", "h100", "--count", "1",
                                          "--provider", "vastai", "--json"])
    assert result.exit_code == 0, result.output
    [offer] = [o for o in json.loads(result.stdout)["offers"] if o["source"] == "live"]
    assert offer["price_per_hour"] == "2.5"
    [note] = offer["notes"]
    assert "$2.5/h (dph_total)" in note and "$2.020000/h" in note
