"""Live offers of a cluster, folded from its nodes and pods: per GPU model (a
node label), the most a node can hold and the most still free on one node."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpucloud.providers.kubernetes import _wire as wire

if TYPE_CHECKING:
    from gpucloud.catalog.bundled import ProviderCatalog


def add_gpu_nodes(nodes: dict[str, tuple[str, int]], page: list[dict[str, Any]],
                   labels: tuple[str, ...]) -> None:
    """Keep (GPU label value, allocatable) per usable GPU node of a page."""
    for node in page:
        found = wire.gpu_node(node, labels)
        if found is not None:
            name, model, allocatable = found
            nodes[name] = (model, allocatable)


def sizes(allocatable: int) -> list[int]:
    """Machine sizes offered per model: powers of two up to a whole node."""
    counts, count = [], 1
    while count < allocatable:
        counts.append(count)
        count *= 2
    return counts + [allocatable]


def by_model(nodes: dict[str, tuple[str, int]], used: dict[str, int] | None
             ) -> dict[str, tuple[int, int | None]]:
    """(largest allocatable, largest free) per model; free is None when the pods
    could not be listed (a namespaced account)."""
    models: dict[str, tuple[int, int | None]] = {}
    for name, (model, allocatable) in nodes.items():
        free = None if used is None else max(0, allocatable - used.get(name, 0))
        best, best_free = models.get(model, (0, 0))
        models[model] = (max(best, allocatable),
                         None if free is None or best_free is None else max(best_free, free))
    return models


def price(prices: Mapping[str, Decimal], catalog: ProviderCatalog, model: str,
          gpu: str) -> Decimal | None:
    """USD per GPU-hour of a node's GPU model: config.toml's [kubernetes.prices]
    (by label value, then GPU name), then the catalog file's one-GPU rows;
    None when nobody said."""
    for key in (model, gpu):
        if key in prices:
            return prices[key]
    for row in catalog.instance_types:
        if row.gpu_count == 1 and row.price is not None and row.name in (model, gpu):
            return row.price
    return None
