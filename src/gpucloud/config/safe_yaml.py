"""YAML read within limits: every YAML file gpucloud reads goes through here.

A YAML alias (``*a``) repeats a whole node without repeating its text: nine
anchors of nine aliases each is a few hundred bytes that stands for 9**9
nodes ("billion laughs"). PyYAML builds such a document cheaply, as shared
objects, but whatever walks it afterwards (validation, line look-up,
printing) walks every repetition and never ends. So the document is composed
first, and before anything walks it:

- its size is bounded (the file is read up to the limit and no further);
- nesting is bounded while composing, so a file of 100,000 ``[`` is refused
  at the 65th instead of exhausting Python's recursion;
- its nodes are counted as a walk would meet them, each alias use counting
  the whole node it repeats, without walking them: the count of a node is
  remembered, so an alias costs one addition. An alias to a node that holds it
  (``&a [*a]``, a cycle) is refused too.

YAML syntax errors stay ``yaml.YAMLError``; a limit passed is ``YamlLimitError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

import yaml  # type: ignore[import-untyped]  # PyYAML ships no types

from gpucloud.config.file_limits import MIB, InputLimitError, read_limited, size_text

MAX_BYTES = MIB           # a job file; callers with larger legitimate files pass their own
MAX_DEPTH = 64            # nesting levels, alias expansions included
MAX_NODES = 100_000       # nodes as a walk meets them: an alias counts its whole node again


class YamlLimitError(InputLimitError):
    """The document passes a limit; the message names the limit."""


class SafeLoader(yaml.SafeLoader):  # type: ignore[misc]
    """yaml.SafeLoader that refuses, while composing, nesting deeper than
    MAX_DEPTH (PyYAML's composer recurses once per level) and more than
    MAX_NODES nodes written out (composing 1 MiB of ``[1,1,1,...`` takes seconds)."""

    _depth = 0
    _composed = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        self._composed += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlLimitError(_too_deep(self.peek_event().start_mark))
            if self._composed > MAX_NODES:
                raise _too_many()
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def compose_and_load(text: str, loader: type[SafeLoader] = SafeLoader,
                     max_bytes: int = MAX_BYTES) -> tuple[Any, Any]:
    """(the composed node or None, the loaded data) of one YAML document."""
    if len(text) > max_bytes or len(text.encode("utf-8")) > max_bytes:
        raise YamlLimitError(f"larger than {size_text(max_bytes)}, the limit for this file")
    reader = loader(text)
    try:
        node = reader.get_single_node()
        if node is None:
            return None, None
        check_expansion(node)
        return node, reader.construct_document(node)
    except RecursionError:  # a limit above failed to foresee some nesting: still refused
        raise YamlLimitError(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    finally:
        reader.dispose()


def load(text: str, max_bytes: int = MAX_BYTES) -> Any:
    """yaml.safe_load within the limits."""
    return compose_and_load(text, SafeLoader, max_bytes)[1]


def load_file(path: Union[str, Path], max_bytes: int = MAX_BYTES, *,
              error: Optional[Callable[..., Exception]] = None, what: str = "file") -> Any:
    """yaml.safe_load of a file within the limits, its size checked before parsing.

    With ``error`` (an exception class taking a message and ``hint=``), a limit
    passed or text that is not UTF-8 raises it, naming ``what`` and ``path``;
    OSError and yaml.YAMLError pass through either way."""
    try:
        return load(read_limited(path, max_bytes), max_bytes)
    except (InputLimitError, UnicodeDecodeError) as exc:
        if error is None:
            raise
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise error(f"{what} {path} is refused: {reason}",
                    hint=f"a {what} is {limits_text(max_bytes)}") from None


def limits_text(max_bytes: int = MAX_BYTES) -> str:
    return (f"at most {size_text(max_bytes)}, {MAX_DEPTH} levels deep and {MAX_NODES:,} "
            "values with its aliases expanded")


def check_expansion(root: yaml.Node) -> None:
    """YamlLimitError when the document, aliases expanded, has more than
    MAX_NODES nodes or MAX_DEPTH levels, or an alias holds itself. Each distinct
    node is looked at once: its (count, height) is remembered by identity."""
    done: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()

    def visit(node: yaml.Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in done:
            count, height = done[key]
        else:
            if key in open_:
                raise YamlLimitError(f"line {node.start_mark.line + 1}: an alias refers to "
                                     "a node that contains it (a cycle)")
            if depth > MAX_DEPTH:
                raise YamlLimitError(_too_deep(node.start_mark))
            open_.add(key)
            count, height = 1, 1
            for child in _children(node):
                sub_count, sub_height = visit(child, depth + 1)
                count += sub_count
                height = max(height, sub_height + 1)
                if count > MAX_NODES:
                    raise _too_many()
            open_.discard(key)
            done[key] = (count, height)
        if depth + height - 1 > MAX_DEPTH:
            raise YamlLimitError(_too_deep(node.start_mark))
        return count, height

    visit(root, 1)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _too_deep(mark: Any) -> str:
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return f"{where}nested deeper than {MAX_DEPTH} levels (aliases included), the limit"


def _too_many() -> YamlLimitError:
    return YamlLimitError(f"more than {MAX_NODES:,} values, each alias counted as the "
                          "values it repeats: the limit (an anchor repeated this much is an "
                          "alias bomb, not a configuration)")


__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "SafeLoader", "YamlLimitError",
           "check_expansion", "compose_and_load", "limits_text", "load", "load_file"]
