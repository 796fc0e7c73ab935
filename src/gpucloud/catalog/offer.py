"""A bundled catalog row, priced for one query: an Offer before it is one.

``gpucloud offers`` with no credentials shows only catalog rows. Building each
as a pydantic ``Offer`` would import pydantic (about 60 ms, most of the
command's own cost; its start-up is held to 2.5x ``import typer``), so the offers
operation keeps catalog rows as this frozen dataclass and the SDK turns them into
``Offer`` objects on the way out (``Client.offers`` always returns ``Offer``).
The CLI renders the rows as they are: every attribute it reads has the
``Offer`` name, type and meaning, and ``as_json`` is ``Offer.model_dump(
mode="json")`` of the same row. A test holds both to the model field by field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from gpucloud.models import Offer


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogOffer:
    """The fields of ``models.Offer``, in its order (see that class for meanings)."""

    provider: str
    instance_type: str
    region: str
    gpu: str
    gpu_count: int
    gpu_memory_gb: int | None = None
    vcpus: int | None = None
    memory_gb: int | None = None
    disk_gb: int | None = None
    price_per_hour: Decimal
    spot: bool = False
    available: bool | None = None
    source: Literal["catalog"] = "catalog"
    simulated: bool = False
    disk_price_per_gb_month: Decimal | None = None
    disk_billed_apart: bool = False
    hours_per_month: int | None = None
    usage_prices: tuple[Any, ...] = ()  # catalogs hold none; kept for the shape
    as_of: str | None = None
    offer_id: str | None = None
    notes: tuple[str, ...] = ()  # catalogs hold none; kept for the shape

    def to_offer(self) -> Offer:
        from gpucloud.models import Offer

        # Catalog prices were checked when the file was parsed (parse_catalog).
        return Offer(**{f.name: getattr(self, f.name) for f in fields(self)})

    def as_json(self) -> dict[str, Any]:
        """What ``Offer.model_dump(mode="json")`` gives for this row."""
        return {f.name: _json(getattr(self, f.name)) for f in fields(self)}


def _json(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


def as_offers(rows: list[Any]) -> list[Offer]:
    """Rows of an offers query as ``Offer`` objects (live offers already are)."""
    return [r.to_offer() if isinstance(r, CatalogOffer) else r for r in rows]


__all__ = ["CatalogOffer", "as_offers"]
