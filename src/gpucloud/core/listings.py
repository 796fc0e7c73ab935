"""One listing call on each provider in scope, one provider's failure a warning.

What a listing of jobs and of volumes share: the calls run together, and a
provider that could not answer is named in the client's warnings, unless the
caller asked for that provider alone or none answered, since "nothing there"
must never mean "could not look".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpucloud.core.instructions import Call, Gather, Op
from gpucloud.errors import GpuCloudError

if TYPE_CHECKING:
    from gpucloud.core.context import ClientContext


def each_provider(ctx: ClientContext, names: list[str], call: Callable[[Any], Any],
                  what: str, provider: str | None = None) -> Op:
    """[(name, its listing)] of the providers `names` that answered `call(adapter)`;
    `what` words the warning ("jobs"), `provider`: the one asked for by name."""
    results = yield Gather([Call(n, call(ctx.adapter(n))) for n in names])
    ctx.warnings.clear()
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed and (provider is not None or len(failed) == len(names)):
        raise failed[0]
    answered = []
    for name, result in zip(names, results):
        if isinstance(result, BaseException):
            if not isinstance(result, GpuCloudError):
                raise result
            ctx.warnings.append(f"{name}: could not list {what} ({result})")
            continue
        answered.append((name, result))
    return answered


__all__ = ["each_provider"]
