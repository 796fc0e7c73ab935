"""Hyperstack (NexGen Cloud), Infrahub API v1.

Contract: the Infrahub OpenAPI document of Hyperstack's official Go SDK
(tests/fixtures/hyperstack/openapi.yaml, trimmed to the paths used; SOURCE.txt
says from where). Auth is an ``api_key`` header. Success bodies are
``{"status": true, "message", ...}``; errors ``{"status": false, "message",
"error_reason"}``.

What shapes this adapter:

* Offers: ``GET /core/flavors`` (per region) names the hardware and whether it
  is in stock; ``GET /core/stocks`` counts free machines per region, GPU model
  and size ("8x"). Neither carries a price: it comes from the catalog (the
  bundled file is SkyPilot's snapshot of Hyperstack's prices); a flavor the
  catalog does not price is offered at price 0, shown as unknown.
* A virtual machine lives in an *environment* (one region) and is reached with
  a key pair registered in that environment: both are created when missing
  (``gpucloud-<region>``, ``gpucloud-<key digest>``).
* Create sends ``count: 1`` (one machine per launch id) and carries the launch
  id, the batch and the deadline as labels ``key=value``; ``set_deadline``
  rewrites the labels (``PUT .../label``), and reading takes the latest
  deadline label. Hyperstack has no timer of its own: the reaper enforces it.
* Machine ids are integers (``vm_id`` in every path).
* No request limit is published: the driver slows down on 429s.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import Any

import httpx

from gpucloud.catalog.gpus import gpu_info, normalize_gpu
from gpucloud.errors import ConfigurationError, SpecError, option
from gpucloud.models import Instance, InstanceSpec, InstanceStatus, Offer
from gpucloud.providers import _batch_mark as batch_mark
from gpucloud.providers._fields import integer, is_int, is_number
from gpucloud.providers.base import Capabilities, Flow, OfferQuery, Provider, format_utc
from gpucloud.providers.account_objects import found_or_made, key_fields, key_name
from gpucloud.providers.hyperstack import _wire as wire
from gpucloud.transport.bearer_auth import HeaderKeyAuth

PAGE_SIZE = 100
MAX_PAGES = 1000  # a server that never ends its list must not keep us forever


class HyperstackProvider(Provider):
    name = "hyperstack"
    id_format = re.compile(r"[0-9]{1,18}")  # Instance_Fields.id is an integer
    capabilities = Capabilities(spot=False, stop_start=False, custom_disk=False,
                                needs_ssh_key=True, native_shutdown=False,
                                multi_node="batch")
    # rate_limits stays {}: Hyperstack publishes none, so the driver paces by
    # the 429s it gets.
    errors = wire.ERRORS
    error_fields = staticmethod(wire.error_fields)

    def auth(self) -> httpx.Auth | None:
        if self.credential is None:
            return None
        return HeaderKeyAuth(self.credential.secret, "api_key")

    # -- flows -----------------------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        if query.spot:
            return []  # this adapter launches on-demand machines only
        params = {"region": query.region} if query.region else None
        response = yield self.request("GET", "/core/flavors", params=params)
        groups = self._body(response, "data", list)
        response_stock = yield self.request("GET", "/core/stocks")
        stock = self._stock(response_stock)
        out: list[Offer] = []
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("flavors"), list):
                raise self.invalid(response, "a flavor group without a flavors list")
            for flavor in group["flavors"]:
                try:
                    offer = self._offer(flavor, stock, query)
                except (AttributeError, KeyError, TypeError, ValueError, ArithmeticError) as exc:
                    raise self.invalid(response, f"a flavor of the wrong shape: {exc}") from exc
                if offer is not None:
                    out.append(offer)
        return out

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        if spec.job is not None:
            raise SpecError("hyperstack cannot run a job's container yet",
                            hint="create a machine and run the container over SSH")
        if spec.disk_gb is not None:
            raise SpecError("hyperstack flavors have a fixed disk",
                            hint=f"drop {option('disk_gb', '--disk-gb')}")
        if not spec.ssh_key_name and not spec.ssh_public_key:
            raise ConfigurationError(
                "hyperstack needs an SSH key to launch",
                hint=f"pass {option('ssh_key', '--ssh-key', repr('NAME_OR_PATH'), 'NAME_OR_PATH')} "
                     "or create ~/.ssh/id_ed25519.pub")
        offer = spec.offer
        environment = yield from self._ensure_environment(offer.region)
        if spec.ssh_public_key:
            key_name = yield from self._ensure_key(environment, spec.ssh_key_name,
                                                   spec.ssh_public_key)
        else:
            key_name = str(spec.ssh_key_name)
        labels = [wire.label(wire.LAUNCH_ID, spec.launch_id)]
        if spec.batch:
            labels.append(wire.label(batch_mark.LABEL, spec.batch))
        if spec.shutdown_at is not None:
            labels.append(wire.label(wire.SHUTDOWN_AT, format_utc(spec.shutdown_at)))
        body: dict[str, Any] = {
            "name": spec.name[:wire.NAME_MAX],
            "environment_name": environment,
            "flavor_name": offer.instance_type,
            "key_name": key_name,
            "count": 1,  # one machine per launch id: reconcile finds it by that id
            "labels": labels,
            "assign_floating_ip": True,  # a public address to reach it over SSH
            # The Instance schema has no port field: with randomization the SSH
            # port could not be known, so it stays 22.
            "enable_port_randomization": False,
        }
        if spec.image:
            body["image_name"] = spec.image
        response = yield self.request("POST", "/core/virtual-machines", json=body, kind="launch")
        created = self._body(response, "instances", list)
        if len(created) != 1 or not isinstance(created[0], dict):
            raise self.invalid(response, f"{len(created)} instances for count 1")
        instance = self._instance(response, created[0])
        return (yield from self.read_back(instance))

    def list_instances(self) -> Flow[list[Instance]]:
        found: dict[str, Instance] = {}  # one machine per id, whatever a page repeated
        for page in range(1, MAX_PAGES + 1):
            response = yield self.request("GET", "/core/virtual-machines",
                                          params={"page": page, "pageSize": PAGE_SIZE})
            body = self._envelope(response)
            items = body.get("instances")
            if not isinstance(items, list):
                raise self.invalid(response, "no 'instances' list in the body")
            for raw in items:
                machine = self._instance(response, raw)
                found[machine.id] = machine
            total = body.get("count")
            if not items:
                break
            # The total decides where there is one: a server that caps the page
            # below the size asked for sends short pages that are not the last.
            if isinstance(total, int) and not isinstance(total, bool):
                if len(found) >= total:
                    break
            elif len(items) < PAGE_SIZE:
                break
        return list(found.values())

    def get(self, instance_id: str) -> Flow[Instance]:
        response = yield self.request("GET", self._path(instance_id))
        return self._instance(response, self._body(response, "instance", dict))

    def delete(self, instance_id: str) -> Flow[None]:
        # A 404 on a repeat is NotFoundError, which delete and the reaper read
        # as "already gone".
        response = yield self.request("DELETE", self._path(instance_id), kind="idempotent")
        self.raise_for_error(response)

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        """Rewrite the labels with the new deadline, keeping every other label
        (read back first: the Instance model does not carry them)."""
        response = yield self.request("GET", self._path(instance.id))
        current = self._body(response, "instance", dict).get("labels")
        kept = [x for x in current if isinstance(x, str)
                and not x.startswith(wire.SHUTDOWN_AT + "=")] if isinstance(current, list) else []
        labels = [*kept, wire.label(wire.SHUTDOWN_AT, format_utc(shutdown_at))]
        response = yield self.request("PUT", self._path(instance.id) + "/label",
                                      json={"labels": labels}, kind="idempotent")
        self._envelope(response)
        return (yield from self.get(instance.id))

    def verify(self) -> Flow[None]:
        response = yield self.request("GET", "/core/keypairs", params={"page": 1, "pageSize": 1})
        self._envelope(response)

    # -- helpers -------------------------------------------------------------------

    def _path(self, instance_id: str) -> str:
        if not re.fullmatch(r"[0-9]{1,18}", str(instance_id)):
            raise SpecError(f"hyperstack machine ids are numbers, not {str(instance_id)[:40]!r}",
                            hint="`gpucloud list --provider hyperstack` shows them")
        return f"/core/virtual-machines/{instance_id}"

    def _envelope(self, response: httpx.Response) -> dict[str, Any]:
        self.raise_for_error(response)
        body = self.json(response)
        if not isinstance(body, dict):
            raise self.invalid(response, "the body is not a JSON object")
        if body.get("status") is False:  # an error told with a 2xx
            raise self.map_error(response)
        return body

    def _body(self, response: httpx.Response, key: str, expected: type) -> Any:
        body = self._envelope(response)
        if not isinstance(body.get(key), expected):
            raise self.invalid(response, f"no {key!r} {expected.__name__} in the body")
        return body[key]

    def _stock(self, response: httpx.Response) -> dict[tuple[str, str, int], int]:
        """(region, GPU model, GPUs per machine) -> machines free now."""
        out: dict[tuple[str, str, int], int] = {}
        for region in self._body(response, "stocks", list):
            models = region.get("models") if isinstance(region, dict) else None
            if not isinstance(models, list) or not wire.text(region.get("region")):
                raise self.invalid(response, "a stock entry without region or models")
            for model in models:
                configs = model.get("configurations") if isinstance(model, dict) else None
                if not isinstance(configs, dict) or not wire.text(model.get("model")):
                    continue
                for size, free in configs.items():
                    match = re.fullmatch(r"(\d+)x", str(size))
                    if match and is_int(free):
                        out[(region["region"], wire.gpu_name(model["model"]),
                             int(match.group(1)))] = free
        return out

    def _offer(self, flavor: Any, stock: dict[tuple[str, str, int], int],
               query: OfferQuery) -> Offer | None:
        count = flavor.get("gpu_count")
        if not is_int(count) or count < 1 or not wire.text(flavor.get("gpu")):
            return None  # CPU-only flavors
        name, region = wire.text(flavor["name"]), wire.text(flavor["region_name"])
        if not name or not region:
            raise ValueError("a flavor without name or region_name")
        raw_gpu = wire.gpu_name(flavor["gpu"])
        gpu = normalize_gpu(raw_gpu)
        if query.gpu not in (None, gpu) or query.count not in (None, count) \
                or query.region not in (None, region):
            return None
        free = stock.get((region, raw_gpu, count))
        in_stock = flavor.get("stock_available")
        available = free > 0 if free is not None else (
            in_stock if isinstance(in_stock, bool) else None)
        prices = [t.price for t in self.catalog.types_named(name)
                  if t.price is not None and region in t.regions]
        info = gpu_info(gpu)
        ram = flavor.get("ram")
        return Offer(
            provider=self.name, instance_type=name, region=region, gpu=gpu, gpu_count=count,
            gpu_memory_gb=info.memory_gb if info else None,
            vcpus=integer(flavor["cpu"]) if is_int(flavor.get("cpu")) else None,
            memory_gb=int(ram) if is_number(ram) else None,
            disk_gb=flavor["disk"] if is_int(flavor.get("disk")) else None,
            # The API has no price: the catalog's, else 0 (shown as unknown).
            price_per_hour=prices[0] if prices else Decimal(0),
            spot=False, available=available, source="live")

    def _ensure_environment(self, region: str) -> Flow[str]:
        """The environment gpucloud launches into in `region`, created when missing."""
        name = f"gpucloud-{region}"[:wire.NAME_MAX]

        def find() -> Flow[str | None]:
            response = yield self.request("GET", "/core/environments",
                                          params={"search": name, "pageSize": "100"})
            for env in self._body(response, "environments", list):
                if isinstance(env, dict) and env.get("name") == name:
                    if env.get("region") != region:
                        raise ConfigurationError(
                            f"the hyperstack environment {name!r} is in region "
                            f"{env.get('region')!r}, not {region!r}",
                            hint="rename or delete that environment in Hyperstack's console")
                    return name
            return None

        def make() -> Flow[str]:
            response = yield self.request("POST", "/core/environments",
                                          json={"name": name, "region": region}, kind="unsafe")
            created = self._body(response, "environment", dict)
            return wire.text(created.get("name")) or name
        return (yield from found_or_made(find, make))

    def _ensure_key(self, environment: str, name: str | None, public_key: str) -> Flow[str]:
        """The name of a key pair with this public key in `environment`, imported
        when missing."""
        wanted = key_fields(public_key)
        if not wanted:
            raise ConfigurationError("the SSH public key is empty")
        if name is None:
            name = key_name(wanted)
        label = name[:wire.NAME_MAX]

        def find() -> Flow[str | None]:
            response = yield self.request("GET", "/core/keypairs",
                                          params={"search": label, "pageSize": "100"})
            for key in self._body(response, "keypairs", list):
                if not isinstance(key, dict) or key.get("name") != label:
                    continue
                env: dict[str, Any] = key["environment"] if isinstance(
                    key.get("environment"), dict) else {}
                if env.get("name") != environment:
                    continue
                if key_fields(key.get("public_key")) != wanted:
                    raise ConfigurationError(
                        f"a key pair named {label!r} with a different public key is already "
                        f"in the hyperstack environment {environment!r}",
                        hint="pass the key by its registered name, or choose another name")
                return label
            return None

        def make() -> Flow[str]:
            response = yield self.request("POST", "/core/keypairs", kind="unsafe", json={
                "name": label, "environment_name": environment,
                "public_key": public_key.strip()})
            created = self._body(response, "keypair", dict)
            return wire.text(created.get("name")) or label
        return (yield from found_or_made(find, make))

    def _instance(self, response: httpx.Response, raw: Any) -> Instance:
        if not isinstance(raw, dict) or not is_int(raw.get("id")):
            raise self.invalid(response, "a virtual machine without an integer id")
        labels = raw.get("labels") if raw.get("labels") is not None else []
        if not isinstance(labels, list):
            raise self.invalid(response, f"machine {raw['id']}: labels are not a list")
        ours = wire.labels_of(labels)
        flavor: dict[str, Any] = raw["flavor"] if isinstance(raw.get("flavor"), dict) else {}
        env: dict[str, Any] = raw["environment"] if isinstance(
            raw.get("environment"), dict) else {}
        status = wire.text(raw.get("status"))
        gpu = wire.text(flavor.get("gpu"))
        itype, region = wire.text(flavor.get("name")), wire.text(env.get("region"))
        rows = [t for t in self.catalog.types_named(itype or "")
                if t.price is not None and region in t.regions]
        try:
            return Instance(
                provider=self.name, id=str(raw["id"]), name=wire.text(raw.get("name")),
                status=wire.STATUS.get(status or "", InstanceStatus.UNKNOWN),
                provider_status=status,
                gpu=normalize_gpu(wire.gpu_name(gpu)) if gpu else None,
                gpu_count=flavor.get("gpu_count") if is_int(flavor.get("gpu_count")) else None,
                instance_type=itype, region=region,
                price_per_hour=rows[0].price if rows else None,
                ip=wire.text(raw.get("floating_ip")),
                # The spec's Instance.fixed_ip: the address on the environment's own
                # network (floating_ip is the public one).
                private_ip=wire.text(raw.get("fixed_ip")),
                batch=next(iter(ours.get(batch_mark.LABEL, [])), None),
                created_at=wire.created_at(raw.get("created_at")),
                launch_id=next(iter(ours.get(wire.LAUNCH_ID, [])), None),
                shutdown_at=wire.deadline_of(ours),
                connection=wire.connection_of(raw))
        except ValueError as exc:  # pydantic's ValidationError included
            raise self.invalid(response, f"machine {raw['id']}: {exc}") from exc


__all__ = ["HyperstackProvider"]
