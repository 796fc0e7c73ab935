"""Fluidstack, Atlas Infrastructure API v1alpha1.

Contract: the Atlas OpenAPI document (tests/fixtures/fluidstack/openapi.yaml,
as published in NVIDIA Brev's brevdev/compute; SOURCE.txt says which commit).
``Authorization: Bearer <token>``; every instance call also names the project
(header ``X-PROJECT-ID``). Each region has its own host,
``https://<region>.atlas.fluidstack.io/api/v1alpha1``: the project and the
region come from config (_settings.py), the token from the credential store.

What shapes this adapter:

* Offers: ``GET /instance-types`` (name, CPUs, memory, GPU model and count) in
  the configured region, with ``GET /capacity`` saying how many of each type
  can be had now. Neither carries a price, and no public price list could be
  sourced: a type is offered at the catalog's price where the user's catalog
  file gives one, else at 0, which gpucloud shows as unknown (spend caps
  refuse it).
* Create: ``POST /instances`` with the launch id and deadline as tags. The
  request has no SSH key field: the key goes in as cloud-init ``userData``.
* The spec has no call that changes an instance's tags: the deadline is set
  at create and cannot move (``extend`` refuses); no native timer either, so
  the reaper enforces it.
* No request limit is published: the driver slows down on 429s.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import httpx

from gpucloud.catalog.gpus import gpu_info, normalize_gpu
from gpucloud.errors import APIStatusError, SpecError, option
from gpucloud.models import Instance, InstanceSpec, InstanceStatus, Offer
from gpucloud.providers import _batch_mark as batch_mark
from gpucloud.providers._fields import is_int
from gpucloud.providers.base import (
    Capabilities, Flow, OfferQuery, Provider, RequestKind, format_utc, parse_utc,
)
from gpucloud.providers.fluidstack import _settings
from gpucloud.providers.fluidstack import _wire as wire

UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class FluidstackProvider(Provider):
    name = "fluidstack"
    id_format = UUID  # Instance.id: format uuid
    capabilities = Capabilities(spot=False, stop_start=False, custom_disk=False,
                                needs_ssh_key=False, native_shutdown=False)
    # rate_limits stays {}: Fluidstack publishes none, so the driver paces by
    # the 429s it gets.
    errors = wire.ERRORS
    error_fields = staticmethod(wire.error_fields)

    _settings_cache: _settings.Settings | None = None

    @property
    def settings(self) -> _settings.Settings:
        if self._settings_cache is None:
            self._settings_cache = _settings.load()
        return self._settings_cache

    @property
    def base_url(self) -> str:
        base = self.catalog.api_base.rstrip("/")
        if "{region}" not in base:  # a catalog file that names its host outright
            return base
        region = self.settings.region
        if region is None:
            raise _settings.missing("region", _settings.REGION_ENV, "region")
        return base.replace("{region}", region)

    def hint_fields(self) -> dict[str, str]:
        return {"project": self.settings.project_id or "(none)"}

    def project_request(self, method: str, path: str, *, json: Any = None,
                        kind: RequestKind | None = None) -> httpx.Request:
        """A request in the configured project (X-PROJECT-ID), as the spec's
        instance and capacity calls require."""
        project = self.settings.project_id
        if project is None:
            raise _settings.missing("project id", _settings.PROJECT_ENV, "project_id")
        request = self.request(method, path, json=json, kind=kind)
        request.headers["X-PROJECT-ID"] = project
        return request

    # -- flows -----------------------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        if query.spot:
            return []  # preemptible instances are not offered through gpucloud yet
        region = self.settings.region or "default"
        if query.region not in (None, region):
            return []  # one region per configured API host
        response = yield self.request("GET", "/instance-types")
        types = self._body(response, list)
        capacity = yield from self._capacity()
        out: list[Offer] = []
        for item in types:
            try:
                offer = self._offer(item, region, capacity, query)
            except (AttributeError, KeyError, TypeError, ValueError, ArithmeticError) as exc:
                raise self.invalid(response, f"an instance type of the wrong shape: {exc}") \
                    from exc
            if offer is not None:
                out.append(offer)
        return out

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        if spec.job is not None:
            raise SpecError("fluidstack cannot run a job's container yet",
                            hint="create a machine and run the container over SSH")
        if spec.disk_gb is not None:
            raise SpecError("fluidstack instance types have a fixed disk",
                            hint=f"drop {option('disk_gb', '--disk-gb')}")
        tags = {wire.LAUNCH_ID: spec.launch_id}
        if spec.batch:
            tags[batch_mark.LABEL] = spec.batch
        if spec.shutdown_at is not None:
            tags[wire.SHUTDOWN_AT] = format_utc(spec.shutdown_at)
        body: dict[str, Any] = {"name": spec.name, "type": spec.offer.instance_type,
                                "tags": tags}
        if spec.image:
            body["image"] = spec.image  # without it the spec's default, image://ubuntu22.04
        if spec.ssh_public_key:
            body["userData"] = wire.user_data(spec.ssh_public_key)
        response = yield self.project_request("POST", "/instances", json=body, kind="launch")
        instance = self._instance(response, self._body(response, dict))
        return (yield from self.read_back(instance))

    def list_instances(self) -> Flow[list[Instance]]:
        response = yield self.project_request("GET", "/instances")
        return [self._instance(response, raw) for raw in self._body(response, list)]

    def get(self, instance_id: str) -> Flow[Instance]:
        response = yield self.project_request("GET", self._path(instance_id))
        return self._instance(response, self._body(response, dict))

    def delete(self, instance_id: str) -> Flow[None]:
        # 204; a 404 on a repeat is NotFoundError, read as "already gone".
        response = yield self.project_request("DELETE", self._path(instance_id),
                                              kind="idempotent")
        self.raise_for_error(response)

    def verify(self) -> Flow[None]:
        """The token and the project together: list the project's instances."""
        yield from self.list_instances()

    # -- helpers -------------------------------------------------------------------

    def _path(self, instance_id: str) -> str:
        return f"/instances/{quote(str(instance_id), safe='')}"

    def _body(self, response: httpx.Response, expected: type) -> Any:
        self.raise_for_error(response)
        body = self.json(response)
        if not isinstance(body, expected):
            raise self.invalid(response, f"the body is not a JSON {expected.__name__}")
        return body

    def _capacity(self) -> Flow[dict[str, int] | None]:
        """Instances of each type that can be had now; None when the API will not
        say (its 501 "Not implemented", or no project configured)."""
        if self.settings.project_id is None:
            return None
        response = yield self.project_request("GET", "/capacity")
        if response.status_code in (404, 501):
            return None
        try:
            self.raise_for_error(response)
        except APIStatusError as exc:
            if exc.status_code >= 500:
                return None  # availability unknown; the types themselves were listed
            raise
        out: dict[str, int] = {}
        for item in self._body(response, list):
            if isinstance(item, dict) and wire.text(item.get("name")) \
                    and is_int(item.get("capacity")):
                out[item["name"]] = item["capacity"]
        return out

    def _offer(self, item: Any, region: str, capacity: dict[str, int] | None,
               query: OfferQuery) -> Offer | None:
        count = item.get("gpuCount")
        model = wire.text(item.get("gpuModel"))
        if not is_int(count) or count < 1 or model is None:
            return None  # CPU-only types
        name = wire.text(item["name"])
        if name is None:
            raise ValueError("a type without a name")
        gpu = normalize_gpu(wire.gpu_model(model))
        if query.gpu not in (None, gpu) or query.count not in (None, count):
            return None
        prices = [t.price for t in self.catalog.types_named(name)
                  if t.price is not None and (not t.regions or region in t.regions)]
        info = gpu_info(gpu)
        return Offer(
            provider=self.name, instance_type=name, region=region, gpu=gpu, gpu_count=count,
            gpu_memory_gb=info.memory_gb if info else None,
            vcpus=item["cpu"] if is_int(item.get("cpu")) else None,
            memory_gb=wire.memory_gb(item.get("memory")),
            # No price in the API: the catalog's, else 0 (shown as unknown).
            price_per_hour=prices[0] if prices else Decimal(0), spot=False,
            available=None if capacity is None else capacity.get(name, 0) > 0, source="live")

    def _instance(self, response: httpx.Response, raw: Any) -> Instance:
        if not isinstance(raw, dict) or not wire.text(raw.get("id")):
            raise self.invalid(response, "an instance without an id")
        tags = raw.get("tags") if raw.get("tags") is not None else {}
        if not isinstance(tags, dict):
            raise self.invalid(response, f"instance {raw['id']!r}: tags are not an object")
        state = wire.text(raw.get("state"))
        itype = wire.text(raw.get("type"))
        region = self.settings.region
        prices = [t.price for t in self.catalog.types_named(itype or "")
                  if t.price is not None and (not t.regions or region in t.regions)]
        rows = self.catalog.types_named(itype or "")
        try:
            return Instance(
                provider=self.name, id=raw["id"], name=wire.text(raw.get("name")),
                status=wire.STATUS.get(state or "", InstanceStatus.UNKNOWN),
                provider_status=state, instance_type=itype, region=region,
                gpu=rows[0].gpu if rows else None,
                gpu_count=rows[0].gpu_count if rows else None,
                price_per_hour=prices[0] if prices else None,
                ip=wire.text(raw.get("ip")), launch_id=wire.text(tags.get(wire.LAUNCH_ID)),
                shutdown_at=parse_utc(tags.get(wire.SHUTDOWN_AT)),
                connection=wire.connection_of(raw))
        except ValueError as exc:  # pydantic's ValidationError included
            raise self.invalid(response, f"instance {raw['id']!r}: {exc}") from exc


__all__ = ["FluidstackProvider"]
