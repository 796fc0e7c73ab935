"""Plain conversion of the common option values, without pydantic.

Typer (0.2x with its own click) converts every parameter through a pydantic
TypeAdapter built on first use: importing that layer and building one
adapter per option cost more than the rest of a catalog-only `gpucloud
offers`. Nearly every value gpucloud reads is a str, a str through a
`parser=` function, a bounded int or a bool flag; those are converted here.
Anything else, and every value that is not plainly valid (so that every
error message stays typer's own), goes through typer's conversion unchanged.

Older typer versions convert through click's types and have no such layer:
then nothing here applies.
"""

from __future__ import annotations

import re
from typing import Any

_INT = re.compile(r"[+-]?[0-9]+")


class _Plain:
    """Stands in for typer's runtime coercion of one parameter (the object
    `_TyperParameter.get_runtime_param()` returns, duck-typed)."""

    def __init__(self, param: Any, kind: type, parser: Any) -> None:
        self._param = param
        self._kind = kind
        self._parser = parser
        self._typer: Any = None  # typer's own coercion, built only when needed

    def _fallback(self, value: Any, param: Any, ctx: Any) -> Any:
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self._param.type_descriptor)
        return self._typer.coerce(value, param=param, ctx=ctx)

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return None
        if self._kind is bool:
            return value if isinstance(value, bool) else self._fallback(value, param, ctx)
        if self._kind is int and type(value) is int:  # a default written in the code
            return self._in_range(value, param, ctx)
        if not isinstance(value, str):
            return self._fallback(value, param, ctx)
        if self._parser is not None:
            try:
                return self._parser(value)
            except (ValueError, AssertionError):  # pydantic's to report, as typer does
                return self._fallback(value, param, ctx)
        if self._kind is str:
            return value
        text = value.strip()
        if not _INT.fullmatch(text):
            return self._fallback(value, param, ctx)
        return self._in_range(int(text), param, ctx, value)

    def _in_range(self, number: int, param: Any, ctx: Any, value: Any = None) -> Any:
        info = self._param.type_descriptor.parameter_info
        if (info.min is not None and number < info.min) or \
                (info.max is not None and number > info.max):
            # typer clamps, or says which bound
            return self._fallback(number if value is None else value, param, ctx)
        return number


def _plain_kind(param: Any) -> type | None:
    desc = param.type_descriptor
    if param.nargs != 1 or param.multiple or desc.is_file or desc.is_choice or desc.is_path:
        return None
    if desc.parameter_info.parser is not None:
        return str
    kinds: tuple[type, ...] = (str, bool, int)
    return next((kind for kind in kinds if kind is desc.annotation), None)


def install(command: Any, ctx: Any, recurse: bool = True) -> Any:
    """Give `command`'s plain parameters (its help option included) the plain
    conversion, and its subcommands' when `recurse`; returns the command."""
    for param in command.get_params(ctx):
        if getattr(param, "_runtime_param", False) is not None or \
                not hasattr(param, "type_descriptor"):
            continue  # typer without the pydantic layer, or already converted
        kind = _plain_kind(param)
        if kind is not None:
            param._runtime_param = _Plain(param, kind, param.type_descriptor.parameter_info.parser)
    if recurse:
        for sub in getattr(command, "commands", {}).values():
            install(sub, ctx)
    return command
