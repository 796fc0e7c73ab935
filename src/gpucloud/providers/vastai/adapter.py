"""Vast.ai (console.vast.ai), the marketplace API.

Contract: Vast's official OpenAPI 3.1 "Vast.ai API" 1.0.0 (tests/fixtures/vastai/
openapi.json is the trimmed copy every test request is validated against),
plus the docs and the official client (vast-cli) where the spec is silent or
wrong (e.g. the client's trailing slashes, which the spec omits).

What shapes this adapter:

* An offer is one host's ask, rented by its id (``Offer.offer_id``); there are
  no orderable instance types. Names follow SkyPilot's Vast catalog
  (``{num_gpus}x-{gpu_name, spaces as _}-{cpu_cores}-{cpu_ram MB}``) so that
  live offers and providers/vastai.toml read alike.
* Prices are comparable with other clouds': the search asks for hosts with
  room for the requested disk and prices them for it (``allocated_storage``);
  an offer's price is Vast's quote for that disk, ``dph_total`` (what vast-cli
  shows). ``dph_base`` + ``storage_cost`` (USD per GB-month) x GB / 720 only
  splits it into machine and disk in estimates; a quote its parts do not add
  up to gets a note (_wire.ask_price). Bandwidth (``inet_up_cost``,
  ``inet_down_cost``, USD per GB) is billed by use: usage prices of the offer,
  separate estimate lines, never folded into the hourly price.
* ``frozen`` (``actual_status`` or ``cur_state``) is a paused contract, a
  stopped machine that still exists, not a failure.
* No idempotency key: the launch id (and the deadline) travel in the label,
  which ``list_instances`` reads back and ``extend`` rewrites; a copy of both
  goes into the container's environment (the create's deadline: reads take the
  later of label and env). An ``onstart`` self-guard (_guard.py) destroys a
  machine past its deadline with the per-instance key Vast injects.
* Volumes (_volumes.py) are listed and deleted, never created or mounted by a
  job: a Vast volume is tied to one host machine, yet bills all the same.
* A job (spec.job) rents the job's image; its onstart runs the job's command
  after the guard and destroys the instance when it ends (_job.py).
* Per-endpoint minimum intervals (see rate_limits); a 429 rarely carries
  Retry-After (the search quota's does), so the driver's backoff applies.
* Paths end in "/" like vast-cli's; the spec omits the slash.
"""

from __future__ import annotations

import re

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, ClassVar

import httpx

from gpucloud.transport.errors import status_error
from gpucloud.errors import (
    NotFoundError,
    SpecError,
    option,
)
from gpucloud.models import (Instance, InstanceSpec, InstanceStatus, Offer, UsagePrice, Volume,
                             VolumeSpec)
from gpucloud.transport.ratelimit import RateLimit
from gpucloud.providers import _batch_mark as batch_mark
from gpucloud.providers.base import Capabilities, Flow, OfferQuery, Provider
from gpucloud.providers.account_objects import key_fields
from gpucloud.providers._name_marker import latest
from gpucloud.providers._jobscript import container_env, secret_values
from gpucloud.providers.vastai._guard import onstart
from gpucloud.providers.vastai._job import job_onstart
from gpucloud.providers.vastai import _volumes, _wire as wire
from gpucloud.providers.vastai._wire import (
    ask_price,
    LABEL_MAX,
    DEFAULT_DISK_GB,
    ENV_LAUNCH_ID,
    HOURS_PER_MONTH,
    ENV_SHUTDOWN_AT,
    MAX_PAGES,
    PAGE_LIMIT,
    RUNTYPE,
    as_int,
    as_str,
    checked_id,
    connection_of,
    country_code,
    disk_of,
    env_of,
    format_utc,
    gpu_of,
    instance_type_name,
    is_int,
    is_num,
    make_label,
    map_status,
    money,
    parse_label,
    parse_utc,
    ram_gb,
    search_body,
)



class VastProvider(Provider):
    name = "vastai"
    # Instance ids are integers (new_contract in the create reply, OpenAPI examples).
    create_reads_back = True  # a GET by the replied id, see create()
    id_format = re.compile(r"[1-9][0-9]{0,18}")
    # spot: interruptible instances are bid-priced; a bid machine is stopped as
    # soon as someone outbids it, and the engine has no bid support yet.
    # self_guard: the onstart guard (_guard.py) destroys a machine past its
    # deadline with the per-instance key Vast injects, following extend.
    capabilities = Capabilities(jobs=True, spot=False, stop_start=True, custom_disk=True,
                                needs_ssh_key=False, native_shutdown=False, self_guard=True,
                                volumes=True)  # listed and deleted; see volume_refusal
    # Vast enforces a minimum interval per endpoint and identity
    # (vast-ai/docs api-reference/rate-limits-and-errors.mdx). Per request
    # kind, the strictest interval among the endpoints of that kind: reads
    # 2 s (GET instances, show instance), launch 4.5 s (create's 429
    # threshold), idempotent 3 s (DELETE instance; PUT state is 1 s),
    # unsafe 1 s (POST ssh key). Sources: the spec's 429 examples
    # ("endpoint threshold=...") and docs/api-reference/rate-limit-endpoint-method-data.mdx.
    rate_limits: ClassVar[Mapping[str, RateLimit]] = {
        "read": RateLimit.every(2.0), "launch": RateLimit.every(4.5),
        "idempotent": RateLimit.every(3.0), "unsafe": RateLimit.every(1.0)}
    errors = wire.ERRORS
    error_fields = staticmethod(wire.error_fields)

    # -- flows -----------------------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        if query.spot:
            return []
        disk = disk_of(query)
        response = yield self.request("POST", "/api/v0/bundles/", json=search_body(query),
                                      kind="read")
        body = self._body(response)
        raw = body.get("offers")
        if isinstance(raw, dict):  # the spec's own example shows one object, not a list
            raw = [raw]
        if not isinstance(raw, list):
            raise self.invalid(response, "no 'offers' list")
        out: list[Offer] = []
        for item in raw:
            try:
                offer = self._offer(item, disk)
            except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
                ident = item.get("id") if isinstance(item, dict) else None
                raise self.invalid(response, f"offer {ident!r}: {exc}") from exc
            if (query.gpu is None or offer.gpu == query.gpu) \
                    and (query.count is None or offer.gpu_count == query.count) \
                    and (query.region is None or offer.region == query.region):
                out.append(offer)
        return out

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        offer = spec.offer
        if offer.offer_id is None:
            raise SpecError("Vast offers must come from a live search",
                            hint="run `gpucloud offers --provider vastai` with credentials set")
        if not offer.offer_id.isdigit():
            raise SpecError(f"not a Vast ask id: {offer.offer_id!r}")
        if not spec.launch_id or any(c.isspace() for c in spec.launch_id):
            raise SpecError(f"invalid launch id {spec.launch_id!r}")
        if spec.job is not None and spec.job.volumes:
            # A Vast volume lives on one host machine (the API's Volume has a
            # machine_id; volume_info links one volume, on that host, per rental):
            # no network volume a job on any offer could mount.
            raise SpecError(f"job {spec.job.name!r}: vastai has no network volumes to mount",
                            hint="drop `volumes` from the job file, or pick a provider "
                                 "with volumes (`gpucloud providers`)")
        image = spec.job.image if spec.job else spec.image or self.catalog.default_image
        if not image:
            raise SpecError("Vast needs a container image",
                            hint=f"pass {option('image', '--image')}")
        # A job: its env (secret values included) is the container's env, and
        # onstart runs it after the guard (see _job.py).
        script = job_onstart(spec.job) if spec.job else onstart()
        if spec.ssh_public_key:
            # Registered before the launch: an account key is put on every new machine.
            yield from self._ensure_ssh_key(spec.ssh_public_key)

        deadline = format_utc(spec.shutdown_at) if spec.shutdown_at else None
        env = container_env(spec.job) if spec.job else {}
        env[ENV_LAUNCH_ID] = spec.launch_id
        if spec.batch:
            env[batch_mark.ENV] = spec.batch
        if deadline:
            env[ENV_SHUTDOWN_AT] = deadline
        body = {
            "image": image,
            "disk": spec.disk_gb or offer.disk_gb or DEFAULT_DISK_GB,
            "label": make_label(spec.launch_id, deadline, spec.name),
            "env": env,
            "runtype": RUNTYPE,  # direct SSH, the proxy as fallback (see _wire.RUNTYPE)
            # runs in the ssh modes, on every container start (the guard re-arms)
            "onstart": script,
        }
        response = yield self.request("PUT", f"/api/v0/asks/{offer.offer_id}/", json=body,
                                      kind="launch",
                                      secrets=secret_values(spec.job) if spec.job else ())
        reply = self._body(response)
        new = reply.get("new_contract")
        if not is_int(new):
            raise self.invalid(response, "no new_contract in the reply; the machine may exist, "
                                         f"look for launch id {spec.launch_id}")
        instance_id = str(new)
        # Billed from here on (see read_back).
        return (yield from self.read_back(Instance(
            provider=self.name, id=instance_id, name=spec.name,
            status=InstanceStatus.PENDING, gpu=offer.gpu, gpu_count=offer.gpu_count,
            instance_type=offer.instance_type, region=offer.region,
            price_per_hour=offer.price_per_hour, launch_id=spec.launch_id,
            shutdown_at=parse_utc(deadline))))

    def list_instances(self) -> Flow[list[Instance]]:
        out: list[Instance] = []
        token: str | None = None
        for _ in range(MAX_PAGES):
            params: dict[str, Any] = {"limit": PAGE_LIMIT,
                                      "order_by": '[{"col":"id","dir":"asc"}]'}
            if token:
                params["after_token"] = token
            response = yield self.request("GET", "/api/v1/instances/", params=params)
            body = self._body(response)
            page = body.get("instances")
            if not isinstance(page, list):
                raise self.invalid(response, "no 'instances' list")
            out.extend(self._instance(response, raw) for raw in page)
            following = body.get("next_token")
            if not following:
                return out
            if not isinstance(following, str) or following == token:
                raise self.invalid(response, "next_token does not advance")
            token = following
        raise self.invalid(response, f"more than {MAX_PAGES} pages of instances")

    def get(self, instance_id: str) -> Flow[Instance]:
        response = yield self.request("GET", f"/api/v0/instances/{checked_id(instance_id)}/")
        raw = self._body(response).get("instances")
        if raw is None:
            raise status_error(self.name, response, message=f"no instance {instance_id}",
                               cls=NotFoundError)
        return self._instance(response, raw)

    def delete(self, instance_id: str) -> Flow[None]:
        response = yield self.request("DELETE", f"/api/v0/instances/{checked_id(instance_id)}/",
                                      kind="idempotent")
        self._body(response)

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        """Rewrite the label (PUT manageInstance, read-modify-write: the launch id
        and the name stay). The env copy keeps the create's deadline; reads and
        the self-guard take the later of the two."""
        if not instance.launch_id:
            raise SpecError(f"vastai/{instance.id} carries no gpucloud launch id")
        label = make_label(instance.launch_id, format_utc(shutdown_at), instance.name or "")
        response = yield self.request("PUT", f"/api/v0/instances/{checked_id(instance.id)}/",
                                      json={"label": label[:LABEL_MAX]}, kind="idempotent")
        self._body(response)
        return (yield from self.get(instance.id))

    def stop(self, instance_id: str) -> Flow[Instance]:
        return (yield from self._set_state(instance_id, "stopped"))

    def start(self, instance_id: str) -> Flow[Instance]:
        return (yield from self._set_state(instance_id, "running"))

    def verify(self) -> Flow[None]:
        response = yield self.request("GET", "/api/v1/instances/", params={"limit": 1})
        self._body(response)

    # -- volumes (_volumes.py) -------------------------------------------------------

    def volume_refusal(self) -> SpecError:
        return _volumes.refusal(self.name)

    def list_volumes(self) -> Flow[list[Volume]]:
        response = yield self.request("GET", _volumes.PATH, params=dict(_volumes.LIST_PARAMS))
        rows = self._body(response).get("volumes")
        if not isinstance(rows, list):
            raise self.invalid(response, "no 'volumes' list")
        try:
            return [_volumes.volume_of(self.name, raw) for raw in rows]
        except (TypeError, ValueError, OverflowError) as exc:
            raise self.invalid(response, str(exc)) from exc

    def create_volume(self, spec: VolumeSpec) -> Flow[Volume]:
        raise self.volume_refusal()
        yield  # pragma: no cover - a flow

    def delete_volume(self, volume_id: str) -> Flow[None]:
        params, body = _volumes.delete_request(volume_id)
        response = yield self.request("DELETE", _volumes.PATH, params=params, json=body,
                                      kind="idempotent")
        self._body(response)

    # -- helpers -------------------------------------------------------------------

    def _body(self, response: httpx.Response) -> dict[str, Any]:
        """A success body as a JSON object; ``success: false`` with a 2xx is an error too."""
        self.raise_for_error(response)
        body = self.json(response)
        if not isinstance(body, dict):
            raise self.invalid(response, "the body is not a JSON object")
        if body.get("success") is False:
            raise self.map_error(response)
        return body

    def _set_state(self, instance_id: str, state: str) -> Flow[Instance]:
        response = yield self.request("PUT", f"/api/v0/instances/{checked_id(instance_id)}/",
                                      json={"state": state}, kind="idempotent")
        self._body(response)
        return (yield from self.get(instance_id))

    def _ensure_ssh_key(self, public_key: str) -> Flow[None]:
        wanted = key_fields(public_key)
        response = yield self.request("GET", "/api/v0/ssh/")
        self.raise_for_error(response)
        keys = self.json(response)
        if isinstance(keys, dict):  # vast-cli treats the reply as an object: accept both
            keys = next((v for v in keys.values() if isinstance(v, list)), [])
        if not isinstance(keys, list):
            raise self.invalid(response, "the SSH key list is not a list")
        for key in keys:
            text = (key.get("key") or key.get("public_key")) if isinstance(key, dict) else None
            if key_fields(text) == wanted:
                return
        response = yield self.request("POST", "/api/v0/ssh/",
                                      json={"ssh_key": public_key.strip()}, kind="unsafe")
        self._body(response)

    def _offer(self, raw: Any, disk: int) -> Offer:
        if not isinstance(raw, dict):
            raise TypeError("an offer is not an object")
        ask = as_int(raw["id"])
        count = as_int(raw["num_gpus"])
        gpu_name = raw["gpu_name"]
        if not isinstance(gpu_name, str) or not gpu_name.strip():
            raise ValueError("no gpu_name")
        price, storage, notes = ask_price(raw, disk)
        usage = tuple(
            UsagePrice(component=component, price=money(raw[key]), unit="GB")
            for key, component in (("inet_up_cost", "egress"), ("inet_down_cost", "ingress"))
            if raw.get(key) is not None and money(raw[key]) > 0)
        return Offer(
            provider=self.name,
            instance_type=instance_type_name(count, gpu_name),
            region=country_code(raw.get("geolocation")) or "unknown",
            gpu=gpu_of(gpu_name, raw.get("gpu_ram")), gpu_count=count,
            gpu_memory_gb=ram_gb(raw.get("gpu_ram")),
            vcpus=int(raw["cpu_cores_effective"]) if is_num(raw.get("cpu_cores_effective"))
            else None,
            memory_gb=ram_gb(raw.get("cpu_ram")), disk_gb=disk,
            price_per_hour=price, spot=False, available=True, source="live",
            disk_price_per_gb_month=storage, disk_billed_apart=True,
            hours_per_month=HOURS_PER_MONTH, usage_prices=usage, offer_id=str(ask),
            notes=notes,
        )

    def _instance(self, response: httpx.Response, raw: Any) -> Instance:
        if not isinstance(raw, dict) or not is_int(raw.get("id")):
            raise self.invalid(response, "an instance without an integer id")
        label = raw.get("label")
        if label is not None and not isinstance(label, str):  # the label holds the launch id
            raise self.invalid(response, f"instance {raw['id']!r}: label is not a string")
        env = env_of(raw.get("extra_env"))
        launch_id, deadline, name = parse_label(label)
        gpu_name = raw.get("gpu_name") if isinstance(raw.get("gpu_name"), str) else None
        count = raw.get("num_gpus") if is_int(raw.get("num_gpus")) else None
        actual = raw.get("actual_status")
        try:
            return Instance(
                provider=self.name, id=str(raw["id"]), name=name,
                status=map_status(actual, raw.get("intended_status"), raw.get("status_msg"),
                                  raw.get("cur_state")),
                provider_status=actual if isinstance(actual, str) else None,
                gpu=gpu_of(gpu_name, raw.get("gpu_ram")) if gpu_name else None, gpu_count=count,
                instance_type=instance_type_name(count, gpu_name) if gpu_name and count
                else None,
                region=country_code(raw.get("geolocation")) or as_str(raw.get("country_code")),
                price_per_hour=money(raw["dph_total"]) if is_num(raw.get("dph_total"))
                else None,
                ip=(as_str(raw.get("public_ipaddr")) or "").strip() or None,
                connection=connection_of(raw),
                created_at=datetime.fromtimestamp(raw["start_date"], timezone.utc)
                if is_num(raw.get("start_date")) else None,
                # The label is moved by extend, env keeps the create's copy.
                shutdown_at=latest(parse_utc(deadline), parse_utc(env.get(ENV_SHUTDOWN_AT))),
                launch_id=launch_id or env.get(ENV_LAUNCH_ID),
            )
        except (ValueError, ArithmeticError, OverflowError, OSError) as exc:
            raise self.invalid(response, f"instance {raw['id']!r}: {exc}") from exc

