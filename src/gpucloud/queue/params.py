"""Task parameters in a job spec: ``{name}`` in its command, args or env values
is the value of ``--param name=VALUE``.

Names match case-sensitively (``{lr}`` is not ``{LR}``), like the environment
variables and identifiers they look like. Two forms are not references:
``{{name}}`` is the literal text ``{name}`` (for a program that fills its own
braces, e.g. a checkpoint file-name template), and ``${name}`` is a shell's
variable, left for the shell. Any other brace is left as written.

One pattern serves both the substitution and the question "which names does
this spec use", so what submit checks is what the task receives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for its type only: the CLI reads these rules without loading pydantic
    from gpucloud.jobs.spec import JobSpec

NAME = r"[A-Za-z_][A-Za-z0-9_]*"  # a parameter name, as submit checks it
_WHOLE_NAME = re.compile(rf"^{NAME}$")
# Tried left to right at each position: a shell variable, an escaped brace, a reference.
_TEMPLATE = re.compile(r"\$\{" + NAME + r"\}|\{\{(" + NAME + r")\}\}|\{(" + NAME + r")\}")


def fill(text: str, params: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` given in ``params`` replaced and ``{{name}}``
    unescaped; a reference nothing gives stays as written."""

    def one(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped is not None:
            return "{" + escaped + "}"
        if name is not None:
            return params.get(name, match.group(0))
        return match.group(0)
    return _TEMPLATE.sub(one, text)


def _texts(spec: Any) -> Iterable[tuple[str, str]]:
    """(where, text) for every text of the spec that parameters fill."""
    for item in spec.command:
        yield "command", item
    for item in spec.args:
        yield "args", item
    for key, value in spec.env.items():
        yield f"env {key}", value


def used_names(spec: Any) -> dict[str, str]:
    """The parameter names the spec refers to, each with where it first does
    ("args", "command", "env NAME"), in the order they appear."""
    used: dict[str, str] = {}
    for where, text in _texts(spec):
        for match in _TEMPLATE.finditer(text):
            if match.group(2) is not None:
                used.setdefault(match.group(2), where)
    return used


def env_name(name: str) -> str:
    return f"GPUCLOUD_PARAM_{name.upper()}"


def check(spec: Any, given: Iterable[str]) -> list[str]:
    """SpecError naming the first ``{name}`` the spec uses that ``given`` lacks;
    else warnings, one per given name the spec does not use."""
    from gpucloud.errors import SpecError

    names = list(given)
    used = used_names(spec)
    for name, where in used.items():
        if name in names:
            continue
        other = next((n for n in names if n.lower() == name.lower()), None)
        case = (f" (--param {other}=… does not match {{{name}}}: parameter names are "
                "case-sensitive)") if other is not None else ""
        raise SpecError(f"{{{name}}} in the job's {where} has no value: give --param "
                        f"{name}=VALUE{case}",
                        hint=f"write {{{{{name}}}}} for a literal {{{name}}}")
    texts = [text for _, text in _texts(spec)]
    warnings = []
    for name in names:
        if name in used or any(env_name(name) in text for text in texts):
            continue
        warnings.append(f"--param {name} is used nowhere in the job: no {{{name}}} in its "
                        f"command, args or env (the task sees it only as {env_name(name)})")
    return warnings


def apply_params(spec: JobSpec, params: dict[str, str]) -> JobSpec:
    """The spec with a task's params: GPUCLOUD_PARAM_<NAME> in its env and
    "{name}" in its command, args and env values replaced, "{{name}}" made
    "{name}" (the rules above)."""

    env = {key: fill(value, params) for key, value in spec.env.items()}
    for name, value in params.items():
        env[env_name(name)] = value
    return spec.model_copy(update={"env": env,
                                   "command": [fill(a, params) for a in spec.command],
                                   "args": [fill(a, params) for a in spec.args]})


def check_values(params: Any) -> None:
    """SpecError unless ``params`` maps parameter names to strings a process can
    receive (no NUL: it cannot travel in an argument or an environment variable)."""
    from gpucloud.errors import SpecError

    if not isinstance(params, dict):
        raise SpecError("the parameters are not a mapping of names to values")
    for key, value in params.items():
        if not isinstance(key, str) or not _WHOLE_NAME.match(key):
            raise SpecError(f"{key!r} is not a parameter name",
                            hint="letters, digits and _ (it becomes "
                                 "GPUCLOUD_PARAM_<NAME> in the job's env)")
        if not isinstance(value, str):
            raise SpecError(f"parameter {key}: give the value as a string")
        if "\0" in value:
            raise SpecError(f"parameter {key}: the value contains a NUL character (\\0)",
                            hint="no command argument or environment variable can hold one")
