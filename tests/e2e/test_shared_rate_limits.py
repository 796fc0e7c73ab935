"""Rate limits are shared by every client of a provider account in the process:
two Clients in threads, and AsyncClients under asyncio.gather, pace to one
budget (Lambda through respx, in virtual time: each thread or task keeps its
own clock, which its fake sleep advances, so no test waits 12 s)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from pathlib import Path

import pytest
import respx

from gpucloud import AsyncClient, Client
from gpucloud.transport import ratelimit
from tests.e2e.test_lambda_client import KEY, PUBKEY, FakeLambda

NOW: contextvars.ContextVar[float] = contextvars.ContextVar("now", default=1000.0)


def vclock() -> float:
    return NOW.get()


def vsleep(seconds: float) -> None:
    NOW.set(NOW.get() + seconds)


async def avsleep(seconds: float) -> None:
    vsleep(seconds)


class TimedLambda(FakeLambda):
    """FakeLambda noting the (virtual) time each request arrives."""

    def __init__(self, router) -> None:
        self.times: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        super().__init__(router)

    def handle(self, request):
        with self.lock:
            self.times.append((vclock(), request.url.path))
            return super().handle(request)

    def spacing(self, path_end: str = "") -> list[float]:
        times = sorted(t for t, path in self.times if path.endswith(path_end))
        return [b - a for a, b in zip(times, times[1:])]


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(ratelimit, "LIMITERS", ratelimit.LimiterRegistry(clock=vclock))
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", KEY)
    ssh = Path.home() / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519.pub").write_text(PUBKEY + "\n")
    with respx.mock(base_url="https://cloud.lambda.ai", assert_all_called=False) as router:
        yield TimedLambda(router)


def in_threads(*jobs) -> None:
    errors: list[BaseException] = []

    def run(job):
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors


def test_two_clients_in_threads_share_lambdas_one_request_per_second(fake):
    clients = [Client(providers=["lambda"], sleep=vsleep) for _ in range(2)]

    def lists(client):
        return lambda: [client.list() for _ in range(4)]

    in_threads(*(lists(c) for c in clients))
    assert len(fake.times) == 8
    assert min(fake.spacing()) >= 1.0 - 1e-6, fake.times


def test_async_clients_under_gather_share_the_pacing(fake):
    async def main():
        clients = [AsyncClient(providers=["lambda"], sleep=avsleep) for _ in range(2)]
        await asyncio.gather(*(c.list() for c in clients for _ in range(4)))
        for c in clients:
            await c.aclose()

    asyncio.run(main())
    assert len(fake.times) == 8
    assert min(fake.spacing()) >= 1.0 - 1e-6, fake.times


def test_concurrent_creates_keep_lambdas_12_s_launch_spacing(fake):
    made = []

    def create():
        made.append(Client(providers=["lambda"], sleep=vsleep).create(
            gpu="h100", count=8, auto_shutdown="1h"))

    in_threads(create, create, create)
    assert len(made) == 3 and len({m.id for m in made}) == 3
    assert len(fake.spacing("/launch")) == 2
    assert min(fake.spacing("/launch")) >= 12.0 - 1e-6, fake.times
    assert min(fake.spacing()) >= 1.0 - 1e-6
