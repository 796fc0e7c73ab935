"""Shadeform (api.shadeform.ai/v1), a single API over some twenty GPU clouds.

Contract: Shadeform's OpenAPI 3 document (tests/fixtures/shadeform/openapi.yaml,
the copy brevdev/cloud vendors for its Shadeform provider). Bodies are bare
JSON; the key travels in the ``X-API-KEY`` header. Nothing here was checked
against the live API.

What shapes this adapter:

* Shadeform is itself an aggregator: ``GET /instances/types`` lists each
  upstream cloud's types (``cloud`` + ``shade_instance_type``), priced in US
  cents per hour for the whole machine, with per-region availability. An
  offer's instance type is ``<cloud>_<shade_instance_type>`` (the naming of
  SkyPilot's Shadeform catalog, which the bundled catalog is built from), so
  a create knows which cloud to ask for; its notes name the cloud.
* Create (``POST /instances/create``) answers with an id only: the machine is
  read back through ``GET /instances/{id}/info``. There is no idempotency
  key, so the launch id travels as a ``gpucloud-launch-id=<id>`` tag (and an
  env) and ``list_instances`` reads it back.
* The deadline is held by Shadeform: a create with a deadline sends
  ``auto_delete.date_threshold`` (and, under a spend cap, its share as
  ``spend_threshold``), and Shadeform deletes the machine then even if no
  computer of ours is on. A ``gpucloud-shutdown-at`` tag keeps a copy that
  ``GET /instances`` (which omits auto_delete) shows the reaper. ``extend``
  moves both with ``POST /instances/{id}/update`` and reads the info back.
* SSH keys are referred to by id; a public key is registered once
  (``/sshkeys/add``, matched by key text) and reused. Without a key the
  account's default key is used, as the contract allows.
* No stop/start, no spot, no jobs (the contract's docker launch
  configuration never ends the machine when the container does).
* Volumes (``/volumes``, volumes.py) belong to one upstream cloud and
  region; a create names the cloud, found from ``/volumes/types``. Jobs are
  refused (above), so no launch mounts a volume.
* No rate limits are published: only 429s pace it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from gpucloud.catalog.gpus import gpu_info, normalize_gpu
from gpucloud.errors import ConfigurationError, SpecError
from gpucloud.models import Instance, InstanceSpec, InstanceStatus, Offer, Volume, VolumeSpec
from gpucloud.providers.base import Capabilities, Flow, OfferQuery, Provider, format_utc, parse_utc
from gpucloud.providers.shadeform import _wire as wire, volumes
from gpucloud.providers.account_objects import (
    found_or_made, key_fields, key_id_among, key_id_named, key_name,
)
from gpucloud.transport.bearer_auth import HeaderKeyAuth

NAME_MAX = 64  # kept short: upstream clouds cap instance names (Lambda: 64)


class ShadeformProvider(Provider):
    name = "shadeform"
    create_reads_back = True  # create() reads the new machine by the replied id
    id_format = wire.UUID
    # native_shutdown: auto_delete holds the deadline on Shadeform's side; the
    # reaper stays a second layer.
    capabilities = Capabilities(spot=False, stop_start=False, custom_disk=False,
                                needs_ssh_key=False, native_shutdown=True,
                                volumes=True, multi_node="batch")
    # None published: only 429s pace it (the driver slows on them).
    rate_limits = {}
    errors = wire.ERRORS
    error_fields = staticmethod(wire.error_fields)

    def auth(self) -> httpx.Auth | None:
        if self.credential is None:
            return None
        return HeaderKeyAuth(self.credential.secret, "X-API-KEY")

    # -- flows -----------------------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        if query.spot:
            return []  # the contract sells on-demand machines only
        response = yield self.request("GET", "/instances/types")
        body = self._body(response)
        types = body.get("instance_types")
        if not isinstance(types, list):
            raise self.invalid(response, "no instance_types list")
        out: list[Offer] = []
        for item in types:
            try:
                out.extend(self._offers_of(item, query))
            except (AttributeError, KeyError, TypeError, ValueError, ArithmeticError) as exc:
                name = item.get("shade_instance_type") if isinstance(item, dict) else None
                raise self.invalid(response, f"instance type {name!r}: {exc}") from exc
        return out

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        # Everything that can be refused locally is refused before any request.
        if spec.job is not None:
            raise SpecError("shadeform cannot run a job's container to completion",
                            hint="create a machine and run the container over SSH "
                                 "(`gpucloud ssh REF`)")
        cloud, _, shade_type = spec.offer.instance_type.partition("_")
        if not cloud or not shade_type:
            raise SpecError(f"{spec.offer.instance_type!r} is not a Shadeform offer name "
                            "(<cloud>_<shade_instance_type>)",
                            hint="pick an offer from `gpucloud offers --provider shadeform`")
        key_id = yield from self._ssh_key_id(spec.ssh_key_name, spec.ssh_public_key)
        tags = [wire.tag(wire.LAUNCH_ID_TAG, spec.launch_id)]
        if spec.batch:
            tags.append(wire.tag(wire.BATCH_TAG, spec.batch))
        body: dict[str, Any] = {
            "cloud": cloud,
            "region": spec.offer.region,
            "shade_instance_type": shade_type,
            "shade_cloud": True,  # billed through Shadeform, not a linked account
            "name": spec.name[:NAME_MAX],
            "envs": [{"name": wire.LAUNCH_ID_ENV, "value": spec.launch_id}],
        }
        if spec.image:
            body["os"] = spec.image  # an os_options value; without it, the type's default
        if key_id is not None:
            body["ssh_key_id"] = key_id
        auto_delete: dict[str, str] = {}
        if spec.shutdown_at is not None:
            auto_delete["date_threshold"] = format_utc(spec.shutdown_at)
            tags.append(wire.tag(wire.SHUTDOWN_AT_TAG, auto_delete["date_threshold"]))
        if spec.max_cost is not None:
            auto_delete["spend_threshold"] = wire.spend_threshold(spec.max_cost)
        if auto_delete:
            body["auto_delete"] = auto_delete
        body["tags"] = tags
        # "launch": never sent twice. Should the answer be lost, gpucloud finds the
        # machine by its launch id tag instead (list_instances).
        response = yield self.request("POST", "/instances/create", json=body, kind="launch")
        created = self._body(response)
        instance_id = wire.text(created.get("id"))
        if not instance_id:
            raise self.invalid(response, "no instance id in the reply; the machine may "
                                         f"exist, look for launch id {spec.launch_id}")
        offer = spec.offer
        # The machine exists and is billed from here on (see read_back).
        return (yield from self.read_back(Instance(
            provider=self.name, id=instance_id, name=body["name"],
            status=InstanceStatus.PENDING, gpu=offer.gpu, gpu_count=offer.gpu_count,
            instance_type=offer.instance_type, region=offer.region,
            price_per_hour=offer.price_per_hour, launch_id=spec.launch_id,
            shutdown_at=parse_utc(auto_delete.get("date_threshold")))))

    def list_instances(self) -> Flow[list[Instance]]:
        response = yield self.request("GET", "/instances")
        raw = self._body(response).get("instances")
        if not isinstance(raw, list):
            raise self.invalid(response, "no instances list")
        return [self._instance(response, item) for item in raw]

    def get(self, instance_id: str) -> Flow[Instance]:
        response = yield self.request("GET", self._path(instance_id, "info"))
        return self._instance(response, self._body(response))

    def delete(self, instance_id: str) -> Flow[None]:
        # Deleting an id twice has the same effect as once; the machine stops
        # billing once it is "deleting" (InstancesDelete's description).
        response = yield self.request("POST", self._path(instance_id, "delete"),
                                      kind="idempotent")
        self.raise_for_error(response)

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        """Move auto_delete.date_threshold (what Shadeform acts on) and the tag
        copy in one update, keeping a spend threshold set at create, then read
        the machine back: the deadline returned is the one Shadeform now holds."""
        response = yield self.request("GET", self._path(instance.id, "info"))
        current = self._body(response)
        auto_delete: dict[str, str] = {"date_threshold": format_utc(shutdown_at)}
        before = current.get("auto_delete")
        spend = wire.text(before.get("spend_threshold")) if isinstance(before, dict) else None
        if spend:
            auto_delete["spend_threshold"] = spend
        # The update replaces the tag list: the user's own tags go back as read.
        response = yield self.request(
            "POST", self._path(instance.id, "update"), kind="idempotent",
            json={"auto_delete": auto_delete,
                  "tags": wire.with_deadline(current.get("tags"), shutdown_at)})
        self.raise_for_error(response)
        updated: Instance = yield from self.get(instance.id)
        return updated

    def verify(self) -> Flow[None]:
        response = yield self.request("GET", "/sshkeys")
        self._body(response)

    # -- volumes: requests and parsing in volumes.py ---------------------------------

    def list_volumes(self) -> Flow[list[Volume]]:
        return (yield from volumes.list_volumes(self))

    def create_volume(self, spec: VolumeSpec) -> Flow[Volume]:
        return (yield from volumes.create_volume(self, spec))

    def delete_volume(self, volume_id: str) -> Flow[None]:
        yield from volumes.delete_volume(self, volume_id)

    # -- helpers -----------------------------------------------------------------

    def _path(self, instance_id: str, action: str) -> str:
        return f"/instances/{quote(instance_id, safe='')}/{action}"

    def _body(self, response: httpx.Response) -> dict[str, Any]:
        self.raise_for_error(response)
        body = self.json(response)
        if not isinstance(body, dict):
            raise self.invalid(response, "the body is not a JSON object")
        return body

    def _offers_of(self, item: dict[str, Any], query: OfferQuery) -> list[Offer]:
        cloud, shade_type = wire.text(item["cloud"]), wire.text(item["shade_instance_type"])
        if not cloud or not shade_type:
            raise ValueError("no cloud or shade_instance_type")
        config = item["configuration"]
        count = config["num_gpus"]
        if not isinstance(count, int) or count <= 0:
            return []  # CPU-only types
        if query.count is not None and count != query.count:
            return []
        gpu = _gpu_name(config)
        if query.gpu is not None and gpu != query.gpu:
            return []
        price = wire.cents(item["hourly_price"])
        if price <= 0:
            return []  # no price is no offer: never shown as free
        info = gpu_info(gpu)
        vram = config.get("vram_per_gpu_in_gb")
        name = f"{cloud}_{shade_type}"
        out = []
        for slot in item["availability"]:
            region = wire.text(slot["region"])
            if not region:
                raise ValueError("an availability entry without a region")
            if query.region is not None and region != query.region:
                continue
            out.append(Offer(
                provider=self.name, instance_type=name, region=region, gpu=gpu,
                gpu_count=count,
                gpu_memory_gb=vram if isinstance(vram, int) and vram > 0
                else (info.memory_gb if info else None),
                vcpus=_int_or_none(config.get("vcpus")),
                memory_gb=_int_or_none(config.get("memory_in_gb")),
                disk_gb=_int_or_none(config.get("storage_in_gb")),
                price_per_hour=price, spot=False, available=slot["available"] is True,
                source="live", notes=(f"runs on {cloud} through Shadeform",)))
        return out

    def _ssh_key_id(self, name: str | None, public_key: str | None) -> Flow[str | None]:
        """The id of a registered key (by key text, else by name or id),
        registering a public key not yet known; None: the account's default key."""
        if not name and not public_key:
            return None
        wanted = key_fields(public_key)
        if public_key is not None and len(wanted) < 2:
            raise ConfigurationError("the SSH public key is not 'TYPE BASE64 [comment]'")

        def find() -> Flow[str | None]:
            response = yield self.request("GET", "/sshkeys")
            keys = self._body(response).get("ssh_keys")
            if not isinstance(keys, list) or not all(
                    isinstance(k, dict) and wire.text(k.get("id")) for k in keys):
                raise self.invalid(response, "no ssh_keys list of keys with ids")
            if public_key is None:
                return key_id_named(keys, name, self.name)
            return key_id_among(keys, wanted, "public_key")

        def make() -> Flow[str]:
            assert public_key is not None  # find() returned or raised without one
            label = name or key_name(wanted)
            response = yield self.request("POST", "/sshkeys/add", kind="unsafe",
                                          json={"name": label, "public_key": public_key.strip()})
            key_id = wire.text(self._body(response).get("id"))
            if not key_id:
                raise self.invalid(response, "no SSH key id in the reply")
            return key_id
        return (yield from found_or_made(find, make))

    def _instance(self, response: httpx.Response, raw: Any) -> Instance:
        if not isinstance(raw, dict) or not wire.text(raw.get("id")) \
                or not wire.text(raw.get("status")):
            raise self.invalid(response, "an instance without id or status")
        raw_tags = raw.get("tags")
        if raw_tags is not None and not isinstance(raw_tags, list):
            # Tags carry the launch id: never guess past garbled ones.
            raise self.invalid(response, f"instance {raw['id']!r}: tags are not a list")
        tags = wire.read_tags(raw_tags)
        found = raw.get("configuration")
        config: dict[str, Any] = found if isinstance(found, dict) else {}
        count = config.get("num_gpus")
        cloud, shade_type = wire.text(raw.get("cloud")), wire.text(raw.get("shade_instance_type"))
        status = raw["status"]
        # auto_delete (info only) is the deadline Shadeform acts on; the tag is
        # the copy a listing shows.
        held = wire.auto_delete_date(raw.get("auto_delete"))
        try:
            return Instance(
                provider=self.name, id=raw["id"], name=wire.text(raw.get("name")),
                status=wire.STATUS.get(status, InstanceStatus.UNKNOWN), provider_status=status,
                gpu=_gpu_name(config) if isinstance(count, int) and count > 0 else None,
                gpu_count=count if isinstance(count, int) and count > 0 else None,
                instance_type=f"{cloud}_{shade_type}" if cloud and shade_type else None,
                region=wire.text(raw.get("region")),
                price_per_hour=wire.cents(raw["hourly_price"])
                if raw.get("hourly_price") is not None else None,
                ip=wire.text(raw.get("ip")) or None,
                created_at=parse_utc(raw.get("created_at")),
                connection=wire.connection_of(raw),
                launch_id=tags.get(wire.LAUNCH_ID_TAG),
                batch=tags.get(wire.BATCH_TAG),
                shutdown_at=held if held is not None
                else parse_utc(tags.get(wire.SHUTDOWN_AT_TAG)),
            )
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError included
            raise self.invalid(response, f"instance {raw['id']!r}: {exc}") from exc


def _gpu_name(config: dict[str, Any]) -> str:
    """Canonical name from gpu_type and the memory per GPU ("A100" + 80 GB is
    A100-80GB); a card gpus.py does not know is kept as Shadeform names it."""
    raw = wire.text(config.get("gpu_type")) or "unknown"
    vram = config.get("vram_per_gpu_in_gb")
    if isinstance(vram, int) and vram > 0:
        named = normalize_gpu(f"{raw} {vram}GB")
        if gpu_info(named) is not None:
            return named
    return normalize_gpu(raw)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


__all__ = ["ShadeformProvider"]
