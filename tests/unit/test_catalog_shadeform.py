"""The bundled Shadeform catalog (providers/shadeform.toml), built by
scripts/build_catalog.py from SkyPilot's Shadeform CSV (catalogs/v8/shadeform)."""

from __future__ import annotations

import re
from decimal import Decimal

from gpucloud.catalog.bundled import load_catalogs
from gpucloud.catalog.gpus import gpu_info
from tests.unit.test_catalog import _load_script

# The upstream clouds of SkyPilot's CSV (the part of each name before "_").
CLOUDS = {"crusoe", "denvr", "excesssupply", "hyperstack", "lambdalabs", "massedcompute",
          "paperspace", "scaleway", "vultr"}



def test_the_catalog_names_its_source_and_every_type_its_cloud():
    cat = load_catalogs()["shadeform"]
    assert cat.api_base == "https://api.shadeform.ai/v1" and cat.as_of == "2026-11-30"
    assert re.fullmatch(r"https://github\.com/skypilot-org/skypilot-catalog/blob/"
                        r"002363dac75913b446b2d3d564ae795678849dfd/catalogs/v8/shadeform/vms\.csv",
                        cat.source_url or "")
    assert cat.default_image is None  # no --image: Shadeform's default os for the type
    assert len(cat.instance_types) == 85
    for t in cat.instance_types:
        cloud, _, shade_type = t.name.partition("_")
        assert cloud in CLOUDS and shade_type, t.name
        assert t.price is not None and t.price > 0 and t.spot_price is None
        assert t.regions


def test_prices_are_whole_machine_usd_per_hour_as_the_csv_has_them():
    # lambdalabs_H100-sxm5x8,H100,8.0,208.0,1800,31.92,saltlakecity-usa-1 in the CSV.
    [offer] = load_catalogs()["shadeform"].offers(gpu="H100", count=8,
                                                  region="saltlakecity-usa-1")
    assert offer.instance_type == "lambdalabs_H100-sxm5x8"
    assert offer.price_per_hour == Decimal("31.92") and offer.gpu_memory_gb == 80


def test_cards_gpus_py_does_not_know_are_kept_under_their_csv_name():
    cat = load_catalogs()["shadeform"]
    raw = {t.gpu for t in cat.instance_types if gpu_info(t.gpu) is None}
    assert raw == {"A16", "GAUDI2"}
    rows = [{"InstanceType": "vultr_A16x2", "AcceleratorName": "A16", "AcceleratorCount": "2.0",
             "vCPUs": "12.0", "MemoryGiB": "128", "Price": "1.02", "Region": "bangalore-india-1",
             "GpuInfo": "{'Gpus': [{'Name': 'A16', 'Count': 2.0, "
                        "'MemoryInfo': {'SizeInMiB': 16}}]}", "SpotPrice": ""}]
    [(entry, regions)] = _load_script().build_entries("shadeform", rows).items()
    assert (entry.gpu, entry.gpu_memory_gb, entry.price) == ("A16", 16, Decimal("1.02"))
    assert regions == {"bangalore-india-1"}
