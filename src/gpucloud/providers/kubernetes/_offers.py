"""Live offers of a cluster, folded from its nodes and pods: per GPU model (a
node label), the most a node can hold and the most still free on one node."""

from __future__ import annotations

from typing import Any

from gpucloud.providers.kubernetes import _wire as wire


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
