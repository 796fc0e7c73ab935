"""YAML with line numbers and exact numbers, for job files.

PyYAML's composed nodes carry their position; ``lines_of`` maps each field
path (as pydantic reports it: ``("resources", "gpu")``) to its line, so an
error names the line the user must fix. Floats load as Decimal: ``12.5`` in a
file is an exact amount of money, never a binary float.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no types


class Loader(yaml.SafeLoader):  # type: ignore[misc]
    pass


def _decimal(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    text = str(loader.construct_scalar(node)).replace("_", "")
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise yaml.constructor.ConstructorError(
            None, None, f"{text!r} is not a finite number", node.start_mark) from None
    if not value.is_finite():
        raise yaml.constructor.ConstructorError(
            None, None, f"{text!r} is not a finite number", node.start_mark)
    return value


Loader.add_constructor("tag:yaml.org,2002:float", _decimal)


def lines_of(node: yaml.Node | None, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """{field path: 1-based line} for every mapping key and sequence item."""
    out: dict[tuple[Any, ...], int] = {}
    if node is None:
        return out
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name is None:
                continue
            out[path + (name,)] = key.start_mark.line + 1
            for sub, line in lines_of(value, path + (name,)).items():
                if sub != path + (name,):
                    out[sub] = line
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            out.update(lines_of(item, path + (index,)))
    return out
