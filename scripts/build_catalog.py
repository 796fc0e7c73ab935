#!/usr/bin/env python3
"""Build the bundled price catalogs (providers/*.toml) from SkyPilot's v8 CSVs.

    python scripts/build_catalog.py --source ../shared/catalog --out providers

``--source`` is the directory that holds ``SOURCE.txt`` and
``skypilot-catalog-v8/<provider>/vms.csv`` (a copy of
github.com/skypilot-org/skypilot-catalog). The commit of each CSV is read from
SOURCE.txt and every CSV is checked against the sha256 recorded there, so a
changed input never slips through silently.

Writes lambda.toml, runpod.toml, shadeform.toml, vastai.toml, verda.toml and
hyperstack.toml (nothing else).
The output is a pure function of the inputs and of this script: no dates, no
dict-order accidents, "\\n" line endings. Re-running on the same inputs gives
byte-identical files (tests/unit/test_catalog.py checks this).

Rules:
* one ``[[instance_types]]`` entry per (name, GPU, specs, price, spot price),
  with every region that has exactly those values in ``regions``;
* prices are written as TOML strings taken from the CSV text through
  ``Decimal`` (no float ever touches money); an empty or zero price is omitted;
* CPU-only rows are skipped;
* ``gpu`` is the canonical name from ``gpucloud.catalog.gpus.normalize_gpu`` given the
  CSV's accelerator name plus the per-GPU memory (so A100 40 GB and 80 GB come
  apart); a GPU that does not normalize to a known canonical name is an error,
  except on RunPod, whose newest cards are kept under their raw name with a
  note on stderr (the build never fails on a new card there), and on
  Shadeform, whose upstream clouds list cards gpus.py does not know (kept raw);
* RunPod: every type is sold in the same data centers, so the file lists them
  once (top-level ``regions``) and each type says ``regions = "all"``; a type
  sold in fewer keeps its own list. Only regions the CSV lists are written.
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
    from gpucloud.catalog.gpus import gpu_info, normalize_gpu
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from gpucloud.catalog.gpus import gpu_info, normalize_gpu

AS_OF = "2026-11-30"  # the day the CSVs were retrieved (shared/catalog/SOURCE.txt)
REPO_URL = "https://github.com/skypilot-org/skypilot-catalog/blob/{commit}/catalogs/v8/{dir}/vms.csv"

# The hand-written facts (header fields, Lambda disks, RunPod GpuType ids) live
# in catalog_facts.py next to this script; re-exported here for the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalog_facts import (  # noqa: E402
    LAMBDA_STORAGE_GIB,
    PROVIDERS,
    RUNPOD_GPU_TYPE_IDS,
    RUNPOD_UNMAPPED,
)

__all__ = ["LAMBDA_STORAGE_GIB", "PROVIDERS", "RUNPOD_GPU_TYPE_IDS", "RUNPOD_UNMAPPED",
           "BuildError", "build", "build_entries", "main"]


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
                f"(normalize_gpu gave {name!r}); add it to GPUS in src/gpucloud/catalog/gpus.py")
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
                # SkyPilot writes Python-style quotes, and (Hyperstack's file) JSON's null.
                info = ast.literal_eval(re.sub(r"\bnull\b", "None", info_text))
            mem = gpu_memory_gb(info, facts["gpu_memory"], count, what)
            raw_names = [accel]
            if provider == "hyperstack":
                # "A100-80G-PCIe-NVLink": PCIe cards with an NVLink bridge, the same GPU.
                raw_names = [re.sub(r"-NVLink$", "", accel, flags=re.I)]
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
            gpu = canonical_gpu(raw_names, mem, what,
                                keep_unknown=provider in ("runpod", "shadeform"))
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
