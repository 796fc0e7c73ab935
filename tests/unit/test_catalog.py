"""The bundled price catalogs (providers/*.toml) and their generator."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from gpucloud.catalog.bundled import load_catalogs
from gpucloud.errors import ConfigurationError
from gpucloud.catalog.gpus import gpu_info

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PROVIDERS_DIR = ROOT / "providers"
SCRIPT = ROOT / "scripts" / "build_catalog.py"
SHARED_CATALOG = ROOT.parent / "shared" / "catalog"
RUNPOD_V1_SPEC = ROOT.parent / "shared" / "specs" / "runpod" / "openapi-rest-v1.json"

REAL = ("lambda", "runpod", "vastai", "verda", "hyperstack")
CSV_DIR = {"lambda": "lambda", "runpod": "runpod", "vastai": "vast", "verda": "verda",
           "hyperstack": "hyperstack"}


@pytest.fixture(scope="module")
def catalogs():
    return load_catalogs()


def _providers_with(catalogs, **query) -> set[str]:
    return {o.provider for name in REAL for o in catalogs[name].offers(**query)}


def test_the_four_generated_catalogs_load(catalogs):
    assert set(REAL) <= set(catalogs)
    for name in REAL:
        cat = catalogs[name]
        assert cat.name == name
        assert cat.simulated is False
        # Lambda, Hyperstack: no image forced; a launch without --image leaves the
        # field out and gets the provider's default.
        assert bool(cat.default_image) is (name not in ("lambda", "hyperstack"))
        assert cat.instance_types, name
        assert Path(cat.path).name == f"{name}.toml"


def test_every_price_is_a_positive_decimal_written_as_a_string(catalogs):
    for name in REAL:
        for t in catalogs[name].instance_types:
            assert t.price is not None or t.spot_price is not None, (name, t.name)
            for value in (t.price, t.spot_price):
                if value is not None:
                    assert isinstance(value, Decimal), (name, t.name)
                    assert value > 0, (name, t.name)
        # On disk, money is a TOML string, never a float.
        raw = tomllib.loads((PROVIDERS_DIR / f"{name}.toml").read_text(encoding="utf-8"))
        for t in raw["instance_types"]:
            for key in ("price", "spot_price"):
                if key in t:
                    assert isinstance(t[key], str), (name, t["name"], key)
                    Decimal(t[key])


def test_every_gpu_is_a_known_canonical_name(catalogs):
    unmapped = set(_load_script().RUNPOD_UNMAPPED) | {"RTXPRO6000-WK"}
    for name in REAL:
        for t in catalogs[name].instance_types:
            # RunPod cards gpus.py does not know yet are kept raw, never dropped.
            assert gpu_info(t.gpu) is not None or (name == "runpod" and t.gpu in unmapped), (
                name, t.name, t.gpu)
            assert t.gpu_count >= 1
            assert t.regions, (name, t.name)
            assert isinstance(t.vcpus, int) and isinstance(t.memory_gb, int)
            assert isinstance(t.gpu_memory_gb, int) and t.gpu_memory_gb > 0


def test_each_file_names_its_source_and_date(catalogs):
    for name in REAL:
        cat = catalogs[name]
        assert cat.as_of == "2026-11-30"
        assert re.fullmatch(
            r"https://github\.com/skypilot-org/skypilot-catalog/blob/[0-9a-f]{40}"
            rf"/catalogs/v8/{CSV_DIR[name]}/vms\.csv", cat.source_url or ""), cat.source_url
        raw = tomllib.loads((PROVIDERS_DIR / f"{name}.toml").read_text(encoding="utf-8"))
        assert raw["source"]["note"].strip()


def test_eight_h100_offers_come_from_lambda_runpod_and_vastai(catalogs):
    # What the data holds: Verda's CSV has only a 1x H100 type; RunPod's complete
    # copy has H100 PCIe, SXM and NVL in counts up to 8; Hyperstack's has 1x to 8x.
    assert _providers_with(catalogs, gpu="H100", count=8) == {
        "lambda", "runpod", "vastai", "hyperstack"}
    assert _providers_with(catalogs, gpu="H100", count=1) == {
        "lambda", "runpod", "vastai", "verda", "hyperstack"}
    rp = {o.instance_type for o in catalogs["runpod"].offers(gpu="H100", count=8)}
    assert rp == {"8x NVIDIA H100 PCIe", "8x NVIDIA H100 80GB HBM3", "8x NVIDIA H100 NVL"}
    lam = {o.region: o for o in catalogs["lambda"].offers(gpu="H100", count=8)}
    assert lam["us-east-1"].instance_type == "gpu_8x_h100_sxm5"
    assert lam["us-east-1"].price_per_hour == Decimal("31.92")
    assert lam["us-east-1"].source == "catalog"


def test_hyperstack_rows_keep_skypilots_prices_and_an_nvlink_card_is_its_gpu(catalogs):
    """SkyPilot's hyperstack/vms.csv: n3-H100x8 CANADA-1 at 15.2; the NVLink
    flavors (PCIe cards bridged) are the card's GPU, not another model."""
    hs = {(t.name, t.memory_gb): t for t in catalogs["hyperstack"].instance_types}
    assert hs[("n3-H100x8", 1440)].price == Decimal("15.2")
    assert hs[("n3-H100x8", 1440)].regions == ("CANADA-1",)
    assert hs[("n3-A100x8-NVLink", 1920)].gpu == "A100-80GB"
    assert hs[("n3-H100x8-NVLink", 1440)].gpu == "H100"
    # One flavor, two regions, two memory sizes in the source: two rows.
    assert {t.regions for t in catalogs["hyperstack"].types_named("n3-H100-SXM5x8")} == {
        ("CANADA-1",), ("US-1",)}


def test_a_provider_without_bundled_prices_has_a_catalog_but_no_offers(catalogs):
    fs = catalogs["fluidstack"]
    assert fs.instance_types == () and fs.offers() == []
    assert "{region}" in fs.api_base


def test_lambda_tells_a100_40gb_and_80gb_apart(catalogs):
    lam = catalogs["lambda"]
    [a40] = lam.types_named("gpu_8x_a100")
    [a80] = lam.types_named("gpu_8x_a100_80gb_sxm4")
    assert (a40.gpu, a40.gpu_memory_gb) == ("A100-40GB", 40)
    assert (a80.gpu, a80.gpu_memory_gb) == ("A100-80GB", 80)
    names_80 = {o.instance_type for o in lam.offers(gpu="A100-80GB")}
    names_40 = {o.instance_type for o in lam.offers(gpu="A100-40GB")}
    assert names_80 == {"gpu_8x_a100_80gb_sxm4"}
    assert "gpu_1x_a100" in names_40 and not names_40 & names_80


def test_lambda_disk_from_the_instance_types_example(catalogs):
    lam = catalogs["lambda"]
    [h100] = lam.types_named("gpu_8x_h100_sxm5")
    assert h100.disk_gb == 22528
    # gpu_8x_v100_n is not in the example, so it has no disk size.
    assert all(t.disk_gb is None for t in lam.types_named("gpu_8x_v100_n"))


def test_runpod_names_are_count_and_gpu_type_id(catalogs):
    rp = catalogs["runpod"]
    names = {t.name for t in rp.instance_types}
    assert "8x NVIDIA A100 80GB PCIe" in names
    assert "8x NVIDIA A100-SXM4-80GB" in names
    assert "1x NVIDIA A40" in names
    for t in rp.instance_types:
        count, gpu_type_id = t.name.split("x ", 1)
        assert int(count) == t.gpu_count
        assert all(re.fullmatch(r"[A-Z]+-[A-Z]+-\d+", r) for r in t.regions), t.regions
    ids_used = {t.name.split("x ", 1)[1] for t in rp.instance_types}
    assert set(_load_script().RUNPOD_UNMAPPED) <= ids_used  # kept, under their CSV names
    if RUNPOD_V1_SPEC.exists():  # the GpuType ids RunPod accepts
        ids = set(re.findall(r'"((?:NVIDIA|AMD) [^"]+)"',
                             RUNPOD_V1_SPEC.read_text(encoding="utf-8")))
        assert ids_used - set(_load_script().RUNPOD_UNMAPPED) <= ids


def test_runpod_lists_a_region_only_where_the_source_does(catalogs):
    rp = catalogs["runpod"]
    if not SHARED_CATALOG.is_dir():
        pytest.skip("needs ../shared/catalog (the CSVs)")
    import csv

    rows = csv.DictReader((SHARED_CATALOG / "skypilot-catalog-v8" / "runpod" / "vms.csv")
                          .read_text(encoding="utf-8").splitlines())
    source: dict[tuple[str, int], set[str]] = {}
    for row in rows:
        if row["AcceleratorName"]:
            key = (row["AcceleratorName"], int(float(row["AcceleratorCount"])))
            source.setdefault(key, set()).add(row["AvailabilityZone"])
    ids = {v: k for k, v in _load_script().RUNPOD_GPU_TYPE_IDS.items()}
    assert len(rp.instance_types) == len(source)
    for t in rp.instance_types:
        gpu_type_id = t.name.split("x ", 1)[1]
        assert set(t.regions) == source[(ids.get(gpu_type_id, gpu_type_id), t.gpu_count)], t.name


def test_regions_all_means_the_files_regions(tmp_path):
    _write_user(tmp_path, "runpod", """
name = "runpod"
api_base = "https://api.runpod.io"
regions = ["EU-RO-1", "US-TX-3"]
[[instance_types]]
name = "1x NVIDIA A40"
gpu = "A40"
gpu_count = 1
price = "0.40"
regions = "all"
[[instance_types]]
name = "2x NVIDIA A40"
gpu = "A40"
gpu_count = 2
price = "0.80"
regions = ["US-TX-3"]
""")
    rp = load_catalogs(tmp_path)["runpod"]
    assert [t.regions for t in rp.instance_types] == [("EU-RO-1", "US-TX-3"), ("US-TX-3",)]


def test_regions_all_without_a_regions_list_names_the_file(tmp_path):
    path = _write_user(tmp_path, "runpod", """
name = "runpod"
api_base = "https://api.runpod.io"
[[instance_types]]
name = "1x NVIDIA A40"
gpu = "A40"
gpu_count = 1
price = "0.40"
regions = "all"
""")
    with pytest.raises(ConfigurationError, match="all") as info:
        dict(load_catalogs(tmp_path))  # files are parsed on first use
    assert str(path) in str(info.value)


def test_vast_catalog_offers_bill_disk_apart_in_720_hour_months(catalogs):
    vast = catalogs["vastai"]
    assert (vast.hours_per_month, vast.disk_billed_apart) == (720, True)
    [offer, *_] = vast.offers(gpu="H100", count=8)
    assert offer.disk_billed_apart and offer.hours_per_month == 720
    assert catalogs["lambda"].hours_per_month is None


def test_generator_keeps_an_unmapped_runpod_gpu_raw_and_says_so(capsys):
    bc = _load_script()
    row = dict(_row("1x_NEWCARD_SECURE", "NEWCARD", 48), AvailabilityZone="US-TX-3")
    [entry] = bc.build_entries("runpod", [row])
    assert (entry.name, entry.gpu) == ("1x NEWCARD", "NEWCARD")
    assert "NEWCARD" in capsys.readouterr().err


def test_vastai_regions_are_country_codes(catalogs):
    for t in catalogs["vastai"].instance_types:
        assert all(re.fullmatch(r"[A-Z]{2}", r) for r in t.regions), (t.name, t.regions)
    [h100] = catalogs["vastai"].types_named("8x-H100_SXM")
    assert h100.gpu_memory_gb == 80  # GpuInfo holds the total; per GPU here


def _write_user(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "providers" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_user_file_replaces_the_bundled_file_whole(tmp_path, catalogs):
    path = _write_user(tmp_path, "lambda", """
name = "lambda"
display_name = "My Lambda"
api_base = "https://cloud.lambda.ai"

[source]
as_of = "2027-01-01"

[[instance_types]]
name = "gpu_8x_h100_sxm5"
gpu = "H100"
gpu_count = 8
price = "19.99"
regions = ["us-east-1"]
""")
    mine = load_catalogs(tmp_path)
    lam = mine["lambda"]
    assert lam.path == str(path)
    assert lam.display_name == "My Lambda"
    assert lam.as_of == "2027-01-01"
    assert lam.source_url is None  # nothing merged in from the bundled file
    assert [t.name for t in lam.instance_types] == ["gpu_8x_h100_sxm5"]
    assert lam.instance_types[0].price == Decimal("19.99")
    assert lam.instance_types[0].disk_gb is None
    # The other bundled files are untouched.
    assert mine["verda"].instance_types == catalogs["verda"].instance_types


def test_invalid_toml_names_the_file(tmp_path):
    path = _write_user(tmp_path, "lambda", "name = \n[[instance_types]\n")
    with pytest.raises(ConfigurationError) as info:
        dict(load_catalogs(tmp_path))  # files are parsed on first use
    assert str(path) in str(info.value)


def test_missing_field_names_the_file(tmp_path):
    # No api_base.
    path = _write_user(tmp_path, "verda", 'name = "verda"\ndisplay_name = "Verda"\n')
    with pytest.raises(ConfigurationError) as info:
        dict(load_catalogs(tmp_path))  # files are parsed on first use
    assert str(path) in str(info.value)
    assert "api_base" in str(info.value)


def test_bad_price_names_the_file(tmp_path):
    path = _write_user(tmp_path, "runpod", """
name = "runpod"
api_base = "https://api.runpod.io"
[[instance_types]]
name = "1x NVIDIA A40"
gpu = "A40"
gpu_count = 1
price = "cheap"
""")
    with pytest.raises(ConfigurationError) as info:
        dict(load_catalogs(tmp_path))  # files are parsed on first use
    assert str(path) in str(info.value)


def test_an_absurd_price_names_the_file(tmp_path):
    path = _write_user(tmp_path, "runpod", """
name = "runpod"
api_base = "https://api.runpod.io"
[[instance_types]]
name = "1x NVIDIA A40"
gpu = "A40"
gpu_count = 1
price = "1e9"
regions = ["US-TX-3"]
""")
    with pytest.raises(ConfigurationError) as info:
        dict(load_catalogs(tmp_path))  # files are parsed on first use
    assert str(path) in str(info.value)


def _load_script():
    spec = importlib.util.spec_from_file_location("build_catalog", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_catalog"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop("build_catalog", None)
    return module


def _row(name: str, accel: str, mib: int, count: int = 1) -> dict[str, str]:
    info = {"Gpus": [{"Name": accel, "Count": count, "MemoryInfo": {"SizeInMiB": mib}}]}
    return {"InstanceType": name, "AcceleratorName": accel, "AcceleratorCount": f"{count}.0",
            "vCPUs": "8.0", "MemoryGiB": "64.0", "Price": "1.50", "Region": "us-east-1",
            "GpuInfo": str(info), "SpotPrice": ""}


def test_generator_fails_loudly_on_an_unknown_gpu():
    bc = _load_script()
    good = bc.build_entries("lambda", [_row("gpu_1x_a100", "A100", 40960)])
    [entry] = good
    assert (entry.gpu, entry.gpu_memory_gb, entry.price) == ("A100-40GB", 40, Decimal("1.50"))
    with pytest.raises(bc.BuildError, match="Voodoo5"):
        bc.build_entries("lambda", [_row("gpu_1x_voodoo", "Voodoo5", 8192)])


def test_generator_groups_regions_and_skips_cpu_rows():
    bc = _load_script()
    rows = [_row("gpu_1x_a10", "A10", 24576), dict(_row("gpu_1x_a10", "A10", 24576),
                                                   Region="us-west-1"),
            dict(_row("gpu_1x_a10", "A10", 24576), Region="eu-1", Price="1.60"),
            dict(_row("cpu_4x", "", 0), AcceleratorName="", AcceleratorCount="", GpuInfo="")]
    groups = bc.build_entries("lambda", rows)
    by_price = {e.price: sorted(r) for e, r in groups.items()}
    assert by_price == {Decimal("1.50"): ["us-east-1", "us-west-1"], Decimal("1.60"): ["eu-1"]}


@pytest.mark.skipif(not SHARED_CATALOG.is_dir(), reason="needs ../shared/catalog (the CSVs)")
def test_generator_reproduces_the_committed_files(tmp_path):
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(SCRIPT), "--source", str(SHARED_CATALOG),
                    "--out", str(out)], check=True, capture_output=True)
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(f"{name}.toml" for name in _load_script().PROVIDERS)
    for name in written:
        assert (out / name).read_bytes() == (PROVIDERS_DIR / name).read_bytes(), name


def test_the_lambda_disk_table_matches_the_example_when_present():
    example = (ROOT.parent / "shared" / "specs" / "lambda" / "examples"
               / "list_instance_types_200.json")
    if not example.exists():
        pytest.skip("needs ../shared/specs")
    data = json.loads(example.read_text(encoding="utf-8"))["data"]
    expected = {k: v["instance_type"]["specs"]["storage_gib"] for k, v in data.items()
                if v["instance_type"]["specs"]["gpus"] > 0}
    assert _load_script().LAMBDA_STORAGE_GIB == expected


def test_offers_h100_x8_without_credentials_shows_lambda_runpod_and_vastai():
    from typer.testing import CliRunner

    from gpucloud.cli import app

    result = CliRunner().invoke(app, ["offers", "--gpu", "h100", "--count", "8", "--json"])
    assert result.exit_code == 0, result.output
    providers = {o["provider"] for o in json.loads(result.stdout)["offers"]}
    assert {"lambda", "runpod", "vastai"} <= providers


def test_a_catalog_file_is_parsed_only_when_its_provider_is_used(tmp_path):
    # A command about one provider never pays for (or trips over) another's file.
    _write_user(tmp_path, "vastai", "this is not TOML [")
    catalogs = load_catalogs(tmp_path)
    assert "vastai" in catalogs and "sandbox" in catalogs
    assert catalogs["sandbox"].simulated
    with pytest.raises(ConfigurationError, match="vastai"):
        catalogs["vastai"]
