"""Client and AsyncClient: the only code that performs I/O for adapters.

Both run the operations of ``engine.py``; they differ only in how a
``Call`` is carried out (a thread pool of httpx.Client sessions, or asyncio
with httpx.AsyncClient sessions). Retry policy: see ``_http.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ._http import AsyncSession, Session, adrive, drive
from .adapters.base import Sleep
from .context import ClientContext
from .engine import Engine
from .ops import Call, Gather, Op
from .models import Attempt, AuthStatus, Instance, Offer, Plan, ProviderStatus

class _Base:
    def __init__(self, providers: list[str] | None = None, *,
                 credentials: dict[str, str] | None = None,
                 on_attempt: Callable[[Attempt], None] | None = None,
                 use_keyring: bool = True) -> None:
        self._ctx = ClientContext(providers, credentials, on_attempt, use_keyring)
        self._engine = Engine(self._ctx)

    @property
    def warnings(self) -> list[str]:
        """Non-fatal problems of the last call (a provider that could not be reached)."""
        return list(self._ctx.warnings)

    @property
    def last_attempts(self) -> list[Attempt]:
        return list(self._ctx.last_attempts)

    def providers(self) -> list[ProviderStatus]:
        return self._ctx.statuses()

    @property
    def keyring_problem(self) -> str | None:
        """Why the system keyring could not be read (e.g. no backend), if it could not."""
        return self._ctx.credentials.keyring_problem

    def _create_op(self, kw: dict[str, Any]) -> Op:
        plan = kw.pop("plan", None)
        if plan is None:
            plan = yield from self._engine.plan(
                kw["gpu"], kw["count"], kw["provider"], kw["region"], kw["disk_gb"],
                kw["auto_shutdown"], kw["max_cost"], kw["spot"], kw["n"])
        made = yield from self._engine.create(plan, name=kw["name"], image=kw["image"],
                                              ssh_key=kw["ssh_key"], disk_gb=kw["disk_gb"])
        # One machine by default (the common case reads naturally); a list for n > 1.
        return made[0] if plan.instances == 1 and kw["n"] == 1 else made


class Client(_Base):
    """Synchronous client. Providers are queried in parallel threads."""

    def __init__(self, providers: list[str] | None = None, *,
                 credentials: dict[str, str] | None = None,
                 on_attempt: Callable[[Attempt], None] | None = None,
                 use_keyring: bool = True, sleep: Callable[[float], None] | None = None) -> None:
        super().__init__(providers, credentials=credentials, on_attempt=on_attempt,
                         use_keyring=use_keyring)
        self._sleep = sleep or time.sleep
        self._sessions: dict[str, Session] = {}

    def _session(self, name: str) -> Session:
        if name not in self._sessions:
            self._sessions[name] = Session(self._ctx.adapter(name), sleep=self._sleep)
        return self._sessions[name]

    def _call(self, call: Call) -> Any:
        return self._session(call.provider).run(call.flow)

    def _capture(self, call: Call) -> Any:
        try:
            return self._call(call)
        except Exception as exc:  # noqa: BLE001 - handed back to the operation
            return exc

    def _perform(self, item: Any) -> Any:
        if isinstance(item, Call):
            return self._call(item)
        if isinstance(item, Gather):
            if len(item.calls) <= 1:
                return [self._capture(c) for c in item.calls]
            with ThreadPoolExecutor(max_workers=min(8, len(item.calls))) as pool:
                return list(pool.map(self._capture, item.calls))
        if isinstance(item, Sleep):
            return self._sleep(item.seconds)
        raise TypeError(f"unknown instruction {item!r}")

    def _run(self, op: Op) -> Any:
        return drive(op, self._perform)

    def offers(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
               region: str | None = None, spot: bool = False, max_price: Any = None) -> list[Offer]:
        return self._run(self._engine.offers(gpu, count, provider, region, spot, max_price))

    def estimate(self, gpu: str = "h100", count: int = 8, hours: Any = 1,
                 provider: str | None = None, region: str | None = None,
                 disk_gb: int | None = None) -> Any:
        return self._run(self._engine.estimate(gpu, count, hours, provider, region, disk_gb))

    def plan(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
             region: str | None = None, disk_gb: int | None = None, auto_shutdown: Any = None,
             max_cost: Any = None, spot: bool = False, n: int = 1) -> Plan:
        return self._run(self._engine.plan(gpu, count, provider, region, disk_gb,
                                           auto_shutdown, max_cost, spot, n))

    def create(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
               region: str | None = None, name: str | None = None, image: str | None = None,
               ssh_key: str | None = None, disk_gb: int | None = None,
               auto_shutdown: Any = None, max_cost: Any = None, spot: bool = False,
               n: int = 1, plan: Plan | None = None) -> Any:
        """Create one machine (an Instance), or `n` alike (a list of Instances).

        Plans first (cheapest available offer, estimate, `max_cost`), then
        launches; see launcher.py for failover and reconcile."""
        kw = dict(locals())
        kw.pop("self")
        return self._run(self._create_op(kw))

    def list(self, provider: str | None = None) -> list[Instance]:
        return self._run(self._engine.list(provider))

    def get(self, ref: Any) -> Instance:
        return self._run(self._engine.get(ref))

    def delete(self, ref: Any) -> None:
        return self._run(self._engine.delete(ref))

    def wait(self, ref: Any, until: str = "running", timeout: float = 600) -> Instance:
        return self._run(self._engine.wait(ref, until, timeout))

    def stop(self, ref: Any) -> Instance:
        """Power a machine off, keeping its disk (providers with stop/start only)."""
        return self._run(self._engine.power(ref, "stop"))

    def start(self, ref: Any) -> Instance:
        """Power a stopped machine on again: billing resumes."""
        return self._run(self._engine.power(ref, "start"))

    def verify(self, provider: str) -> Any:
        """Check a provider's credential with a cheap read; returns the token expiry if known."""
        return self._run(self._engine.verify(provider))

    def auth_status(self) -> list[AuthStatus]:
        return self._run(self._engine.auth_status())

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncClient(_Base):
    """The same methods as Client, as coroutines (httpx.AsyncClient underneath)."""

    def __init__(self, providers: list[str] | None = None, *,
                 credentials: dict[str, str] | None = None,
                 on_attempt: Callable[[Attempt], None] | None = None,
                 use_keyring: bool = True, sleep: Callable[[float], Any] | None = None) -> None:
        super().__init__(providers, credentials=credentials, on_attempt=on_attempt,
                         use_keyring=use_keyring)
        self._sleep = sleep
        self._sessions: dict[str, AsyncSession] = {}

    def _session(self, name: str) -> AsyncSession:
        if name not in self._sessions:
            self._sessions[name] = AsyncSession(self._ctx.adapter(name), sleep=self._sleep)
        return self._sessions[name]

    async def _perform(self, item: Any) -> Any:
        import asyncio

        if isinstance(item, Call):
            return await self._session(item.provider).run(item.flow)
        if isinstance(item, Gather):
            return list(await asyncio.gather(
                *(self._session(c.provider).run(c.flow) for c in item.calls),
                return_exceptions=True))
        if isinstance(item, Sleep):
            return await (self._sleep or asyncio.sleep)(item.seconds)
        raise TypeError(f"unknown instruction {item!r}")

    async def _run(self, op: Op) -> Any:
        return await adrive(op, self._perform)

    async def offers(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
                     region: str | None = None, spot: bool = False,
                     max_price: Any = None) -> list[Offer]:
        return await self._run(self._engine.offers(gpu, count, provider, region, spot, max_price))

    async def estimate(self, gpu: str = "h100", count: int = 8, hours: Any = 1,
                       provider: str | None = None, region: str | None = None,
                       disk_gb: int | None = None) -> Any:
        return await self._run(self._engine.estimate(gpu, count, hours, provider, region, disk_gb))

    async def plan(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
                   region: str | None = None, disk_gb: int | None = None,
                   auto_shutdown: Any = None, max_cost: Any = None, spot: bool = False,
                   n: int = 1) -> Plan:
        return await self._run(self._engine.plan(gpu, count, provider, region, disk_gb,
                                                 auto_shutdown, max_cost, spot, n))

    async def create(self, gpu: str = "h100", count: int = 8, provider: str | None = None,
                     region: str | None = None, name: str | None = None,
                     image: str | None = None, ssh_key: str | None = None,
                     disk_gb: int | None = None, auto_shutdown: Any = None,
                     max_cost: Any = None, spot: bool = False, n: int = 1,
                     plan: Plan | None = None) -> Any:
        kw = dict(locals())
        kw.pop("self")
        return await self._run(self._create_op(kw))

    async def list(self, provider: str | None = None) -> list[Instance]:
        return await self._run(self._engine.list(provider))

    async def get(self, ref: Any) -> Instance:
        return await self._run(self._engine.get(ref))

    async def delete(self, ref: Any) -> None:
        return await self._run(self._engine.delete(ref))

    async def wait(self, ref: Any, until: str = "running", timeout: float = 600) -> Instance:
        return await self._run(self._engine.wait(ref, until, timeout))

    async def stop(self, ref: Any) -> Instance:
        return await self._run(self._engine.power(ref, "stop"))

    async def start(self, ref: Any) -> Instance:
        return await self._run(self._engine.power(ref, "start"))

    async def verify(self, provider: str) -> Any:
        return await self._run(self._engine.verify(provider))

    async def auth_status(self) -> list[AuthStatus]:
        return await self._run(self._engine.auth_status())

    async def aclose(self) -> None:
        for session in self._sessions.values():
            await session.aclose()
        self._sessions.clear()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
