"""extend and reap through the SDK, sync and async, against the sandbox with
its own timer off: the provider's copy of the deadline is what moves."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from gpucloud import AsyncClient, Client, SpecError


@pytest.fixture(autouse=True)
def no_native_timer(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_NATIVE_TIMER", "0")


def test_extend_moves_the_providers_copy_and_the_reaper_honours_it():
    with Client(providers=["sandbox"]) as client:
        machine = client.create(gpu="h100", count=1, auto_shutdown="1s")
        extended = client.extend(machine, by="1h")
        assert extended.shutdown_at == machine.shutdown_at + timedelta(hours=1)
        time.sleep(1.2)
        report = client.reap()
        assert report.actions == () and report.checked == 1
        with Client(providers=["sandbox"]) as other:  # another process reads the cloud
            assert other.get(machine.ref).shutdown_at == extended.shutdown_at


def test_extend_refuses_an_ended_machine():
    with Client(providers=["sandbox"]) as client:
        machine = client.create(gpu="h100", count=1, auto_shutdown="1h")
        client.delete(machine)
        with pytest.raises(SpecError, match="nothing to extend"):
            client.extend(machine, by="1h")


def test_async_extend_and_reap():
    async def run():
        async with AsyncClient(providers=["sandbox"]) as client:
            soon = await client.create(gpu="h100", count=1, auto_shutdown="1s")
            later = await client.create(gpu="h100", count=1, auto_shutdown="1h")
            moved = await client.extend(later, until=later.shutdown_at + timedelta(hours=1))
            await asyncio.sleep(1.2)
            report = await client.reap()
            return soon, moved, report
    soon, moved, report = asyncio.run(run())
    assert moved.shutdown_at is not None
    assert [(a.action, a.instance.id) for a in report.actions] == [("terminated", soon.id)]
