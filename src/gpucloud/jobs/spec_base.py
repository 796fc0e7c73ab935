"""What every part of a job file shares: frozen, strict models that refuse a
NUL anywhere and never repeat a refused value in their messages."""

from __future__ import annotations

import re
from typing import Any, Optional, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Spec(BaseModel):
    # hide_input_in_errors: a token pasted where a reference belongs must not
    # be repeated by pydantic's own message either.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True,
                              defer_build=True)  # built on first use: CLI start-up

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, value: Any, info: ValidationInfo) -> Any:
        # A NUL cannot travel in a process argument, an environment variable or
        # a path (the C strings of execve(2)): refused here, where the field is
        # known, not when a machine or a worker fails to start the job. A
        # nested model (checkpoint) checks its own fields, to name them.
        field = cls.model_fields.get(info.field_name or "")
        nested = field is not None and get_origin(field.annotation) is not dict
        if isinstance(value, dict) and nested:
            return value
        where = _nul_in(value)
        if where is not None:
            raise ValueError(f"contains a NUL character (\\0){where}: no command, "
                             "environment variable or path can hold one")
        return value


def _nul_in(value: Any) -> Optional[str]:
    """None, or where in a field's raw value a NUL is (" in item 2", " in a key")."""
    if isinstance(value, str):
        return "" if "\0" in value else None
    if isinstance(value, (list, tuple)):
        return next((f" in item {i}" for i, v in enumerate(value)
                     if isinstance(v, str) and "\0" in v), None)
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\0" in key:
                return " in a key"
            if isinstance(item, str) and "\0" in item:
                return f" in the value of {key!r}" if isinstance(key, str) else " in a value"
    return None
