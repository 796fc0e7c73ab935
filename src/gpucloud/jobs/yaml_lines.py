"""YAML with line numbers and exact numbers, for job files.

PyYAML's composed nodes carry their position; ``line_of`` follows one field
path (as pydantic reports it: ``("resources", "gpu")``) to its line, so an
error names the line the user must fix. It walks that one path only, never
the whole tree: an alias repeats a node, and a walk of every path is what an
alias bomb makes endless. Floats load as Decimal: ``12.5`` in a file is an
exact amount of money, never a binary float. The limits (size, nesting,
aliases) are safe_yaml's.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no types

from gpucloud.config.safe_yaml import SafeLoader


class Loader(SafeLoader):
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


def line_of(node: yaml.Node | None, path: tuple[Any, ...]) -> int:
    """The 1-based line of the deepest part of ``path`` the document has: a
    mapping key's line, or a sequence item's; 1 for an empty document."""
    if node is None:
        return 1
    line: int = node.start_mark.line + 1
    for part in path:
        if isinstance(node, yaml.MappingNode):
            # The last of duplicate keys: it is the one PyYAML keeps.
            pair = next((p for p in reversed(node.value)
                         if isinstance(p[0], yaml.ScalarNode) and p[0].value == part), None)
            if pair is None:
                break
            line, node = pair[0].start_mark.line + 1, pair[1]
        elif (isinstance(node, yaml.SequenceNode) and isinstance(part, int)
              and 0 <= part < len(node.value)):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
