"""The job methods of Client and AsyncClient (jobs.py does the work).

A job (``spec``) is a JobSpec, a dict or the path of a job YAML file; a job
reference (``ref``) is a Job, "provider/id", its name or a unique id prefix.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from os import PathLike
from typing import TYPE_CHECKING, Any, Literal, Union, overload


if TYPE_CHECKING:
    from gpucloud.jobs.spec import JobSpec
    from gpucloud.models import Job, Plan

    JobSpecLike = Union[JobSpec, str, PathLike[str], dict[str, Any]]
    JobRef = Union[Job, str]

FOLLOW_INTERVAL = 2.0  # seconds between two reads of a followed job's logs


class JobMethods:
    _engine: Any

    def _run(self, op: Any) -> Any:  # pragma: no cover - Client provides it
        raise NotImplementedError

    def _pause(self, seconds: float) -> None:
        getattr(self, "_sleep", time.sleep)(seconds)

    def plan_job(self, spec: JobSpecLike, provider: str | None = None,
                 region: str | None = None, dry_run: bool = False) -> Plan:
        """What submit would launch, its estimate and deadline; spends nothing and
        reads no secret. `dry_run`: with no credentials, plan from the bundled catalog."""
        result: Plan = self._run(self._engine.plan_job(spec, provider, region, dry_run))
        return result

    def submit(self, spec: JobSpecLike, provider: str | None = None, region: str | None = None,
               plan: Plan | None = None) -> Job:
        """Plan (cheapest offer, estimate, max_cost, max_runtime as the deadline) and
        launch the job; its secrets are read now and sent to the provider only."""
        result: Job = self._run(self._engine.submit(spec, provider, region, plan))
        return result

    def jobs(self, provider: str | None = None) -> list[Job]:
        """Jobs on every provider in scope, newest first (a failure is a warning)."""
        result: list[Job] = self._run(self._engine.jobs(provider))
        return result

    def job(self, ref: JobRef) -> Job:
        result: Job = self._run(self._engine.job(ref))
        return result

    def cancel(self, ref: JobRef) -> Job:
        """Stop the job and end its machine; the job as it is afterwards."""
        result: Job = self._run(self._engine.cancel(ref))
        return result

    @overload
    def logs(self, ref: JobRef, follow: Literal[False] = False,
             tail: int | None = None) -> str: ...

    @overload
    def logs(self, ref: JobRef, follow: Literal[True], tail: int | None = None
             ) -> Iterator[str]: ...

    def logs(self, ref: JobRef, follow: bool = False,
             tail: int | None = None) -> str | Iterator[str]:
        """The job's output (where the provider offers it); ``follow=True``: an
        iterator of lines as they come, until the job ends."""
        if not follow:
            _, text = self._run(self._engine.job_logs(ref, tail))
            return str(text)
        return self._follow(ref, tail)

    def _follow(self, ref: JobRef, tail: int | None) -> Iterator[str]:
        # not at import: the client loads without jobs
        from gpucloud.jobs.ops import ENDED, new_lines

        seen, first = 0, True
        while True:
            # The whole output each time (a tail's window would hide what is new).
            job, text = self._run(self._engine.job_logs(ref))
            ref = job  # found once: no second lookup by name
            seen, fresh = new_lines(seen, text)
            yield from (fresh[-tail:] if first and tail else fresh)
            first = False
            if job.status in ENDED:
                return
            self._pause(FOLLOW_INTERVAL)


class AsyncJobMethods:
    _engine: Any
    _sleep: Any

    async def _run(self, op: Any) -> Any:  # pragma: no cover - AsyncClient provides it
        raise NotImplementedError

    async def plan_job(self, spec: JobSpecLike, provider: str | None = None,
                       region: str | None = None, dry_run: bool = False) -> Plan:
        result: Plan = await self._run(self._engine.plan_job(spec, provider, region, dry_run))
        return result

    async def submit(self, spec: JobSpecLike, provider: str | None = None,
                     region: str | None = None, plan: Plan | None = None) -> Job:
        result: Job = await self._run(self._engine.submit(spec, provider, region, plan))
        return result

    async def jobs(self, provider: str | None = None) -> list[Job]:
        result: list[Job] = await self._run(self._engine.jobs(provider))
        return result

    async def job(self, ref: JobRef) -> Job:
        result: Job = await self._run(self._engine.job(ref))
        return result

    async def cancel(self, ref: JobRef) -> Job:
        result: Job = await self._run(self._engine.cancel(ref))
        return result

    async def logs(self, ref: JobRef, follow: bool = False, tail: int | None = None) -> str:
        """The job's output; ``follow=True`` waits until the job ends and returns
        all of it (``follow_logs`` yields the lines as they come)."""
        if follow:
            return "".join([line + "\n" async for line in self.follow_logs(ref, tail)])
        _, text = await self._run(self._engine.job_logs(ref, tail))
        return str(text)

    async def follow_logs(self, ref: JobRef, tail: int | None = None) -> AsyncIterator[str]:
        """Lines as they come, until the job ends (``logs(follow=True)`` of Client)."""
        import asyncio

        from gpucloud.jobs.ops import ENDED, new_lines

        seen, first = 0, True
        while True:
            job, text = await self._run(self._engine.job_logs(ref))
            ref = job
            seen, fresh = new_lines(seen, text)
            for line in (fresh[-tail:] if first and tail else fresh):
                yield line
            first = False
            if job.status in ENDED:
                return
            await (self._sleep or asyncio.sleep)(FOLLOW_INTERVAL)
