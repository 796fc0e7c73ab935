"""Shared test support for the sandbox tests (test_sandbox_*.py): an injected
Clock, and Env, one 'process' (a SandboxCloud over a tmp_path SQLite file, an
adapter over it, and a driver session). Nothing touches the network: every
request goes through SandboxTransport.

The fixtures here (_no_sandbox_env, autouse; catalog, clock, env) are imported
by each test module."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from gpucloud.transport.http import Session
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.sandbox import SandboxProvider
from gpucloud.providers.sandbox.server import SandboxCloud
from gpucloud.providers.sandbox.server import SandboxTransport
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.models import InstanceSpec

T0 = 1_800_000_000.0  # 2027-01-15, an arbitrary fixed "now"
BASE = "https://sandbox.gpucloud.invalid"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def dt(self, offset: float = 0.0) -> datetime:
        return datetime.fromtimestamp(self.now + offset, tz=timezone.utc)


@pytest.fixture(autouse=True)
def _no_sandbox_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("GPUCLOUD_SANDBOX_"):
            monkeypatch.delenv(key)


@pytest.fixture
def catalog():
    return load_catalogs()["sandbox"]


@pytest.fixture
def clock():
    return Clock()


class Env:
    """One 'process': a cloud object, an adapter over it, and a driver session."""

    def __init__(self, db: Path, catalog, clock: Clock, **knobs) -> None:
        self.cloud = SandboxCloud(db, knobs, catalog=catalog, clock=clock)
        self.provider = SandboxProvider(catalog, cloud=self.cloud)
        self.sleeps: list[float] = []
        self.session = Session(self.provider, sleep=self.sleeps.append)

    def run(self, flow):
        return self.session.run(flow)

    def offer(self, instance_type="sim.1xH100", region="sim-east-1"):
        offers = self.run(self.provider.offers(OfferQuery(region=region)))
        return next(o for o in offers if o.instance_type == instance_type)

    def create(self, instance_type="sim.1xH100", region="sim-east-1", launch_id="L-1", **kw):
        spec = InstanceSpec(offer=self.offer(instance_type, region), launch_id=launch_id,
                            name=f"gpucloud-{launch_id}", **kw)
        return self.run(self.provider.create(spec))

    def posts(self) -> list[int]:
        return [status for method, path, status in self.cloud.log
                if method == "POST" and path == "/v1/instances"]

    def raw(self, method: str, path: str, **kw) -> httpx.Response:
        with httpx.Client(transport=SandboxTransport(self.cloud), base_url=BASE) as client:
            return client.request(method, path, **kw)


@pytest.fixture
def env(tmp_path, catalog, clock):
    return Env(tmp_path / "cloud.sqlite", catalog, clock, boot_seconds=5, terminate_seconds=3)
