"""The bundled price catalog: one TOML file per provider, read offline.

Files ship inside the package as ``gpucloud/catalog/data/*.toml`` (the repo's
``providers/`` directory, force-included by hatch) and are read as plain files
(``importlib.resources`` only for a zipped install); from a source checkout the
repo's ``providers/`` is used. ``<config dir>/providers/<name>.toml`` replaces
a bundled file whole. Parsed files are cached as JSON (``_parsed``).

File format (see providers/lambda.toml):

    name, display_name, api_base, auth ("api_key" | "oauth2" | "none" |
    "kubeconfig" | "hosts"),
    kind ("vm" | "container"), default_image (absent: the provider's own
    default), simulated, regions, hours_per_month (of per-month rates; 730
    unless said), disk_billed_apart (storage billed on top of the price),
    [source] url/as_of,
    [[instance_types]] name, gpu, gpu_count, gpu_memory_gb, vcpus,
    memory_gb, disk_gb, price, spot_price, regions, disk_price_per_gb_month

An instance type's ``regions`` is a list, or "all" for the file's ``regions``
(written once where every type is sold everywhere, as for RunPod).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucloud.errors import ConfigurationError
from gpucloud.catalog.gpus import normalize_gpu
from gpucloud.catalog.offer import CatalogOffer, as_offers
from gpucloud.catalog.limits import MAX_PRICE_PER_HOUR

if TYPE_CHECKING:
    from gpucloud.models import Offer

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpu: str
    gpu_count: int
    regions: tuple[str, ...]
    price: Decimal | None
    spot_price: Decimal | None = None
    gpu_memory_gb: int | None = None
    vcpus: int | None = None
    memory_gb: int | None = None
    disk_gb: int | None = None
    disk_price_per_gb_month: Decimal | None = None


@dataclass(frozen=True)
class ProviderCatalog:
    name: str
    display_name: str
    api_base: str
    auth: str = "api_key"
    kind: str = "vm"
    default_image: str | None = None
    simulated: bool = False
    source_url: str | None = None
    as_of: str | None = None
    regions: tuple[str, ...] = ()
    instance_types: tuple[InstanceType, ...] = field(default=())
    path: str | None = None
    hours_per_month: int | None = None
    disk_billed_apart: bool = False

    def types_named(self, name: str) -> list[InstanceType]:
        return [t for t in self.instance_types if t.name == name]

    def offers(self, *, gpu: str | None = None, count: int | None = None,
               region: str | None = None, spot: bool = False) -> list[Offer]:
        """Catalog rows as Offers (source="catalog", availability unknown)."""
        return as_offers(self.rows(gpu=gpu, count=count, region=region, spot=spot))

    def rows(self, *, gpu: str | None = None, count: int | None = None,
             region: str | None = None, spot: bool = False) -> list[CatalogOffer]:
        """As ``offers``, before the rows become pydantic ``Offer`` objects (the
        the offers operation keeps them so; catalog/offer.py says why)."""
        out: list[CatalogOffer] = []
        for t in self.instance_types:
            if gpu is not None and t.gpu != gpu:
                continue
            if count is not None and t.gpu_count != count:
                continue
            price = t.spot_price if spot else t.price
            if price is None:
                continue
            for r in t.regions:
                if region is not None and r != region:
                    continue
                out.append(CatalogOffer(
                    provider=self.name, instance_type=t.name, region=r, gpu=t.gpu,
                    gpu_count=t.gpu_count, gpu_memory_gb=t.gpu_memory_gb, vcpus=t.vcpus,
                    memory_gb=t.memory_gb, disk_gb=t.disk_gb, price_per_hour=price,
                    spot=spot, available=None, source="catalog", simulated=self.simulated,
                    disk_price_per_gb_month=t.disk_price_per_gb_month, as_of=self.as_of,
                    disk_billed_apart=self.disk_billed_apart or
                    t.disk_price_per_gb_month is not None,
                    hours_per_month=self.hours_per_month,
                ))
        return out


def _dec(value: Any) -> Decimal | None:
    if value is None or value == "":
        return None
    # Prices are written as strings in the TOML so no float ever touches money.
    return Decimal(str(value))


def _int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    return value


def _regions(value: Any, every: tuple[str, ...] = ()) -> tuple[str, ...]:
    if value == "all":
        if not every:
            raise ValueError('regions = "all" needs a top-level regions list')
        return every
    if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
        raise ValueError(f"regions must be a list of names, got {value!r}")
    return tuple(value)


def parse_catalog(data: dict[str, Any], path: str | None = None) -> ProviderCatalog:
    try:
        every = _regions(data.get("regions", []))
        types = tuple(
            InstanceType(
                name=str(t["name"]),
                gpu=normalize_gpu(str(t["gpu"])),
                gpu_count=_int(t["gpu_count"], "gpu_count") or 0,
                regions=_regions(t.get("regions", []), every),
                price=_dec(t.get("price")),
                spot_price=_dec(t.get("spot_price")),
                gpu_memory_gb=_int(t.get("gpu_memory_gb"), "gpu_memory_gb"),
                vcpus=_int(t.get("vcpus"), "vcpus"),
                memory_gb=_int(t.get("memory_gb"), "memory_gb"),
                disk_gb=_int(t.get("disk_gb"), "disk_gb"),
                disk_price_per_gb_month=_dec(t.get("disk_price_per_gb_month")),
            )
            for t in data.get("instance_types", ())
        )
        for t in types:
            prices = (t.price, t.spot_price, t.disk_price_per_gb_month)
            if any(p is not None and (not p.is_finite() or not 0 <= p < MAX_PRICE_PER_HOUR)
                   for p in prices):
                raise ValueError(f"price of {t.name} must be a number from 0 to "
                                 f"{MAX_PRICE_PER_HOUR:,}")
            if t.gpu_count < 1:
                raise ValueError(f"gpu_count of {t.name} must be at least 1")
        if data.get("auth", "api_key") not in ("api_key", "oauth2", "none", "kubeconfig",
                                              "hosts"):
            raise ValueError(f"unknown auth kind {data.get('auth')!r}")
        source = data.get("source", {})
        regions = every or tuple(sorted({r for t in types for r in t.regions}))
        hours_per_month = _int(data.get("hours_per_month"), "hours_per_month")
        if hours_per_month is not None and not 672 <= hours_per_month <= 744:
            raise ValueError(f"hours_per_month must be 672 to 744, got {hours_per_month}")
        billed_apart = data.get("disk_billed_apart", False)
        if not isinstance(billed_apart, bool):
            raise ValueError(f"disk_billed_apart must be true or false, got {billed_apart!r}")
        return ProviderCatalog(
            name=data["name"], display_name=data.get("display_name", data["name"]),
            api_base=data["api_base"], auth=data.get("auth", "api_key"),
            kind=data.get("kind", "vm"), default_image=data.get("default_image"),
            simulated=bool(data.get("simulated", False)), source_url=source.get("url"),
            as_of=str(source["as_of"]) if "as_of" in source else None,
            regions=regions, instance_types=types, path=path,
            hours_per_month=hours_per_month, disk_billed_apart=billed_apart,
        )
    except (KeyError, TypeError, ValueError, ArithmeticError, AttributeError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ConfigurationError(
            f"invalid provider catalog {path or data.get('name')}: {detail}",
            hint="fix the file, or remove it to use the bundled catalog",
        ) from exc


def _bundled_dir() -> Any:
    here = Path(__file__).resolve().parent
    if (here / "data").is_dir():  # an installed wheel: plain files beside this one
        return here / "data"
    if (here.parents[2] / "providers").is_dir():  # a source checkout / editable install
        return here.parents[2] / "providers"
    # Only a zipped install is left: importlib.resources reads inside the archive
    # (imported here, as it costs ~8 ms on every run otherwise).
    from importlib import resources

    return resources.files("gpucloud.catalog") / "data"


@lru_cache(maxsize=None)
def _read(path: str, text: str) -> ProviderCatalog:
    return parse_catalog(_parsed(path, text), path)


def _parsed(path: str, text: str) -> dict[str, Any]:
    """The TOML document, from the cache when this very text was parsed before.

    tomllib is pure Python: the bundled catalogs cost ~40 ms to parse on every
    `gpucloud offers`, JSON ~1 ms. The cache is keyed by a hash of the text, so
    an edited or replaced file is parsed afresh; a cache that cannot be read or
    written is only a slower run (config.cache_dir)."""
    import hashlib
    import json

    from gpucloud.config.settings import cache_dir

    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=20).hexdigest()
    cached: Path | None
    try:
        cached = cache_dir() / "catalogs" / f"{digest}.json"
    except Exception:  # noqa: BLE001 - no usable home (platformdirs): parse each run
        cached = None
    if cached is not None:
        try:
            data = json.loads(cached.read_bytes())
            if isinstance(data, dict):
                return data
        except (OSError, ValueError):
            pass  # not there yet, or damaged: parse and write it anew
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"invalid TOML in {path}: {exc}") from exc
    if cached is not None:
        _store(cached, data)
    return data


def _store(path: Path, data: dict[str, Any]) -> None:
    import json

    from gpucloud.config.atomic import write_atomic

    try:
        # TOML dates and times have no JSON form: such a file is parsed each run.
        body = json.dumps(data, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, body)  # readers see the whole file or none
    except OSError:
        pass  # only a slower next run


class Catalogs(Mapping[str, ProviderCatalog]):
    """Every provider's catalog by name. The names come from the file names; a
    file is read and parsed when its provider is first looked at, so a command
    about one provider (`list --provider sandbox`) never parses the others'
    price lists (TOML parsing is most of a catalog's cost)."""

    def __init__(self, files: dict[str, Any]) -> None:
        self._files = dict(sorted(files.items()))
        self._loaded: dict[str, ProviderCatalog] = {}

    def __getitem__(self, name: str) -> ProviderCatalog:
        if name not in self._loaded:
            self._loaded[name] = _load(name, self._files[name])
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, name: object) -> bool:
        return name in self._files

    def __repr__(self) -> str:
        return f"Catalogs({list(self._files)})"


def _load(name: str, entry: Any) -> ProviderCatalog:
    try:
        text = entry.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read {entry}: {exc}",
                                 hint="fix the file, or remove it to use the bundled catalog"
                                 ) from exc
    cat = _read(str(entry), text)
    if cat.name != name:
        raise ConfigurationError(f"{entry} declares name = {cat.name!r}",
                                 hint=f"a file named {name}.toml must say name = {name!r}")
    return cat


def load_catalogs(config_dir: Path | None = None) -> Catalogs:
    """All provider catalogs: bundled files, each replaced whole by a user file
    (read on first use; a broken file is a ConfigurationError then)."""
    files: dict[str, Any] = {}
    for entry in _bundled_dir().iterdir():
        if entry.name.endswith(".toml"):
            files[entry.name[:-5]] = entry
    if config_dir is not None and (config_dir / "providers").is_dir():
        for entry in (config_dir / "providers").glob("*.toml"):
            files[entry.stem] = entry
    return Catalogs(files)
