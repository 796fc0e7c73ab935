"""Batches: Client.create_many and AsyncClient.create_many (batch.py does the work)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpucloud.core.instructions import DEFAULT_CONCURRENCY, Op
from gpucloud.types import Deadline, Duration, Money

if TYPE_CHECKING:
    from gpucloud.batch.models import BatchItem, BatchResult, CreateRequest
    from gpucloud.models import Plan


def many_op(engine: Any, gpu: str, count: int, n: int, provider: str | None,
            region: str | None, name: str | None, image: str | None,
            ssh_key: str | None, disk_gb: int | None, auto_shutdown: Duration | None,
            max_cost: Money | None, spot: bool, plan: Plan | None,
            until: Deadline | None, requests: Any, concurrency: int,
            all_or_nothing: bool, batch: str | None, on_item: Any) -> Op:
    from gpucloud.batch import create as batching
    from gpucloud.batch.models import CreateRequest  # the real class, not a name for types

    if requests is None:
        one = CreateRequest(gpu=gpu, count=count, provider=provider, region=region,
                           name=name, image=image, ssh_key=ssh_key, disk_gb=disk_gb,
                           auto_shutdown=auto_shutdown, until=until, spot=spot)
        wanted = batching.copies(one, n)
    else:
        given = [k for k, v in dict(provider=provider, region=region, name=name,
                                   image=image, ssh_key=ssh_key, disk_gb=disk_gb,
                                   auto_shutdown=auto_shutdown, until=until,
                                   plan=plan, spot=spot or None).items()
                if v is not None]
        if given:
            from gpucloud.errors import SpecError

            raise SpecError(f"with requests=, give {', '.join(given)} in each request",
                           hint="each CreateRequest (or dict) carries create's arguments")
        wanted = batching.requests_of(requests)
    run = engine.create_many(wanted, max_cost=max_cost, plan=plan, concurrency=concurrency,
                             all_or_nothing=all_or_nothing, batch=batch, progress=on_item)
    if not batch:  # a fresh random key: nothing to share
        return (yield from run)
    from gpucloud.batch.lock import held

    # Held from before planning until the run (roll-back included) is over: a
    # second run of the key fails here instead of launching the same slots.
    with held(engine.ctx.journal.path.parent, batch):
        return (yield from run)




class BatchMethods:
    _engine: Any

    def _run(self, op: Any) -> Any:  # pragma: no cover - Client provides it
        raise NotImplementedError

    def create_many(self, gpu: str = "h100", count: int = 8, n: int = 2,
                   provider: str | None = None, region: str | None = None,
                   name: str | None = None, image: str | None = None,
                   ssh_key: str | None = None, disk_gb: int | None = None,
                   auto_shutdown: Duration | None = None, max_cost: Money | None = None,
                   spot: bool = False, plan: Plan | None = None,
                   until: Deadline | None = None, *,
                   requests: Sequence[CreateRequest | Mapping[str, object]] | None = None,
                   concurrency: int = DEFAULT_CONCURRENCY, all_or_nothing: bool = False,
                   batch: str | None = None,
                   on_item: Callable[[BatchItem], None] | None = None) -> BatchResult:
        """Create `n` machines alike (names NAME-1..NAME-n), or one per entry of
        `requests` (CreateRequests or dicts of create's arguments). Every distinct
        request is planned first and `max_cost` caps the whole batch. At most
        `concurrency` launches are in flight. Returns a BatchResult (one item per
        machine: made, or why not); `all_or_nothing=True` terminates what was made
        when any fails and raises BatchIncompleteError. `batch`: a key that makes
        the batch resumable: run again with it, only missing machines are made.
        `on_item` is called as each machine settles (from a worker thread)."""
        result: BatchResult = self._run(many_op(
            self._engine, gpu, count, n, provider, region, name, image, ssh_key, disk_gb,
            auto_shutdown, max_cost, spot, plan, until, requests, concurrency, all_or_nothing,
            batch, on_item))
        return result


class AsyncBatchMethods:
    _engine: Any

    async def _run(self, op: Any) -> Any:  # pragma: no cover - AsyncClient provides it
        raise NotImplementedError

    async def create_many(self, gpu: str = "h100", count: int = 8, n: int = 2,
                         provider: str | None = None, region: str | None = None,
                         name: str | None = None, image: str | None = None,
                         ssh_key: str | None = None, disk_gb: int | None = None,
                         auto_shutdown: Duration | None = None, max_cost: Money | None = None,
                         spot: bool = False, plan: Plan | None = None,
                         until: Deadline | None = None, *,
                         requests: Sequence[CreateRequest | Mapping[str, object]] | None = None,
                         concurrency: int = DEFAULT_CONCURRENCY, all_or_nothing: bool = False,
                         batch: str | None = None,
                         on_item: Callable[[BatchItem], None] | None = None) -> BatchResult:
        """As Client.create_many; launches run as concurrent tasks."""
        result: BatchResult = await self._run(many_op(
            self._engine, gpu, count, n, provider, region, name, image, ssh_key, disk_gb,
            auto_shutdown, max_cost, spot, plan, until, requests, concurrency, all_or_nothing,
            batch, on_item))
        return result
