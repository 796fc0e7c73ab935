"""The sandbox adapter: translates between gpucloud's models and the simulated cloud.

It is written like any other adapter (sans-I/O flows, an error table in _wire.py); the
only difference is ``transport()``, which serves the requests in-process from
the SQLite-backed SandboxCloud instead of the network. No account is needed.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from gpucloud.catalog.gpus import normalize_gpu
from gpucloud.models import (
    Connection, ExecResult, Instance, InstanceSpec, InstanceStatus, Job, JobStatus, Offer,
)
from gpucloud.transport.ratelimit import RateLimit
from gpucloud.transport.redaction import SECRETS_EXTENSION
from gpucloud.providers import _batch_mark as batch_mark
from gpucloud.providers.sandbox import _wire as wire, volumes
from gpucloud.providers.base import Capabilities, Flow, OfferQuery, Provider
from gpucloud.providers.sandbox.knobs import Knobs
from gpucloud.providers.sandbox.server import SandboxCloud, SandboxTransport
from gpucloud.providers.sandbox.volume_sim import PRICE_PER_GB_MONTH

if TYPE_CHECKING:
    from gpucloud.catalog.bundled import ProviderCatalog
    from gpucloud.config.credentials import Credential
    from gpucloud.models import Volume, VolumeSpec

LAUNCH_LABEL = "gpucloud-launch-id"
# Machines per page of a listing: enough that a page's request costs little
# beside its machines, few enough that a page is a small part of a big listing.
PAGE = 500


@functools.cache
def _api_connection() -> Connection:
    """How every running sandbox machine is reached (the cloud's exec API, no
    SSH): one frozen Connection shared by all, not one validated per machine.
    Made on first use: a command that lists nothing never builds its validator."""
    return Connection(method="api")


class SandboxProvider(Provider):
    """The simulated cloud. ``db_path``/``knobs``/``cloud`` override the defaults (tests)."""

    name = "sandbox"
    # "sbx-" and 12 hex digits (server.py makes them).
    id_format = re.compile(r"sbx-[0-9a-f]{12}")
    capabilities = Capabilities(jobs=True, spot=False, stop_start=True, custom_disk=True,
                                needs_ssh_key=False, native_shutdown=True, volumes=True,
                                # the simulated cloud places a job's nodes itself
                                multi_node="native", multi_node_retries=True)
    errors = wire.ERRORS
    error_fields = staticmethod(wire.error_fields)

    def volume_rate(self, size_gb: int) -> Decimal | None:
        return PRICE_PER_GB_MONTH  # simulated (volume_sim.py)

    def __init__(self, catalog: ProviderCatalog, credential: Credential | None = None,
                 db_path: str | os.PathLike[str] | None = None,
                 knobs: Knobs | Mapping[str, Any] | None = None,
                 *, cloud: SandboxCloud | None = None) -> None:
        super().__init__(catalog, credential)
        self._db_path = db_path
        self._knobs = knobs
        self._cloud = cloud

    # -- plumbing ---------------------------------------------------------------

    @property
    def cloud(self) -> SandboxCloud:
        """The simulated cloud, opened on first use (one per provider object)."""
        if self._cloud is None:
            from gpucloud.config import settings as config

            db_path = self._db_path if self._db_path is not None else config.sandbox_db_path()
            knobs = self._knobs if self._knobs is not None else config.load_config().sandbox
            self._cloud = SandboxCloud(db_path, knobs, catalog=self.catalog)
        return self._cloud

    @property  # type: ignore[misc]  # a knob of this cloud, not of the class
    def deadline_precision(self) -> timedelta:  # type: ignore[override]
        """What the simulated cloud keeps of a deadline: the microsecond, or the
        whole second under its WHOLE_SECONDS knob (server.py)."""
        return timedelta(seconds=1) if self.cloud.knobs.whole_seconds else timedelta(
            microseconds=1)

    def auth(self) -> httpx.Auth | None:
        return None  # nothing to sign: the sandbox needs no account

    def limits(self) -> Mapping[str, RateLimit]:
        """The cloud's RATE_LIMIT knob as its limit, in bursts of a tenth of the
        second's worth the cloud lets through (at least 1): a client held up a
        moment (a garbage collection, a busy CPU) makes up the slots it missed;
        the rest absorbs a request sent late, then one close behind it."""
        rate = self.cloud.knobs.rate_limit
        return {"*": RateLimit(rate, burst=max(1, int(rate / 10)))} if rate > 0 else {}

    def rate_scope(self) -> tuple[str, str, str]:
        # The simulated "account" is the database: two sandboxes, two budgets.
        return (self.name, str(self.cloud.db_path), "")

    def transport(self) -> httpx.BaseTransport:
        return SandboxTransport(self.cloud)

    def async_transport(self) -> httpx.AsyncBaseTransport:
        return SandboxTransport(self.cloud)

    # -- flows ----------------------------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        if query.spot:
            return []  # the sandbox sells on-demand only
        response = yield self.request("GET", "/v1/instance-types")
        self.raise_for_error(response)
        out = []
        try:
            for t in self._data(response):
                gpu, count = normalize_gpu(str(t["gpu"])), int(t["gpu_count"])
                if (query.gpu is not None and gpu != query.gpu) or (
                        query.count is not None and count != query.count):
                    continue
                capacity = t.get("capacity_available") or {}
                for region in t["regions"]:
                    if query.region is not None and region != query.region:
                        continue
                    out.append(Offer(
                        provider=self.name, instance_type=str(t["name"]), region=region,
                        gpu=gpu, gpu_count=count, gpu_memory_gb=t.get("gpu_memory_gb"),
                        vcpus=t.get("vcpus"), memory_gb=t.get("memory_gb"),
                        disk_gb=t.get("disk_gb"), price_per_hour=Decimal(str(t["price"])),
                        available=int(capacity.get(region, 0)) > 0, source="live",
                        simulated=True,
                    ))
        except (KeyError, TypeError, ValueError, InvalidOperation) as exc:
            raise self.invalid(response, f"bad instance type: {exc!r}") from exc
        return sorted(out, key=lambda o: (o.price_per_hour, o.instance_type, o.region))

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        if spec.job is not None:  # a job's machine is made by the job
            job = yield from self.submit_job(spec)
            assert job.instance is not None
            return job.instance
        response = yield self.request("POST", "/v1/instances", json=self._machine(spec),
                                      kind="launch")
        self.raise_for_error(response)
        return self._instance(response, self.json(response))

    def _machine(self, spec: InstanceSpec) -> dict[str, Any]:
        body: dict[str, Any] = {
            "instance_type": spec.offer.instance_type,
            "region": spec.offer.region,
            "name": spec.name,
            "labels": {LAUNCH_LABEL: spec.launch_id,
                       **({batch_mark.LABEL: spec.batch} if spec.batch else {})},
            "image": spec.image or self.catalog.default_image,
        }
        if spec.disk_gb is not None:
            body["disk_gb"] = spec.disk_gb
        if spec.ssh_public_key is not None:
            body["ssh_public_key"] = spec.ssh_public_key
        if spec.shutdown_at is not None:
            body["shutdown_at"] = _iso(spec.shutdown_at)
        return body

    # -- jobs: the simulated cloud runs them itself (job_sim.py) -----------------------

    def submit_job(self, spec: InstanceSpec) -> Flow[Job]:
        run = spec.job
        if run is None:
            raise ValueError("submit_job needs spec.job")
        body = self._machine(spec)
        body.update({
            "image": run.image, "command": list(run.command), "args": list(run.args),
            "env": dict(run.env), "retries": run.retries,
            "secret_env": {k: v.get_secret_value() for k, v in run.secret_env.items()},
        })
        for key in ("max_runtime_seconds", "checkpoint_dir", "checkpoint_url"):
            if getattr(run, key) is not None:
                body[key] = getattr(run, key)
        if run.nodes > 1:
            body.update(nodes=run.nodes, interconnect=run.interconnect)
        if run.volumes:
            body["volumes"] = [{"id": v.volume_id, "mount": v.mount} for v in run.volumes]
        request = self.request("POST", "/v1/jobs", json=body, kind="launch")
        request.extensions[SECRETS_EXTENSION] = tuple(
            v.get_secret_value() for v in run.secret_env.values())
        response = yield request
        self.raise_for_error(response)
        return self._job(response, self.json(response))

    def list_jobs(self) -> Flow[list[Job]]:
        response = yield self.request("GET", "/v1/jobs")
        self.raise_for_error(response)
        return [self._job(response, item) for item in self._data(response)]

    def get_job(self, job_id: str) -> Flow[Job]:
        response = yield self.request("GET", f"/v1/jobs/{quote(job_id, safe='')}")
        self.raise_for_error(response)
        return self._job(response, self.json(response))

    def cancel_job(self, job_id: str) -> Flow[None]:
        response = yield self.request("DELETE", f"/v1/jobs/{quote(job_id, safe='')}",
                                      kind="idempotent")
        self.raise_for_error(response)

    def job_logs(self, job_id: str, tail: int | None = None) -> Flow[str]:
        response = yield self.request("GET", f"/v1/jobs/{quote(job_id, safe='')}/logs",
                                      params={"tail": str(tail)} if tail else None)
        self.raise_for_error(response)
        body = self.json(response)
        lines = body.get("lines") if isinstance(body, dict) else None
        if not isinstance(lines, list):
            raise self.invalid(response, 'expected {"lines": [...]}')
        return "".join(f"{line}\n" for line in lines)

    def list_instances(self) -> Flow[list[Instance]]:
        out: list[Instance] = []
        cursor: str | None = None
        while True:
            page, cursor = yield from self.list_page(cursor)
            out.extend(page)
            if cursor is None:
                return out

    def list_page(self, cursor: str | None = None) -> Flow[tuple[list[Instance], str | None]]:
        params = {"limit": str(PAGE)} if cursor is None else {"limit": str(PAGE),
                                                                "cursor": cursor}
        response = yield self.request("GET", "/v1/instances", params=params)
        self.raise_for_error(response)
        body = self.json(response)
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise self.invalid(response, 'expected {"data": [...], "next_cursor": ...}')
        following = body.get("next_cursor")
        if following is not None and (not isinstance(following, str) or following == cursor):
            raise self.invalid(response, "next_cursor does not advance")
        return [self._instance(response, item) for item in body["data"]], following

    def get(self, instance_id: str) -> Flow[Instance]:
        response = yield self.request("GET", f"/v1/instances/{quote(instance_id, safe='')}")
        self.raise_for_error(response)
        return self._instance(response, self.json(response))

    def delete(self, instance_id: str) -> Flow[None]:
        response = yield self.request("DELETE", f"/v1/instances/{quote(instance_id, safe='')}",
                                      kind="idempotent")
        self.raise_for_error(response)

    def stop(self, instance_id: str) -> Flow[Instance]:
        """Power off, keeping the disk; the simulation bills nothing while stopped."""
        return (yield from self._power(instance_id, "stop"))

    def start(self, instance_id: str) -> Flow[Instance]:
        return (yield from self._power(instance_id, "start"))

    def _power(self, instance_id: str, action: str) -> Flow[Instance]:
        response = yield self.request(
            "POST", f"/v1/instances/{quote(instance_id, safe='')}/{action}", kind="idempotent")
        self.raise_for_error(response)
        return self._instance(response, self.json(response))

    def set_shutdown(self, instance_id: str, shutdown_at: datetime | None) -> Flow[Instance]:
        """Move (or clear) the cloud's own shutdown timer; what ``extend`` needs."""
        response = yield self.request(
            "PATCH", f"/v1/instances/{quote(instance_id, safe='')}",
            json={"shutdown_at": _iso(shutdown_at) if shutdown_at is not None else None},
            kind="idempotent")
        self.raise_for_error(response)
        return self._instance(response, self.json(response))

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        return (yield from self.set_shutdown(instance.id, shutdown_at))

    # -- volumes: requests and translation in volumes.py (volume_sim.py serves them) --------

    def list_volumes(self) -> Flow[list[Volume]]:
        return (yield from volumes.list_volumes(self))

    def create_volume(self, spec: VolumeSpec) -> Flow[Volume]:
        return (yield from volumes.create_volume(self, spec))

    def delete_volume(self, volume_id: str) -> Flow[None]:
        yield from volumes.delete_volume(self, volume_id)

    # -- exec: the simulated machine answers commands (exec_sim.py) ----------------------

    def exec_command(self, instance_id: str, command: str, timeout: float) -> ExecResult:
        """Blocking, like every exec API; never retried (a command may not be
        safe to run twice)."""
        with httpx.Client(transport=self.transport(),
                          timeout=httpx.Timeout(timeout + 30, connect=10)) as http:
            flow = self._exec(instance_id, command, timeout)
            request = next(flow)
            try:
                flow.send(http.send(request))
            except StopIteration as done:
                result: ExecResult = done.value
                return result
        raise RuntimeError("the exec flow sent a second request")  # pragma: no cover

    def _exec(self, instance_id: str, command: str, timeout: float) -> Flow[ExecResult]:
        response = yield self.request(
            "POST", f"/v1/instances/{quote(instance_id, safe='')}/exec",
            json={"command": command, "timeout": timeout}, kind="unsafe")
        self.raise_for_error(response)
        body = self.json(response)
        try:
            return ExecResult(command=command, exit_code=int(body["exit_code"]),
                              stdout=str(body["stdout"]), stderr=str(body["stderr"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise self.invalid(response, f"bad exec result: {exc!r}") from exc

    # -- translation -------------------------------------------------------------------

    def _data(self, response: httpx.Response) -> list[Any]:
        body = self.json(response)
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise self.invalid(response, 'expected {"data": [...]}')
        return body["data"]

    def _instance(self, response: httpx.Response, item: Any) -> Instance:
        try:
            raw_status = str(item["status"])
            status = _STATUSES.get(raw_status, InstanceStatus.UNKNOWN)
            labels = item.get("labels") or {}
            price = item.get("price_per_hour")
            return Instance(
                provider=self.name, id=str(item["id"]), name=item.get("name"),
                status=status, provider_status=raw_status,
                gpu=_gpu(item["gpu"]) if item.get("gpu") else None,
                gpu_count=item.get("gpu_count"), instance_type=item.get("instance_type"),
                region=item.get("region"),
                price_per_hour=_price(str(price)) if price is not None else None,
                ip=item.get("ip"), private_ip=item.get("private_ip"),
                created_at=_parse(item.get("created_at")),
                shutdown_at=_parse(item.get("shutdown_at")),
                launch_id=labels.get(LAUNCH_LABEL), simulated=True,
                # commands go through the simulated cloud's exec API, no SSH
                connection=_api_connection() if status is InstanceStatus.RUNNING else None,
            )
        except (KeyError, TypeError, ValueError, InvalidOperation, AttributeError) as exc:
            raise self.invalid(response, f"bad instance: {exc!r}") from exc


    def _job(self, response: httpx.Response, item: Any) -> Job:
        try:
            raw = str(item["status"])
            try:
                status = JobStatus(raw)
            except ValueError:
                status = JobStatus.UNKNOWN
            labels = item.get("labels") or {}
            code = item.get("exit_code")
            return Job(
                provider=self.name, id=str(item["id"]), name=item.get("name"), status=status,
                provider_status=raw, launch_id=labels.get(LAUNCH_LABEL),
                instance=self._instance(response, item["instance"]),
                nodes=int(item.get("nodes") or 1),
                instances=tuple(self._instance(response, node)
                                for node in item.get("instances") or ()),
                created_at=_parse(item.get("created_at")),
                started_at=_parse(item.get("started_at")),
                finished_at=_parse(item.get("finished_at")),
                shutdown_at=_parse(item.get("shutdown_at")),
                exit_code=int(code) if code is not None else None,
                message=item.get("message"), simulated=True)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self.invalid(response, f"bad job: {exc!r}") from exc


_STATUSES = {s.value: s for s in InstanceStatus}  # the enum's own lookup, without its call
# A listing's machines repeat a few GPU names and prices: each is worked out
# once (a Decimal is immutable, so one object serves them all).
_gpu = functools.lru_cache(maxsize=256)(normalize_gpu)
_price = functools.lru_cache(maxsize=256)(Decimal)


def _iso(when: datetime) -> str:
    if when.tzinfo is None:  # the models promise aware UTC; be lenient with naive input
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _parse(value: Any) -> datetime | None:
    if value is None:
        return None
    when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    # The cloud answers in UTC: converting what already is costs a listing
    # a new datetime per machine for nothing.
    return when if when.tzinfo is timezone.utc else when.astimezone(timezone.utc)
