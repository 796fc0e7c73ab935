#!/usr/bin/env python3
"""Build the bundled price catalogs (providers/*.toml) from SkyPilot's v8 CSVs.

    python scripts/build_catalog.py --source ../shared/catalog --out providers

``--source`` is the directory that holds ``SOURCE.txt`` and
``skypilot-catalog-v8/<provider>/vms.csv`` (a copy of
github.com/skypilot-org/skypilot-catalog). The commit of each CSV is read from
SOURCE.txt and every CSV is checked against the sha256 recorded there, so a
changed input never slips through silently.

Writes lambda.toml, runpod.toml, vastai.toml and verda.toml (nothing else).
The output is a pure function of the inputs and of this script: no dates, no
dict-order accidents, "\\n" line endings. Re-running on the same inputs gives
byte-identical files (tests/unit/test_catalog.py checks this).

Rules:
* one ``[[instance_types]]`` entry per (name, GPU, specs, price, spot price),
  with every region that has exactly those values in ``regions``;
* prices are written as TOML strings taken from the CSV text through
  ``Decimal`` (no float ever touches money); an empty or zero price is omitted;
* CPU-only rows are skipped;
* ``gpu`` is the canonical name from ``gpucloud.gpus.normalize_gpu`` given the
  CSV's accelerator name plus the per-GPU memory (so A100 40 GB and 80 GB come
  apart); a GPU that does not normalize to a known canonical name is an error.
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

try:
    from gpucloud.gpus import gpu_info, normalize_gpu
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from gpucloud.gpus import gpu_info, normalize_gpu

AS_OF = "2026-11-30"  # the day the CSVs were retrieved (shared/catalog/SOURCE.txt)
REPO_URL = "https://github.com/skypilot-org/skypilot-catalog/blob/{commit}/catalogs/v8/{dir}/vms.csv"

# Lambda: storage_gib per instance type, copied from the GET /api/v1/instance-types
# response example in shared/specs/lambda/examples/list_instance_types_200.json
# (instance_type.specs.storage_gib). Only the types listed there; others get no disk_gb.
LAMBDA_STORAGE_GIB = {
    "gpu_1x_gh200": 4096,
    "gpu_8x_b200_sxm6": 22528,
    "gpu_8x_h100_sxm5": 22528,
    "gpu_4x_h100_sxm5": 11264,
    "gpu_2x_h100_sxm5": 5632,
    "gpu_1x_h100_sxm5": 2816,
    "gpu_1x_h100_pcie": 1024,
    "gpu_8x_a100_80gb_sxm4": 20480,
    "gpu_1x_a10": 1400,
    "gpu_1x_rtx6000": 512,
    "gpu_1x_a100": 512,
    "gpu_1x_a100_sxm4": 512,
    "gpu_2x_a100": 1024,
    "gpu_4x_a100": 1024,
    "gpu_8x_a100": 6144,
    "gpu_1x_a6000": 200,
    "gpu_2x_a6000": 1024,
    "gpu_4x_a6000": 1024,
    "gpu_8x_v100": 6041,
}

# RunPod: the CSV's AcceleratorName -> RunPod GpuType id. The REST v2 create-pod
# call takes this id as gpu.id (plus gpu.count); ids as listed in the gpuTypeIds
# enum of shared/specs/runpod/openapi-rest-v1.json (same id space as v2's
# GpuType.id, e.g. "NVIDIA GeForce RTX 4090" in openapi-v2.json). An accelerator
# whose id the spec does not list is kept under its CSV name (in RUNPOD_UNMAPPED
# below, with a note on stderr): such a name is a catalog row to compare prices
# with, not an id to launch; live offers carry RunPod's real ids.
RUNPOD_GPU_TYPE_IDS = {
    "A100-80GB": "NVIDIA A100 80GB PCIe",
    "A100-80GB-SXM": "NVIDIA A100-SXM4-80GB",
    "A40": "NVIDIA A40",
    "B200": "NVIDIA B200",
    "H100": "NVIDIA H100 PCIe",
    "H100-NVL": "NVIDIA H100 NVL",
    "H100-SXM": "NVIDIA H100 80GB HBM3",
    "H200-SXM": "NVIDIA H200",
    "L4": "NVIDIA L4",
    "L40": "NVIDIA L40",
    "L40S": "NVIDIA L40S",
    "MI300X": "AMD Instinct MI300X OAM",
    "RTX2000-Ada": "NVIDIA RTX 2000 Ada Generation",
    "RTX3090": "NVIDIA GeForce RTX 3090",
    "RTX4000-Ada": "NVIDIA RTX 4000 Ada Generation",
    "RTX4090": "NVIDIA GeForce RTX 4090",
    "RTX5090": "NVIDIA GeForce RTX 5090",
    "RTX6000-Ada": "NVIDIA RTX 6000 Ada Generation",
    "RTXA4000": "NVIDIA RTX A4000",
    "RTXA4500": "NVIDIA RTX A4500",
    "RTXA5000": "NVIDIA RTX A5000",
    "RTXA6000": "NVIDIA RTX A6000",
    "RTXPRO6000": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "RTXPRO6000-WK": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
}
# Accelerators of the CSV with no GpuType id in the spec (checked 2026-11-30).
RUNPOD_UNMAPPED = ("B300", "RTXPRO4000", "RTXPRO4500", "RTXPRO4500-SE", "RTXPRO5000")

# Hand-written header facts per provider. ``dir`` is the folder under
# skypilot-catalog-v8/; ``gpu_memory`` says what GpuInfo's MemoryInfo.SizeInMiB
# holds in that CSV: "mib_per_gpu", "mib_total" (all GPUs together) or
# "gb_per_gpu" (RunPod's older fetcher wrote GB into the MiB field).
PROVIDERS: dict[str, dict[str, Any]] = {
    "lambda": {
        "dir": "lambda",
        "display_name": "Lambda Cloud",
        "api_base": "https://cloud.lambda.ai",
        "auth": "api_key",
        "kind": "vm",
        # None: a launch without --image leaves the field out and Lambda uses its
        # default image (InstanceLaunchRequest.image is optional in the spec).
        "default_image": None,
        "gpu_memory": "mib_per_gpu",
        "note": (
            "Generated by scripts/build_catalog.py from SkyPilot's Lambda catalog. Prices are "
            "USD per hour for the whole instance, on demand (the CSV has no spot prices). "
            "Instance type names are Lambda's API names; regions are Lambda region names. "
            "vcpus and memory_gb are as SkyPilot recorded them. disk_gb is storage_gib from "
            "the GET /api/v1/instance-types response example kept in "
            "specs/lambda/examples/list_instance_types_200.json, for the types listed there "
            "only. CPU-only types are left out."
        ),
    },
    "runpod": {
        "dir": "runpod",
        "display_name": "RunPod",
        "api_base": "https://api.runpod.io",
        "auth": "api_key",
        "kind": "container",
        # The image of the REST v2 create-pod example (specs/runpod/openapi-v2.json).
        "default_image": "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404",
        "gpu_memory": "gb_per_gpu",
        "note": (
            "Generated by scripts/build_catalog.py from SkyPilot's RunPod catalog (all 12,096 "
            "rows; RunPod's SECURE cloud only, CPU-only types left out). Names are '<count>x "
            "<GpuType id>', the id and count that the REST v2 create-pod call takes as gpu.id "
            "and gpu.count; where the spec lists no GpuType id for an accelerator (B300, RTX "
            "PRO 4000/4500/4500 SE/5000) the name keeps SkyPilot's accelerator name and only "
            "serves price comparison. regions = \"all\" means the file's regions list. "
            "Regions are RunPod data-center ids (dataCenterIds). Prices are USD per "
            "hour for the whole pod (SkyPilot: per-GPU securePrice times count). No spot_price "
            "is written: SkyPilot's equals price in every row, and REST v2 offers no spot "
            "pods. vcpus and memory_gb are SkyPilot's fixed defaults per GPU "
            "type, not live values; gpu_memory_gb comes from GpuInfo, whose SizeInMiB field "
            "holds GB in this file."
        ),
    },
    "vastai": {
        "dir": "vast",
        "display_name": "Vast.ai",
        "api_base": "https://console.vast.ai",
        "auth": "api_key",
        "kind": "container",
        # Vast's PyTorch image. The create-instance schema in specs/vastai/openapi.yaml
        # defaults to vastai/base-image:@vastai-automatic-tag, which has no PyTorch.
        "default_image": "vastai/pytorch",
        "gpu_memory": "mib_total",
        # Vast bills storage per GB-month of 720 hours (the spec's instance example:
        # dph_total = dph_base + storage_cost * GB / 720); SkyPilot's price has no disk.
        "hours_per_month": 720,
        "disk_billed_apart": True,
        "note": (
            "Generated by scripts/build_catalog.py from SkyPilot's Vast.ai catalog. Vast.ai is "
            "a marketplace: these rows are a snapshot of host offers as SkyPilot grouped them, "
            "not types that can be ordered by name. A name is '<count>x-<Vast gpu_name, spaces "
            "as _>-<cpu cores>-<cpu RAM MB>'; price is the one USD/hour figure SkyPilot kept "
            "for the group (its fetcher takes the median of the matching offers). To rent, "
            "search live offers (POST /api/v0/bundles/) and accept one by its ask id. Regions "
            "are ISO 3166 country codes taken from the offer geolocation ('Texas, US, NA' "
            "becomes 'US'); Vast's geolocation is 'City, CC', so match on the country code. "
            "SkyPilot's SpotPrice is 0.00 in every row (no minimum bid recorded), so no "
            "spot_price is written. vcpus and memory_gb are SkyPilot's rounded (chunked) "
            "offer values; gpu_memory_gb is GpuInfo's total GPU memory divided by the count. "
            "Storage is billed apart (USD per GB-month, 720-hour months) at a per-host rate "
            "this snapshot does not hold, so a catalog estimate shows the disk as unknown."
        ),
    },
    "verda": {
        "dir": "verda",
        "display_name": "Verda (formerly DataCrunch)",
        "api_base": "https://api.verda.com/v1",
        "auth": "oauth2",
        "kind": "vm",
        # The OS image of the SDK's create-instance request and instance fixtures
        # (specs/verda/examples/create_instance_request_sdk.json, get_instance_200_sdk_fixture.json)
        # and the example image_type in specs/CONTRACTS.md (Verda, GET /images).
        "default_image": "ubuntu-24.04-cuda-12.8-open-docker",
        "gpu_memory": "mib_per_gpu",
        "note": (
            "Generated by scripts/build_catalog.py from SkyPilot's Verda catalog. Prices are "
            "USD per hour for the whole instance: price is the fixed on-demand price, "
            "spot_price Verda's spot price; a type with no on-demand price in the snapshot "
            "has only spot_price. Instance type names are Verda's API names; regions are "
            "Verda location codes (FIN-01 ...). CPU-only types are left out."
        ),
    },
}


class BuildError(Exception):
    pass


@dataclass(frozen=True)
class Entry:
    name: str
    gpu: str
    gpu_count: int
    gpu_memory_gb: int
    vcpus: int
    memory_gb: int
    disk_gb: int | None
    price: Decimal | None
    spot_price: Decimal | None


# --------------------------------------------------------------------------- inputs

def read_source_txt(source: Path) -> dict[str, dict[str, str]]:
    """SOURCE.txt blocks keyed by the provider folder: commit and sha256."""
    text = (source / "SOURCE.txt").read_text(encoding="utf-8")
    out: dict[str, dict[str, str]] = {}
    for block in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            match = re.match(r"^(saved as|commit|sha256)\s*:\s*(\S+)", line)
            if match:
                fields[match.group(1)] = match.group(2)
        saved = fields.get("saved as", "")
        match = re.search(r"skypilot-catalog-v8/([^/]+)/vms\.csv$", saved)
        if match and "commit" in fields and "sha256" in fields:
            out[match.group(1)] = {"commit": fields["commit"], "sha256": fields["sha256"]}
    return out


def read_rows(path: Path, sha256: str) -> list[dict[str, str]]:
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise BuildError(f"{path}: sha256 {digest} does not match SOURCE.txt ({sha256})")
    text = data.decode("utf-8")
    return list(csv.DictReader(text.splitlines()))


def dec(text: str, what: str) -> Decimal | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation as exc:
        raise BuildError(f"{what}: not a number: {text!r}") from exc
    if not value.is_finite() or value < 0:
        raise BuildError(f"{what}: bad price {text!r}")
    return value if value > 0 else None  # 0 means "no price" in these CSVs


def integral(text: str, what: str) -> int:
    try:
        value = Decimal(text.strip())
    except InvalidOperation as exc:
        raise BuildError(f"{what}: not a number: {text!r}") from exc
    if value != value.to_integral_value():
        raise BuildError(f"{what}: not a whole number: {text!r}")
    return int(value)


def gpu_memory_gb(info: dict[str, Any], unit: str, count: int, what: str) -> int:
    gpus = info.get("Gpus") or []
    if len(gpus) != 1:
        raise BuildError(f"{what}: expected one GPU model in GpuInfo, got {gpus!r}")
    size = Decimal(str(gpus[0]["MemoryInfo"]["SizeInMiB"]))
    if unit == "gb_per_gpu":
        if size >= 1024:
            raise BuildError(f"{what}: SizeInMiB {size} looks like MiB, not GB; fix 'gpu_memory'")
        gb = size
    elif unit == "mib_per_gpu":
        gb = size / 1024
    elif unit == "mib_total":
        gb = size / count / 1024
    else:  # pragma: no cover
        raise BuildError(f"unknown gpu_memory unit {unit!r}")
    return int(gb.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def canonical_gpu(raw_names: list[str], memory_gb: int, what: str,
                  keep_unknown: bool = False) -> str:
    """One canonical name that every known raw name agrees on, or BuildError. With
    keep_unknown, names that normalize to no known GPU are left out of the vote,
    and if none is known the first raw name is kept as it is (noted on stderr)."""
    found = set()
    for raw in raw_names:
        name = normalize_gpu(f"{raw} {memory_gb}GB")
        if gpu_info(name) is None:
            if keep_unknown:
                continue
            raise BuildError(
                f"{what}: GPU {raw!r} ({memory_gb} GB) is not a known canonical GPU "
                f"(normalize_gpu gave {name!r}); add it to GPUS in src/gpucloud/gpus.py")
        found.add(name)
    if not found and keep_unknown:
        return normalize_gpu(raw_names[0])
    if len(found) != 1:
        raise BuildError(f"{what}: GPU names {raw_names!r} disagree: {sorted(found)}")
    return found.pop()


# --------------------------------------------------------------------------- build

def region_of(provider: str, row: dict[str, str], what: str) -> str:
    if provider == "runpod":
        region = row["AvailabilityZone"].strip()
    elif provider == "vastai":
        parts = [p.strip() for p in row["Region"].split(",")]
        if len(parts) != 3 or not re.fullmatch(r"[A-Z]{2}", parts[1]):
            raise BuildError(f"{what}: cannot read a country code from {row['Region']!r}")
        region = parts[1]
    else:
        region = row["Region"].strip()
    if not region:
        raise BuildError(f"{what}: empty region")
    return region


def build_entries(provider: str, rows: list[dict[str, str]]) -> dict[Entry, set[str]]:
    facts = PROVIDERS[provider]
    groups: dict[Entry, set[str]] = {}
    errors: list[str] = []
    unmapped: set[str] = set()
    for i, row in enumerate(rows, start=2):  # line 1 is the header
        what = f"{facts['dir']}/vms.csv line {i} ({row.get('InstanceType')})"
        try:
            accel = (row.get("AcceleratorName") or "").strip()
            if not accel:
                continue  # CPU-only
            count = integral(row["AcceleratorCount"], what)
            info_text = row["GpuInfo"]
            try:
                info = json.loads(info_text)
            except json.JSONDecodeError:
                info = ast.literal_eval(info_text)  # SkyPilot writes Python-style quotes
            mem = gpu_memory_gb(info, facts["gpu_memory"], count, what)
            raw_names = [accel]
            name = row["InstanceType"].strip()
            if provider == "runpod":
                gpu_type_id = RUNPOD_GPU_TYPE_IDS.get(accel)
                if gpu_type_id is None:
                    if accel not in RUNPOD_UNMAPPED:
                        unmapped.add(accel)
                    gpu_type_id = accel
                else:
                    raw_names.append(gpu_type_id)
                name = f"{count}x {gpu_type_id}"
            elif provider == "vastai":
                # SkyPilot's "8x-H100_SXM-32-65536" ends in the cores and RAM of the
                # search it ran; live hosts differ, so the name keeps count and GPU only
                # (what the adapter names live offers: "8x-H100_SXM").
                name = "-".join(name.split("-")[:2])
            gpu = canonical_gpu(raw_names, mem, what, keep_unknown=provider == "runpod")
            price = dec(row["Price"], f"{what} Price")
            spot = dec(row.get("SpotPrice", ""), f"{what} SpotPrice")
            if price is None and spot is None:
                raise BuildError(f"{what}: neither Price nor SpotPrice")
            if provider == "runpod":
                spot = None  # REST v2 sells no spot pods: a catalog spot row would mislead
            entry = Entry(
                name=name, gpu=gpu, gpu_count=count, gpu_memory_gb=mem,
                vcpus=integral(row["vCPUs"], what), memory_gb=integral(row["MemoryGiB"], what),
                disk_gb=LAMBDA_STORAGE_GIB.get(name) if provider == "lambda" else None,
                price=price, spot_price=spot,
            )
            groups.setdefault(entry, set()).add(region_of(provider, row, what))
        except (BuildError, KeyError, ValueError, SyntaxError) as exc:
            errors.append(str(exc) if isinstance(exc, BuildError) else f"{what}: {exc!r}")
    if errors:
        raise BuildError("\n".join(errors))
    for accel in sorted(unmapped):
        print(f"build_catalog: note: no RunPod GpuType id for {accel!r} in the spec; kept under "
              "its CSV name (add it to RUNPOD_GPU_TYPE_IDS or RUNPOD_UNMAPPED)", file=sys.stderr)
    return groups


# --------------------------------------------------------------------------- output

def q(text: str) -> str:
    """A TOML basic string (JSON's escapes are all valid TOML escapes)."""
    return json.dumps(text, ensure_ascii=False)


def string_list(key: str, items: list[str], width: int = 96) -> list[str]:
    one_line = f"{key} = [{', '.join(q(x) for x in items)}]"
    if len(one_line) <= width:
        return [one_line]
    lines, current = [f"{key} = ["], "   "
    for item in items:
        piece = f" {q(item)},"
        if len(current) + len(piece) > width:
            lines.append(current)
            current = "   "
        current += piece
    lines.append(current)
    lines.append("]")
    return lines


def long_string(key: str, text: str, width: int = 92) -> list[str]:
    # A multi-line basic string whose line-ending backslashes join the lines
    # with the single space kept before each backslash.
    wrapped = textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)
    return [f'{key} = """\\'] + [f"{line} \\" for line in wrapped[:-1]] + [f'{wrapped[-1]}"""']


def price_key(value: Decimal | None) -> Decimal:
    return value if value is not None else Decimal(-1)


def render(provider: str, commit: str, groups: dict[Entry, set[str]]) -> str:
    facts = PROVIDERS[provider]
    # RunPod: the regions every type shares are written once, before [source];
    # such a type says regions = "all" (TOML top-level keys precede tables).
    every = sorted(set.union(*groups.values())) if provider == "runpod" else None
    out = [
        f"# {facts['display_name']}: bundled price catalog.",
        "# GENERATED by scripts/build_catalog.py from SkyPilot's catalog; do not edit by hand.",
        "# Rebuild: python scripts/build_catalog.py --source ../shared/catalog --out providers",
        "# To override, copy this file to <config dir>/providers/ (it replaces this one whole).",
        "",
        f"name = {q(provider)}",
        f"display_name = {q(facts['display_name'])}",
        f"api_base = {q(facts['api_base'])}",
        f"auth = {q(facts['auth'])}",
        f"kind = {q(facts['kind'])}",
        *([f"default_image = {q(facts['default_image'])}"] if facts["default_image"] else []),
        *([f"hours_per_month = {facts['hours_per_month']}"] if "hours_per_month" in facts else []),
        *(["disk_billed_apart = true"] if facts.get("disk_billed_apart") else []),
        "simulated = false",
        *(string_list("regions", every) if every is not None else []),
        "",
        "[source]",
        f"url = {q(REPO_URL.format(commit=commit, dir=facts['dir']))}",
        f"as_of = {q(AS_OF)}",
        *long_string("note", facts["note"]),
    ]
    ordered = sorted(groups, key=lambda e: (
        e.gpu, e.gpu_count, e.name, price_key(e.price), price_key(e.spot_price),
        e.gpu_memory_gb, e.vcpus, e.memory_gb))
    for entry in ordered:
        out += ["", "[[instance_types]]",
                f"name = {q(entry.name)}",
                f"gpu = {q(entry.gpu)}",
                f"gpu_count = {entry.gpu_count}",
                f"gpu_memory_gb = {entry.gpu_memory_gb}",
                f"vcpus = {entry.vcpus}",
                f"memory_gb = {entry.memory_gb}"]
        if entry.disk_gb is not None:
            out.append(f"disk_gb = {entry.disk_gb}")
        if entry.price is not None:
            out.append(f"price = {q(str(entry.price))}")
        if entry.spot_price is not None:
            out.append(f"spot_price = {q(str(entry.spot_price))}")
        if every is not None and sorted(groups[entry]) == every:
            out.append('regions = "all"')
        else:
            out += string_list("regions", sorted(groups[entry]))
    return "\n".join(out) + "\n"


def build(source: Path, out_dir: Path) -> list[Path]:
    sources = read_source_txt(source)
    rendered: dict[Path, str] = {}
    errors = []
    for provider, facts in PROVIDERS.items():
        meta = sources.get(facts["dir"])
        if meta is None:
            errors.append(f"SOURCE.txt has no commit/sha256 for {facts['dir']}/vms.csv")
            continue
        try:
            rows = read_rows(source / "skypilot-catalog-v8" / facts["dir"] / "vms.csv",
                             meta["sha256"])
            groups = build_entries(provider, rows)
            if not groups:
                raise BuildError(f"{facts['dir']}/vms.csv: no GPU rows")
            rendered[out_dir / f"{provider}.toml"] = render(provider, meta["commit"], groups)
        except (BuildError, OSError) as exc:
            errors.append(str(exc))
    if errors:  # write nothing unless every file builds
        raise BuildError("\n".join(errors))
    out_dir.mkdir(parents=True, exist_ok=True)
    for path, text in rendered.items():
        path.write_bytes(text.encode("utf-8"))
    return list(rendered)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True,
                        help="directory with SOURCE.txt and skypilot-catalog-v8/")
    parser.add_argument("--out", type=Path, required=True, help="output directory (providers/)")
    args = parser.parse_args(argv)
    try:
        written = build(args.source, args.out)
    except BuildError as exc:
        print(f"build_catalog: FAILED\n{exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
