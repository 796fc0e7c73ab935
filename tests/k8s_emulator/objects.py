"""Pieces of the Kubernetes API's behaviour that every resource shares: meta/v1
Status bodies, timestamps, name validation, quantities and selectors.

Messages follow the real apiserver's wording (k8s.io/apimachinery validation and
the registry's error helpers) so an adapter that shows them shows what a user of
a real cluster would see."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


class ApiError(Exception):
    """Raised anywhere in the emulator; the server answers with its Status body."""

    def __init__(self, body: dict[str, Any]):
        super().__init__(body.get("message"))
        self.body = body
        self.code = int(body["code"])


def rfc3339(epoch: float) -> str:
    """Kubernetes metav1.Time: second precision, UTC, 'Z'."""
    return datetime.fromtimestamp(int(epoch), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def failure(code: int, reason: str, message: str, details: dict[str, Any] | None = None
            ) -> ApiError:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message, "reason": reason}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return ApiError(body)


def success(name: str, kind: str, uid: str, group: str | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details.update({"kind": kind, "uid": uid})
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": details}


def qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    details = {"name": name, **({"group": group} if group else {}), "kind": resource}
    return failure(404, "NotFound", f'{qualified(resource, group)} "{name}" not found', details)


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    details = {"name": name, **({"group": group} if group else {}), "kind": resource}
    return failure(409, "AlreadyExists",
                   f'{qualified(resource, group)} "{name}" already exists', details)


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """causes: (reason, field, message) as in field.ErrorList; the top message
    joins them the way the apiserver's NewInvalid does."""
    qualified_kind = f"{kind}.{group}" if group else kind
    texts = [f"{field}: {message}" for _, field, message in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = {"name": name, **({"group": group} if group else {}), "kind": kind,
               "causes": [{"reason": r, "message": m, "field": f} for r, f, m in causes]}
    if not name:
        details.pop("name")
    return failure(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {joined}', details)


def bad_request(message: str) -> ApiError:
    return failure(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return failure(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, resource: str, group: str, namespace: str | None
              ) -> ApiError:
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    message = (f'{qualified(resource, group)} is forbidden: User "{user}" cannot {verb} '
               f'resource "{resource}" in API group "{group}"{where}')
    return failure(403, "Forbidden", message, {"kind": resource})


def name_causes(name: str | None, generate: bool, max_len: int = 253
                ) -> list[tuple[str, str, str]]:
    if not name:
        if generate:
            return []
        return [("FieldValueRequired", "metadata.name",
                 "Required value: name or generateName is required")]
    problems = []
    if len(name) > max_len:
        problems.append(f"must be no more than {max_len} characters")
    if not DNS1123_SUBDOMAIN.match(name):
        problems.append(DNS1123_SUBDOMAIN_MSG)
    return [("FieldValueInvalid", "metadata.name", f'Invalid value: "{name}": {p}')
            for p in problems]


_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1), "m": Decimal("0.001"), "k": Decimal(10**3), "M": Decimal(10**6),
    "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60)}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def quantity(value: Any) -> Decimal | None:
    """resource.Quantity to a number; None when it does not parse."""
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        return None
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]
    except InvalidOperation:
        return None


# --- selectors ---------------------------------------------------------------

def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses ("a in (x,y),b" -> two requirements)."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


_SET = re.compile(r"^([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)$")
_EQ = re.compile(r"^([^\s!=()]+)\s*(==|=|!=)\s*([^\s!=()]*)$")
_KEY = re.compile(r"^(!?)\s*([^\s!=()]+)$")


def label_matcher(selector: str | None) -> Callable[[dict[str, str]], bool]:
    """labels.Parse: =, ==, !=, in, notin, exists, !exists; ANDed."""
    if not selector:
        return lambda labels: True
    tests: list[Callable[[dict[str, str]], bool]] = []
    for part in _split_top(selector):
        if m := _SET.match(part):
            key, op = m.group(1), m.group(2)
            values = {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                tests.append(lambda ls, k=key, vs=values: ls.get(k) in vs)
            else:
                tests.append(lambda ls, k=key, vs=values: ls.get(k) not in vs)
        elif m := _EQ.match(part):
            key, op, value = m.groups()
            if op == "!=":
                tests.append(lambda ls, k=key, v=value: ls.get(k) != v)
            else:
                tests.append(lambda ls, k=key, v=value: ls.get(k) == v)
        elif m := _KEY.match(part):
            negate, key = m.group(1) == "!", m.group(2)
            tests.append(lambda ls, k=key, n=negate: (k in ls) != n)
        else:
            raise bad_request(f'unable to parse requirement: found \'{part}\', '
                              'expected: in, notin, =, ==, !=, gt, lt')
    return lambda labels: all(test(labels) for test in tests)


def field_matcher(selector: str | None, fields: Callable[[dict[str, Any]], dict[str, str]],
                  supported: set[str]) -> Callable[[dict[str, Any]], bool]:
    """fields.ParseSelector: key=value, key==value, key!=value, ANDed; only the
    fields the resource registers (anything else is a 400, as on a real server)."""
    if not selector:
        return lambda obj: True
    requirements = []
    for part in _split_top(selector):
        m = re.match(r"^([^=!]+)(==|=|!=)(.*)$", part)
        if not m:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        key, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if key not in supported:
            raise bad_request(f'field label not supported: {key}')
        requirements.append((key, op == "!=", value))

    def match(obj: dict[str, Any]) -> bool:
        values = fields(obj)
        return all((values.get(k, "") == v) != negate for k, negate, v in requirements)

    return match


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
