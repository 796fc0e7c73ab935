"""A job spec's validation error as one line that names the place and the field.

pydantic reports every problem with its location as a tuple of keys; a job
file's user gets the first one, as ``job.yaml:12: resources.gpu: ...`` (the
line where a YAML file has it), an unknown field with the valid fields spelled
close to it, and how many more problems follow, in the hint.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel, ValidationError


class At(ValueError):
    """A check across fields (a model validator, whose errors pydantic places at
    the top) that knows which field is wrong: its path, so the error names
    that field and its line."""

    def __init__(self, loc: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def first_error(exc: ValidationError, model: Any, where: str,
                line_of: Callable[[tuple[Any, ...]], int] | None = None) -> str:
    """The first problem of ``exc`` (from validating ``model``) as
    ``where[:line]: field: message``; the line where ``line_of`` can say it."""
    error = exc.errors(include_url=False, include_input=False)[0]
    cause = (error.get("ctx") or {}).get("error")
    loc = cause.loc if isinstance(cause, At) else tuple(error["loc"])
    field = ".".join(str(p) for p in loc) or "(top)"
    if line_of is None:
        return f"{where}: {field}: {_message(error, model)}"
    return f"{where}:{line_of(loc)}: {field}: {_message(error, model)}"


def more_problems(exc: ValidationError) -> str | None:
    n = exc.error_count()
    return f"{n - 1} more problem(s) after this one" if n > 1 else None


def _message(error: Any, model: Any) -> str:
    kind, msg = error["type"], str(error["msg"])
    if kind == "extra_forbidden":
        close = _close_fields(model, tuple(error["loc"]))
        guess = f", did you mean {' or '.join(close)}?" if close else ""
        return f"unknown field{guess} (`gpucloud schema job` lists the fields)"
    if kind == "missing":
        return "required"
    return msg.removeprefix("Value error, ")


def _close_fields(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The fields valid where an unknown one stands (`resources.gpus`: those of
    resources) that are spelled close to it."""
    import difflib

    parts = list(loc[:-1])
    while parts:
        field = model.model_fields.get(parts.pop(0))
        model = _model_in(field.annotation) if field is not None else None
        if model is None:
            return []
        if _keyed(field.annotation):  # secrets: NAME -> SecretRef; the NAME comes next
            if not parts:
                return []
            parts.pop(0)
    return difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=2)


def _model_in(annotation: Any) -> Any:
    """The model a field holds: Resources, Optional[Checkpoint], dict[str, SecretRef]."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _keyed(annotation: Any) -> bool:
    import typing

    return typing.get_origin(annotation) in (dict, list) or any(
        _keyed(a) for a in typing.get_args(annotation) if typing.get_origin(a) is not None)
