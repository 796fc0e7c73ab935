"""README's job spec reference and `gpucloud schema job` describe the same
fields: every field of the schema is documented, and nothing else is."""

from __future__ import annotations

import re
from typing import Any

from gpucloud.jobs.spec import schema
from tests.docs._readme import section


def schema_fields(node: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for name, prop in node.get("properties", {}).items():
        path = prefix + name
        out.add(path)
        target = _target(prop, defs)
        if target is None:
            continue
        if "properties" in target:
            out |= schema_fields(target, defs, path + ".")
        extra = target.get("additionalProperties")
        if isinstance(extra, dict) and _target(extra, defs) is not None:
            out |= schema_fields(_target(extra, defs), defs, path + ".NAME.")
    return out


def _target(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any] | None:
    """The object schema a property points to ($ref, possibly inside anyOf with null)."""
    for option in [prop, *prop.get("anyOf", [])]:
        if "$ref" in option:
            return defs[option["$ref"].rsplit("/", 1)[1]]
        if option.get("type") == "object":
            return option
    return None


def documented() -> set[str]:
    table = section("Portable jobs").split("| field |", 1)[1]
    return {m.group(1) for m in re.finditer(r"^\| `([A-Za-z_.]+)` \|", table, re.M)}


def test_every_schema_field_is_documented_and_nothing_else():
    out = schema()
    fields = schema_fields(out, out["$defs"])
    assert {"resources.gpu", "checkpoint.dir", "secrets.NAME.env"} <= fields
    assert documented() == fields
