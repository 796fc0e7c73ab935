"""Verda (formerly DataCrunch) Public API, https://api.verda.com/v1.

Contract: the official SDKs (no OpenAPI document exists; the vendor's reference is
https://api.verda.com/v1/docs; see tests/fixtures/verda/SOURCE.txt). Bodies are
bare JSON; errors are ``{"code", "message"}``; prices are JSON strings.

What shapes this adapter:

* OAuth2 client credentials: ``auth()`` is one ``RefreshingTokenAuth`` per
  provider instance, so every session shares one token (refreshed ahead of
  expiry, once under concurrency; see gpucloud.tokens).
* Offers join ``/instance-types`` (prices) with ``/instance-availability``
  (where each type can be launched now; _offers.py); spot is a separate
  availability list and ``spot_price``. Create sends ``is_spot`` accordingly.
* ``POST /instances`` answers with the new id as plain text. There is no
  idempotency key, so the launch id and the deadline travel in the
  instance description, where ``list_instances`` reads them back. The
  description cannot be changed: ``extend`` writes instance tags (Go SDK,
  _deadline.py) and reads take the latest copy.
* A job (spec.job) runs from a start-up script (``POST /scripts``, then
  ``startup_script_id``; _startup.py): the container with all GPUs under
  max_runtime, then power-off. The script is deleted right after the launch.
* SSH keys are referred to by id; a public key is registered once (matched by
  its key text) and reused. The API accepts a launch without keys, but such a
  VM cannot be logged in to, so gpucloud requires one (needs_ssh_key).
* Terminate is ``PUT /instances {"action": "delete"}``. Shutdown/start exist
  as actions but the Provider protocol has no stop/start yet: stop_start=False.
* Volumes are Verda's shared filesystems (_volumes.py): listed, created
  (type NVMe_Shared) and deleted for good (``is_permanent``: one in the
  trash is kept, and gpucloud could no longer see it). A job's volumes are
  attached at launch (``existing_volumes``) and mounted by its start-up
  script.
* No rate limits are documented.
"""

from __future__ import annotations


import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from gpucloud.errors import (
    ConfigurationError, CredentialsError, SpecError, option,
)
from gpucloud.models import (
    Instance, InstanceSpec, InstanceStatus, JobRun, Offer, Volume, VolumeSpec,
)
from gpucloud.transport.tokens import RefreshingTokenAuth
from gpucloud.providers.base import Capabilities, Flow, OfferQuery, Provider, _user_agent
from gpucloud.providers.account_objects import (
    found_or_made, key_fields, key_id_among, key_id_named, key_name,
)
from gpucloud.providers.verda import _deadline, _offers, _startup, _volumes
from gpucloud.providers.verda import _wire as wire
from gpucloud.providers._name_marker import latest

if TYPE_CHECKING:
    from gpucloud.catalog.bundled import ProviderCatalog
    from gpucloud.config.credentials import Credential


MIN_OS_VOLUME_GB = 50  # dstack: Verda images need 50 GB


class VerdaProvider(Provider):
    name = "verda"
    # Instance ids are UUIDs (the API reference's examples).
    create_reads_back = True  # a GET by the replied id, see create()
    id_format = wire.UUID  # the form instance_id() reads replies with
    capabilities = Capabilities(jobs=True, spot=True, stop_start=False, custom_disk=True,
                                needs_ssh_key=True, native_shutdown=False,
                                volumes=True, multi_node="batch", shared_volumes=True)
    # None documented (the official Go SDK, verdacloud-sdk-go, retries
    # 408/429/5xx): only 429s pace it.
    rate_limits = {}
    errors = wire.ERRORS
    error_fields = staticmethod(wire.error_fields)

    def __init__(self, catalog: ProviderCatalog, credential: Credential | None = None) -> None:
        super().__init__(catalog, credential)
        self._auth: RefreshingTokenAuth | None = None
        self._auth_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"VerdaProvider(credential={self.credential!r})"

    # -- plumbing ----------------------------------------------------------------

    def auth(self) -> RefreshingTokenAuth | None:
        """One token for every session of this provider (None without a credential)."""
        if self.credential is None:
            return None
        with self._auth_lock:
            if self._auth is None:
                if not self.credential.client_id:
                    from gpucloud.config.credentials import how_to_set

                    raise CredentialsError("verda needs a client id and a client secret",
                                           hint=how_to_set("verda", "oauth2"))
                source = wire.VerdaTokenSource(
                    self.base_url, self.credential.client_id, self.credential.secret,
                    self.map_error, headers={"User-Agent": _user_agent()})
                self._auth = RefreshingTokenAuth(source)
            return self._auth

    @property
    def token_expires_at(self) -> float | None:
        """When the current access token expires (epoch s), for `gpucloud auth status`."""
        return self._auth.token_expires_at if self._auth is not None else None

    # -- flows -------------------------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        return (yield from _offers.offers(self, query))

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        # Everything that can be refused locally is refused before any request.
        if not spec.image:
            raise SpecError("verda needs an OS image to launch",
                            hint=f"pass {option('image', '--image')} "
                                 "(e.g. ubuntu-24.04-cuda-12.8-open-docker)")
        if not spec.ssh_key_name and not spec.ssh_public_key:
            raise ConfigurationError(
                "verda needs an SSH key to launch (a VM without one cannot be logged in to)",
                hint=f"pass {option('ssh_key', '--ssh-key', repr('NAME_OR_PATH'), 'NAME_OR_PATH')} "
                     "or create ~/.ssh/id_ed25519.pub")
        if spec.disk_gb is not None and spec.disk_gb < MIN_OS_VOLUME_GB:
            raise SpecError(f"verda OS volumes are at least {MIN_OS_VOLUME_GB} GB; "
                            f"{spec.disk_gb} GB was asked for")
        key_id = yield from self._ssh_key_id(spec.ssh_key_name, spec.ssh_public_key)
        host = wire.hostname(spec.name, spec.launch_id)
        if spec.job is None:
            return (yield from self._launch(spec, key_id, host, None))
        mounts, setup = yield from _volumes.job_volumes(self, spec.job)
        # The job's runner is an account-level start-up script: created for this
        # launch and deleted once the launch is answered, whatever the answer
        # (it holds the job's secrets).
        script_id = yield from _startup.create_script(self, spec.launch_id, spec.job,
                                                      mounts, setup)
        try:
            instance = yield from self._launch(spec, key_id, host, script_id)
        except GeneratorExit:
            raise  # the flow is being closed: no request can be sent any more
        except BaseException:
            yield from _startup.delete_script(self, script_id)
            raise
        yield from _startup.delete_script(self, script_id)
        return instance

    def _launch(self, spec: InstanceSpec, key_id: str, host: str,
                script_id: str | None) -> Flow[Instance]:
        offer = spec.offer
        # The body sdk-python builds, field for field.
        body: dict[str, Any] = {
            "instance_type": offer.instance_type,
            "image": spec.image,
            "ssh_key_ids": [key_id],
            "startup_script_id": script_id,
            "hostname": host,
            "description": wire.describe(spec.launch_id, spec.shutdown_at, spec.batch),
            "location_code": offer.region,
            "os_volume": {"name": f"{host}-os", "size": spec.disk_gb} if spec.disk_gb else None,
            "volumes": [],
            # A job's volumes, attached at launch (its start-up script, or a
            # multi-node job's runner started over ssh, mounts them).
            "existing_volumes": [v.volume_id for v in
                                 (spec.job.volumes if spec.job is not None else spec.volumes)
                                 if v.volume_id],
            "is_spot": offer.spot,
            "coupon": None,
        }
        response = yield self.request("POST", "/instances", json=body, kind="launch")
        self.raise_for_error(response)
        instance_id = wire.instance_id(response)
        if instance_id is None:
            # Maybe created, maybe not: the launcher looks it up by launch id.
            raise self.invalid(response, "no instance id (a UUID) in the reply; the machine "
                                         f"may exist, look for launch id {spec.launch_id}")

        # The machine exists and is billed from here on (see read_back).
        return (yield from self.read_back(Instance(
            provider=self.name, id=instance_id, name=host, status=InstanceStatus.PENDING,
            gpu=offer.gpu, gpu_count=offer.gpu_count, instance_type=offer.instance_type,
            region=offer.region, price_per_hour=offer.price_per_hour,
            launch_id=spec.launch_id, shutdown_at=wire.parse_utc(
                wire.format_utc(spec.shutdown_at) if spec.shutdown_at else None))))

    def list_instances(self) -> Flow[list[Instance]]:
        response = yield self.request("GET", "/instances")
        return [self._instance(response, raw) for raw in self._body(response, list)]

    def get(self, instance_id: str) -> Flow[Instance]:
        response = yield self.request("GET", f"/instances/{quote(instance_id, safe='')}")
        return self._instance(response, self._body(response, dict))

    def delete(self, instance_id: str) -> Flow[None]:
        # The body sdk-python's action() sends, plus delete_permanently (dstack):
        # volume_ids null deletes the OS volume and detaches the rest.
        response = yield self.request(
            "PUT", "/instances", kind="idempotent",
            json={"id": [instance_id], "action": "delete", "volume_ids": None,
                  "delete_permanently": True})
        self.raise_for_error(response)
        if response.status_code == 207:  # multi-status: one item per id
            self._check_multi_status(response, instance_id)

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        """No description update exists: the moved deadline goes into instance
        tags (Go SDK; see _deadline.py)."""
        return (yield from _deadline.set_deadline(self, instance, shutdown_at))

    def verify(self) -> Flow[None]:
        # Getting a token proves the client pair; a cheap read proves it is usable.
        response = yield self.request("GET", "/locations")
        self._body(response, list)

    # -- volumes: requests and parsing in _volumes.py --------------------------------

    def node_mounts(self, job: JobRun) -> Flow[tuple[list[tuple[str, str]], list[str]]]:
        return (yield from _volumes.job_volumes(self, job))

    def list_volumes(self) -> Flow[list[Volume]]:
        return (yield from _volumes.list_volumes(self))

    def create_volume(self, spec: VolumeSpec) -> Flow[Volume]:
        return (yield from _volumes.create_volume(self, spec))

    def delete_volume(self, volume_id: str) -> Flow[None]:
        yield from _volumes.delete_volume(self, volume_id)

    # -- helpers -------------------------------------------------------------------

    def _body(self, response: httpx.Response, expected: type) -> Any:
        self.raise_for_error(response)
        body = self.json(response)
        if not isinstance(body, expected):
            raise self.invalid(response, f"the body is not a JSON {expected.__name__}")
        return body

    def _ssh_key_id(self, name: str | None, public_key: str | None) -> Flow[str]:
        """The id of a registered key: found by key text (or by name/id), else registered."""
        wanted = key_fields(public_key)
        if public_key is not None and len(wanted) < 2:
            raise ConfigurationError("the SSH public key is not 'TYPE BASE64 [comment]'")

        def find() -> Flow[str | None]:
            response = yield self.request("GET", "/sshkeys")
            keys = self._body(response, list)
            if not all(isinstance(k, dict) and wire.text(k.get("id")) for k in keys):
                raise self.invalid(response, "an SSH key entry without an id")
            if public_key is None:
                return key_id_named(keys, name, self.name)
            return key_id_among(keys, wanted, "key")

        def make() -> Flow[str]:
            assert public_key is not None  # find() returned or raised without one
            label = name or key_name(wanted)
            response = yield self.request("POST", "/sshkeys", kind="unsafe",
                                          json={"name": label, "key": public_key.strip()})
            self.raise_for_error(response)
            key_id = wire.plain_id(response)
            if key_id is None:
                raise self.invalid(response, "no SSH key id in the reply")
            return key_id
        return (yield from found_or_made(find, make))

    def _check_multi_status(self, response: httpx.Response, instance_id: str) -> None:
        items = self.json(response)
        if not isinstance(items, list):
            raise self.invalid(response, "a 207 reply that is not a list")
        for item in items:
            if not isinstance(item, dict):
                continue
            if item.get("instanceId", item.get("instance_id", item.get("id"))) != instance_id:
                continue
            status = item.get("statusCode")
            failed = item.get("error") or (isinstance(status, int) and status >= 400) \
                or str(item.get("status", "")).lower() in ("error", "failed")
            if not failed:
                return
            code = status if isinstance(status, int) and status >= 400 else 400
            detail = item.get("error")
            if isinstance(detail, dict):
                body = detail
            else:
                body = {"message": detail if isinstance(detail, str) and detail
                        else f"the delete action failed (status {item.get('status')!r})"}
            raise self.map_error(httpx.Response(code, json=body, request=response.request))
        raise self.invalid(response, f"the 207 reply does not mention {instance_id!r}")

    def _instance(self, response: httpx.Response, raw: Any) -> Instance:
        if not isinstance(raw, dict) or not wire.text(raw.get("id")) \
                or not wire.text(raw.get("status")):
            raise self.invalid(response, "an instance without id or status")
        gpu_block = raw.get("gpu") if isinstance(raw.get("gpu"), dict) else {}
        count = wire.integer(gpu_block.get("number_of_gpus"))
        total_memory = wire.size_gb(raw.get("gpu_memory"))
        gpu = _offers.gpu_name(raw, total_memory // count if total_memory and count else None) \
            if count else None
        description = raw.get("description")
        if description is not None and not isinstance(description, str):
            # The description holds the launch id: never guess past a garbled one.
            raise self.invalid(response, f"instance {raw['id']!r}: description is not text")
        launch_id, deadline = wire.read_description(description)
        status = raw["status"]
        try:
            return Instance(
                provider=self.name, id=raw["id"], name=wire.text(raw.get("hostname")),
                status=wire.STATUS.get(status, InstanceStatus.UNKNOWN), provider_status=status,
                gpu=gpu, gpu_count=count, instance_type=wire.text(raw.get("instance_type")),
                region=wire.text(raw.get("location")),
                price_per_hour=wire.money(raw.get("price_per_hour")),
                ip=wire.text(raw.get("ip")), created_at=wire.parse_utc(raw.get("created_at")),
                connection=wire.connection_of(raw),
                launch_id=launch_id, batch=wire.read_batch(description),
                shutdown_at=latest(deadline, *_deadline.tag_deadlines(raw.get("tags")).values()),
            )
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError included
            raise self.invalid(response, f"instance {raw['id']!r}: {exc}") from exc

    def redact(self, text: str) -> str:
        # Tokens too: the client secret is not the only thing worth hiding here.
        text = super().redact(text)
        return self._auth.redact(text) if self._auth is not None else text


__all__ = ["VerdaProvider"]
