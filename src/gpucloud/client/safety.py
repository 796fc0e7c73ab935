"""The methods of Client and AsyncClient that keep spend in check: extend a
deadline, reap what is past it, reconcile after a crash, report costs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from gpucloud.types import Deadline, Duration, Ref

if TYPE_CHECKING:  # costs, reconcile and the models are imported where used
    from gpucloud.safety.costs import CostReport
    from gpucloud.models import Instance, ReapReport
    from gpucloud.safety.reconcile import ReconcileReport

CostsBy = Literal["provider", "instance", "name"]


class SafetyMethods:
    _engine: Any

    def _run(self, op: Any) -> Any:  # pragma: no cover - Client provides it
        raise NotImplementedError

    def extend(self, ref: Ref, by: Duration | None = None,
               until: Deadline | None = None) -> Instance:
        """Move a machine's deadline later by `by`, or to `until` (aware datetime or
        ISO-8601 with a zone), on the provider and in the journal."""
        result: Instance = self._run(self._engine.extend(ref, by, until))
        return result

    def reap(self, dry_run: bool = False, provider: str | None = None) -> ReapReport:
        """Terminate every gpucloud machine past its deadline, on every provider with
        credentials; works from the providers' own records, not the local journal."""
        result: ReapReport = self._run(self._engine.reap(dry_run, provider))
        return result

    def reconcile(self, terminate_orphans: bool | Iterable[str] = False,
                  provider: str | None = None) -> ReconcileReport:
        """Repair the journal after a crash: adopt machines of launches never
        recorded (by launch id), mark the ones the providers prove absent failed,
        report orphans and foreign machines; terminate the orphans if asked
        (True: all; refs: those among them)."""
        result: ReconcileReport = self._run(self._engine.reconcile(terminate_orphans, provider))
        return result

    def costs(self, month: str | None = None, by: CostsBy = "instance") -> CostReport:
        """A month's spend from the cost ledger (default: this month, UTC, "2026-11"):
        spent so far, and projected for machines still running; unknown prices are None."""
        from gpucloud.safety import costs

        result: CostReport = self._run(costs.report(self._engine, month, by))
        return result


class AsyncSafetyMethods:
    _engine: Any

    async def _run(self, op: Any) -> Any:  # pragma: no cover - AsyncClient provides it
        raise NotImplementedError

    async def extend(self, ref: Ref, by: Duration | None = None,
                     until: Deadline | None = None) -> Instance:
        result: Instance = await self._run(self._engine.extend(ref, by, until))
        return result

    async def reap(self, dry_run: bool = False, provider: str | None = None) -> ReapReport:
        result: ReapReport = await self._run(self._engine.reap(dry_run, provider))
        return result

    async def reconcile(self, terminate_orphans: bool | Iterable[str] = False,
                        provider: str | None = None) -> ReconcileReport:
        result: ReconcileReport = await self._run(
            self._engine.reconcile(terminate_orphans, provider))
        return result

    async def costs(self, month: str | None = None, by: CostsBy = "instance") -> CostReport:
        from gpucloud.safety import costs

        result: CostReport = await self._run(costs.report(self._engine, month, by))
        return result
