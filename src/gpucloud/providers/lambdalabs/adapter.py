"""Lambda Cloud (cloud.lambda.ai), API v1.

Contract: Lambda's OpenAPI 1.8.3 (tests/fixtures/lambda/openapi.json is the
trimmed copy every test request is validated against). Success bodies are
``{"data": ...}``; errors are ``{"error": {"code", "message", "suggestion"?}}``
and Lambda asks clients to branch on ``code`` only.

What shapes this adapter:

* Lambda sells on-demand VMs only: no spot, no stop/start, fixed disk.
* A launch needs a registered SSH key, referred to by name.
* Without an image the launch leaves the field out and Lambda uses its default
  (the bundled catalog sets no default_image); an image is an id (a UUID) or a
  family name, the two forms of the spec's ``image`` oneOf.
* There is no idempotency key, so the launch id and the deadline travel as
  instance tags, where ``list_instances`` reads them back for reconcile and
  ``gpucloud reap`` (any machine with the key can see them). Tags cannot be
  changed after launch, so ``extend`` renames the machine with a deadline
  marker (see _name_marker.py); reads take the later of tag and marker.
* A job (spec.job) runs from ``user_data`` (cloud-init): the container with
  all GPUs under max_runtime, then power-off (_jobscript.py). The 1.8.3
  contract has no status for a powered-off machine, so a job reads "running"
  or "unknown" until the reaper terminates it at its deadline.
* Volumes are Lambda's filesystems (filesystems.py): shared NFS storage of
  one region, mounted by every machine launched with it (a multi-node job's
  nodes included).
* Limits: 1 request/s overall, 1 launch per 12 s (the spec's info text).
"""

from __future__ import annotations

import re

import logging
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import httpx

from gpucloud.errors import (
    ConfigurationError, SpecError, option,
)
from gpucloud.catalog.gpus import gpu_info, normalize_gpu
from gpucloud.models import (
    Instance, InstanceSpec, InstanceStatus, JobRun, Offer, Volume, VolumeSpec,
)
from gpucloud.transport.ratelimit import RateLimit
from gpucloud.providers import _batch_mark as batch_mark
from gpucloud.providers.lambdalabs import _wire as wire, filesystems
from gpucloud.providers._jobscript import POWER_OFF, secret_values, vm_script
from gpucloud.providers.lambdalabs._wire import image_spec
from gpucloud.providers._name_marker import latest, mark_name, split_name
from gpucloud.providers.account_objects import found_or_made, key_fields, key_name
from gpucloud.providers.base import Capabilities, Flow, OfferQuery, Provider, format_utc, parse_utc

LAUNCH_ID_TAG = "gpucloud-launch-id"
SHUTDOWN_AT_TAG = "gpucloud-shutdown-at"
NAME_MAX = 64  # InstanceLaunchRequest.name and AddSSHKeyRequest.name
TAG_VALUE_MAX = 128  # RequestedTagEntry.value
USER_DATA_MAX = 1024 * 1024  # InstanceLaunchRequest.user_data: "cannot exceed 1MB"

log = logging.getLogger("gpucloud.lambda")


class LambdaProvider(Provider):
    name = "lambda"
    # Instance ids: 32 lowercase letters and digits ("0920582c7ff041399e34823a0be62549"
    # in the Cloud API's OpenAPI examples).
    create_reads_back = True  # a GET by the replied id, see create()
    id_format = re.compile(r"[0-9a-z]{32}")
    capabilities = Capabilities(jobs=True, spot=False, stop_start=False, custom_disk=False,
                                needs_ssh_key=True, native_shutdown=False,
                                volumes=True, multi_node="batch", shared_volumes=True)
    # Lambda Cloud API spec 1.8.3, its description: "generally limited to one request
    # per second"; launch "one request per 12 seconds, or five requests per minute".
    rate_limits = {"*": RateLimit(1.0), "launch": RateLimit.every(12.0)}
    errors = wire.ERRORS
    error_fields = staticmethod(wire.error_fields)

    # -- flows -----------------------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        if query.spot:
            return []
        response = yield self.request("GET", "/api/v1/instance-types")
        data = self._data(response, dict)
        out: list[Offer] = []
        for key, item in data.items():
            try:
                out.extend(self._offers_of(item, query))
            except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
                raise self.invalid(response, f"instance type {key!r}: {exc}") from exc
        return out

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        offer = spec.offer
        # Everything that can be refused locally is refused before any request.
        self._check_disk(spec)
        if not spec.ssh_key_name and not spec.ssh_public_key:
            raise ConfigurationError(
                "lambda needs an SSH key to launch",
                hint=f"pass {option('ssh_key', '--ssh-key', repr('NAME_OR_PATH'), 'NAME_OR_PATH')} "
                     "or create ~/.ssh/id_ed25519.pub")
        if len(spec.launch_id) > TAG_VALUE_MAX:
            raise SpecError(f"launch id longer than {TAG_VALUE_MAX} characters")

        if spec.ssh_public_key:
            key_name = yield from self._ensure_ssh_key(spec.ssh_key_name, spec.ssh_public_key)
        else:
            key_name = spec.ssh_key_name

        tags = [{"key": LAUNCH_ID_TAG, "value": spec.launch_id}]
        if spec.batch and len(spec.batch) <= TAG_VALUE_MAX:
            tags.append({"key": batch_mark.LABEL, "value": spec.batch})
        deadline = format_utc(spec.shutdown_at) if spec.shutdown_at else None
        if deadline:
            tags.append({"key": SHUTDOWN_AT_TAG, "value": deadline})
        # quantity left out: gone from the 1.8.3 schema; the default is one machine.
        body: dict[str, Any] = {
            "region_name": offer.region,
            "instance_type_name": offer.instance_type,
            "ssh_key_names": [key_name],
            "name": spec.name[:NAME_MAX],
            "tags": tags,
        }
        if spec.image:
            # Without an image the field is left out and Lambda uses its default.
            body["image"] = image_spec(spec.image)
        secrets: list[str] = []
        if spec.job is not None:
            # cloud-init runs the job's container, then powers off. Lambda bills a
            # powered-off machine until it is terminated: the reaper does that
            # at the job's deadline (docs/jobs.md, "When a job ends, per provider").
            if spec.job.volumes:
                body["file_system_names"] = filesystems.launch_names(spec.job.volumes)
            body["user_data"] = vm_script(spec.job, POWER_OFF,
                                          filesystems.host_mounts(spec.job.volumes))
            if len(body["user_data"].encode()) > USER_DATA_MAX:
                raise SpecError(f"job {spec.job.name!r}: the start-up script exceeds Lambda's "
                                "1 MB user_data limit", hint="shorten the job's env or args")
            secrets = secret_values(spec.job)

        elif spec.volumes:  # a multi-node job's node: its runner comes later, over ssh
            body["file_system_names"] = filesystems.launch_names(spec.volumes)
        response = yield self.request("POST", "/api/v1/instance-operations/launch",
                                      json=body, kind="launch", secrets=secrets)
        data = self._data(response, dict)
        ids = data.get("instance_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
            raise self.invalid(response, "no instance_ids in the launch response")
        instance_id = ids[0]

        # The machine exists and is billed from here on (see read_back).
        return (yield from self.read_back(Instance(
            provider=self.name, id=instance_id, name=body["name"],
            status=InstanceStatus.PENDING, gpu=offer.gpu, gpu_count=offer.gpu_count,
            instance_type=offer.instance_type, region=offer.region,
            price_per_hour=offer.price_per_hour, launch_id=spec.launch_id,
            shutdown_at=parse_utc(deadline))))

    def list_instances(self) -> Flow[list[Instance]]:
        response = yield self.request("GET", "/api/v1/instances")
        data = self._data(response, list)
        return [self._instance(response, raw) for raw in data]

    def get(self, instance_id: str) -> Flow[Instance]:
        response = yield self.request("GET", f"/api/v1/instances/{quote(instance_id, safe='')}")
        return self._instance(response, self._data(response, dict))

    def delete(self, instance_id: str) -> Flow[None]:
        response = yield self.request("POST", "/api/v1/instance-operations/terminate",
                                      json={"instance_ids": [instance_id]}, kind="idempotent")
        self.raise_for_error(response)

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        """Lambda's update accepts only ``name`` (InstanceModificationRequest, the
        1.8.3 contract): the moved deadline goes into the name as a marker after
        the user's name, cut to fit 64 characters."""
        response = yield self.request(
            "POST", f"/api/v1/instances/{quote(instance.id, safe='')}", kind="idempotent",
            json={"name": mark_name(instance.name, shutdown_at, NAME_MAX)})
        return self._instance(response, self._data(response, dict))

    def verify(self) -> Flow[None]:
        response = yield self.request("GET", "/api/v1/ssh-keys")
        self._data(response, list)

    # -- volumes: requests and parsing in filesystems.py -----------------------------

    def list_volumes(self) -> Flow[list[Volume]]:
        return (yield from filesystems.list_volumes(self))

    def create_volume(self, spec: VolumeSpec) -> Flow[Volume]:
        return (yield from filesystems.create_volume(self, spec))

    def delete_volume(self, volume_id: str) -> Flow[None]:
        yield from filesystems.delete_volume(self, volume_id)

    def node_mounts(self, job: JobRun) -> Flow[tuple[list[tuple[str, str]], list[str]]]:
        # Lambda mounted them at launch (file_system_names): only the binds.
        return filesystems.host_mounts(job.volumes), []
        yield  # pragma: no cover - a flow

    # -- helpers -------------------------------------------------------------------

    def _data(self, response: httpx.Response, expected: type) -> Any:
        """The ``data`` of a success envelope, checked to be of the expected JSON type."""
        self.raise_for_error(response)
        body = self.json(response)
        if not isinstance(body, dict) or "data" not in body:
            raise self.invalid(response, "no 'data' in the body")
        if not isinstance(body["data"], expected):
            raise self.invalid(response, f"'data' is not a JSON {expected.__name__}")
        return body["data"]

    def _offers_of(self, item: dict[str, Any], query: OfferQuery) -> list[Offer]:
        itype = item["instance_type"]
        specs = itype["specs"]
        gpu_count = wire.integer(specs["gpus"])
        if gpu_count == 0:
            return []  # CPU-only types
        if query.count is not None and gpu_count != query.count:
            return []
        name = wire.text(itype["name"])
        description = wire.text(itype["gpu_description"])
        if not name or description is None:
            raise ValueError("missing name or gpu_description")
        gpu = normalize_gpu(description)
        if query.gpu is not None and gpu != query.gpu:
            return []
        price = Decimal(wire.integer(itype["price_cents_per_hour"])) / 100
        live = [wire.text(r["name"]) for r in item["regions_with_capacity_available"]]
        if not all(live):
            raise ValueError("a region without a name")
        # Catalog regions the type is sold in but has no capacity in right now
        # are still offers, shown as unavailable.
        catalog = [r for t in self.catalog.types_named(name) for r in t.regions]
        regions = list(dict.fromkeys([*live, *catalog]))
        memory = wire.GPU_MEMORY.search(description)
        info = gpu_info(gpu)
        gpu_memory = int(memory.group(1)) if memory else (info.memory_gb if info else None)
        return [
            Offer(provider=self.name, instance_type=name, region=region, gpu=gpu,
                  gpu_count=gpu_count, gpu_memory_gb=gpu_memory,
                  vcpus=wire.integer(specs["vcpus"]), memory_gb=wire.integer(specs["memory_gib"]),
                  disk_gb=wire.integer(specs["storage_gib"]),
                  price_per_hour=price, spot=False, available=region in live, source="live")
            for region in regions
            if query.region is None or region == query.region
        ]

    def _check_disk(self, spec: InstanceSpec) -> None:
        if spec.disk_gb is None:
            return
        fixed = spec.offer.disk_gb
        if fixed is None:
            sizes = [t.disk_gb for t in self.catalog.types_named(spec.offer.instance_type)
                     if t.disk_gb is not None]
            fixed = max(sizes) if sizes else None
        if fixed is not None and spec.disk_gb > fixed:
            raise SpecError(
                f"lambda {spec.offer.instance_type} has a fixed {fixed} GB disk; "
                f"{spec.disk_gb} GB was asked for",
                hint=f"drop {option('disk_gb', '--disk-gb')} or pick a larger instance type")

    def _ensure_ssh_key(self, name: str | None, public_key: str) -> Flow[str]:
        """The name of a registered key with this public key, registering it if needed."""
        wanted = key_fields(public_key)
        if not wanted:
            raise ConfigurationError("the SSH public key is empty")
        if name is None:
            name = key_name(wanted)
        name = name[:NAME_MAX]

        def find() -> Flow[str | None]:
            response = yield self.request("GET", "/api/v1/ssh-keys")
            taken = False
            for key in self._data(response, list):
                if not isinstance(key, dict):
                    raise self.invalid(response, "an SSH key entry is not an object")
                if key_fields(key.get("public_key")) == wanted \
                        and wire.text(key.get("name")):
                    return str(key["name"])
                taken = taken or key.get("name") == name
            if taken:
                raise ConfigurationError(
                    f"an SSH key named {name!r} is already registered with lambda "
                    "with a different public key",
                    hint="pass the key by its registered name, or choose another name")
            return None

        def make() -> Flow[str]:
            response = yield self.request("POST", "/api/v1/ssh-keys",
                                          json={"name": name, "public_key": public_key.strip()},
                                          kind="unsafe")
            registered = wire.text(self._data(response, dict).get("name"))
            if not registered:
                raise self.invalid(response, "the registered SSH key has no name")
            return registered
        return (yield from found_or_made(find, make))

    def _instance(self, response: httpx.Response, raw: Any) -> Instance:
        if not isinstance(raw, dict) or not wire.text(raw.get("id")) \
                or not wire.text(raw.get("status")):
            raise self.invalid(response, "an instance without id or status")
        itype = raw.get("instance_type") if isinstance(raw.get("instance_type"), dict) else {}
        specs = itype.get("specs") if isinstance(itype.get("specs"), dict) else {}
        region = raw.get("region") if isinstance(raw.get("region"), dict) else {}
        # Tags carry the launch id: a reply that garbles them cannot be read, or a
        # machine of ours would look like nobody's.
        raw_tags = raw.get("tags") if raw.get("tags") is not None else []
        if not isinstance(raw_tags, list) or not all(isinstance(t, dict) for t in raw_tags):
            raise self.invalid(response, f"instance {raw['id']!r}: tags are not a list of "
                                         "key/value objects")
        tags = {t.get("key"): t.get("value") for t in raw_tags}
        description = wire.text(itype.get("gpu_description"))
        cents = itype.get("price_cents_per_hour")
        status = raw["status"]
        # The launch tag is the original deadline; an extend renames the machine
        # (tags cannot change): the later of the two counts, the name shows
        # without the marker.
        name, extended = split_name(wire.text(raw.get("name")))
        try:
            return Instance(
                provider=self.name, id=raw["id"], name=name,
                status=wire.STATUS.get(status, InstanceStatus.UNKNOWN), provider_status=status,
                gpu=normalize_gpu(description) if description else None,
                gpu_count=specs.get("gpus") if wire.is_int(specs.get("gpus")) else None,
                instance_type=wire.text(itype.get("name")), region=wire.text(region.get("name")),
                price_per_hour=Decimal(cents) / 100 if wire.is_int(cents) else None,
                ip=wire.text(raw.get("ip")), launch_id=wire.text(tags.get(LAUNCH_ID_TAG)),
                # The spec's Instance.private_ip: the address on the region's
                # private network, where the nodes of a job reach each other.
                private_ip=wire.text(raw.get("private_ip")),
                batch=wire.text(tags.get(batch_mark.LABEL)),
                connection=wire.connection_of(raw),
                shutdown_at=latest(parse_utc(tags.get(SHUTDOWN_AT_TAG)), extended),
            )
        except ValueError as exc:  # pydantic's ValidationError included
            raise self.invalid(response, f"instance {raw['id']!r}: {exc}") from exc




__all__ = ["LAUNCH_ID_TAG", "SHUTDOWN_AT_TAG", "LambdaProvider", "image_spec"]
