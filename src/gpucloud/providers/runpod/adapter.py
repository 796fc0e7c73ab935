"""RunPod (runpod.io), REST API v2.

Contract: RunPod's OpenAPI 3.1 document, version 2.0.0 (tests/fixtures/runpod/
openapi-v2.json is the trimmed copy every test request is validated against).
Base ``https://api.runpod.io``, every path under ``/v2``. REST v1 was retired
on 2026-11-15 and is not used, not even as a fallback.

What shapes this adapter:

* RunPod rents GPU *pods* (containers): the image is a container image, the
  container disk size is free, and a pod can be stopped (disk kept) and
  started again. v2 has no spot/interruptible field, so no spot offers.
* Offers come from ``GET /v2/catalog/gpus`` with ``include=AVAILABILITY``
  (which needs ``product=POD``), per GPU count and per cloud (_offers.py):
  availability differs between SECURE (RunPod's data centers) and COMMUNITY
  (hosted) machines, so the community list is read only when a matching GPU
  is sold there. Prices are per GPU; an offer is priced for the whole pod.
* Instance types are named ``"<count>x <GpuType id>"`` (``" (community)"``
  appended for the community cloud), the same names as providers/runpod.toml;
  regions are data-center ids. So create() needs nothing but the offer.
* No idempotency key: the launch id and the deadline travel in the pod's
  ``env``, which every pod read returns, for reconcile and ``gpucloud reap``.
  An SSH key travels as ``env.PUBLIC_KEY`` (RunPod images' convention), so
  the account's key set is never rewritten. ``extend`` renames the pod with a
  deadline marker (never PATCH env: that restarts the pod, see set_deadline);
  reads take the later of env and marker.
* A job (spec.job) is a pod of the job's image whose command runs wrapped
  (_jobscript.py): at its end, or at max_runtime, the pod stops itself with
  the pod-scoped key RunPod injects (``runpodctl stop pod $RUNPOD_POD_ID``;
  unverified live). The reaper terminates the stopped pod at the deadline.
* Errors are RFC 9457 problem bodies without machine codes; "no capacity" is
  a 400 recognised only from its ``detail`` text. On createPod the contract's
  table says a 400 is "try your next candidate" and a 403 "cannot access the
  requested pool, skip this candidate": both are OfferRefusedError there, so
  failover moves on; elsewhere they keep their usual meaning.
* A multi-node job is one Instant Cluster (``POST /v2/clusters``, cluster.py):
  the job's id is the cluster's; its member pods are listed with the pods
  (``includeClusterPods``) so the reaper sees them, and since RunPod refuses
  to delete a member pod (409) a node past its deadline ends its whole
  cluster. Network volumes are ``/v2/network-volumes`` (volumes.py).
* Rate limits are windowed quotas (60/minute, ...), not a spacing: nothing is
  paced here; the driver honours ``Retry-After`` on a 429.
"""

from __future__ import annotations

import logging
import re
from decimal import Decimal
from datetime import datetime
from typing import Any

import httpx

from gpucloud.errors import (
    APIResponseValidationError,
    SpecError,
    option,
)
from gpucloud.models import (
    Instance, InstanceSpec, InstanceStatus, Job, Offer, Volume, VolumeSpec,
)
from gpucloud.providers import _batch_mark as batch_mark
from gpucloud.providers.runpod import _offers, _wire as wire, cluster as clusters, volumes
from gpucloud.providers._jobscript import (
    RUNPOD_STOP, EndAction, container_env, container_script, secret_values,
)
from gpucloud.providers._name_marker import latest, mark_name, split_name
from gpucloud.providers.base import (
    JOB_PREFIX, Capabilities, Flow, OfferQuery, Provider, format_utc, job_of, parse_utc,
)

LAUNCH_ID_ENV = "GPUCLOUD_LAUNCH_ID"
SHUTDOWN_AT_ENV = "GPUCLOUD_SHUTDOWN_AT"
SSH_KEY_ENV = "PUBLIC_KEY"  # read by RunPod images to set up sshd
JOB_SCRIPT_ENV = "GPUCLOUD_JOB"
# v2's args is one string "passed to the container entrypoint"; RunPod's docs
# quote it shell-style (`--args "bash -c '...'"`). Kept this short so that its
# quoting is the only thing depending on how RunPod splits it.
JOB_ARGS = f"sh -c 'eval \"${JOB_SCRIPT_ENV}\"'"

log = logging.getLogger("gpucloud.runpod")


class RunPodProvider(Provider):
    name = "runpod"
    # Pod ids: lowercase letters and digits ("xedezhzb9la3ye", "30zmvf89kd" in the
    # REST API's OpenAPI examples).
    id_format = re.compile(r"[a-z0-9]{8,32}")
    capabilities = Capabilities(jobs=True, spot=False, stop_start=True, custom_disk=True,
                                needs_ssh_key=False, native_shutdown=False,
                                multi_node="native", volumes=True)
    # No static limits: the quota is per user in minute/hour/day windows that
    # each account's responses state (RateLimit-Policy; the spec's 60/min,
    # 3000/h, 50000/day are example values), and a 429 carries Retry-After,
    # which the shared limiter honours (RunPod's REST v2 OpenAPI 2.0.0,
    # https://api.runpod.io/v2/openapi.json).
    rate_limits = {}
    errors = wire.ERRORS
    error_fields = staticmethod(wire.error_fields)

    # -- flows -----------------------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        return (yield from _offers.offers(self, query))

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        offer = spec.offer
        gpu_type, community = self._type_of(offer)
        container = self._container(spec, RUNPOD_STOP)
        env = container["env"]
        body: dict[str, Any] = {
            "name": spec.name,
            "gpu": {"id": gpu_type, "count": offer.gpu_count},
            # Sent explicitly: the spec's default (SECURE) is contested elsewhere.
            "cloud": "COMMUNITY" if community else "SECURE",
            "dataCenterIds": [offer.region],
            **container,
        }

        response = yield self.request("POST", "/v2/pods", json=body, kind="launch",
                                      secrets=secret_values(spec.job) if spec.job else ())
        raw = self._object(response)
        if not wire.text(raw.get("id")):
            raise self.invalid(response, "no pod id in the create response")
        # The pod exists and is billed from here on: a reply we cannot fully
        # read must still come back as created, or the caller would launch again.
        try:
            return self._instance(response, raw)
        except APIResponseValidationError as exc:
            log.warning("runpod: created pod %s but could not read it: %s", raw["id"], exc)
            return Instance(
                provider=self.name, id=raw["id"], name=spec.name, status=InstanceStatus.PENDING,
                gpu=offer.gpu, gpu_count=offer.gpu_count, instance_type=offer.instance_type,
                region=offer.region, price_per_hour=offer.price_per_hour,
                launch_id=spec.launch_id, shutdown_at=parse_utc(env.get(SHUTDOWN_AT_ENV)))

    def list_instances(self) -> Flow[list[Instance]]:
        # With a cluster's member pods, which GET /v2/pods leaves out by
        # default: they are billed machines, and the reaper ends them.
        response = yield from self._pods()
        return [self._instance(response, raw) for raw in self._field(response, "pods")]

    def get(self, instance_id: str) -> Flow[Instance]:
        response = yield self.request("GET", wire.pod_path(instance_id))
        return self._instance(response, self._object(response))

    def delete(self, instance_id: str) -> Flow[None]:
        response = yield self.request("DELETE", wire.pod_path(instance_id), kind="idempotent")
        self.raise_for_error(response)  # a cluster's node: 409, see wire.ERRORS

    def delete_expired(self, instance: Instance) -> Flow[bool]:
        """A node of a cluster past its deadline ends the whole cluster: the
        deadline is the job's, and RunPod deletes no single member pod."""
        response = yield self.request("DELETE", wire.pod_path(instance.id), kind="idempotent")
        if response.status_code == 409:
            yield from clusters.delete_cluster_of(self, instance.id, response)
            return True
        self.raise_for_error(response)
        return True

    def stop(self, instance_id: str) -> Flow[Instance]:
        """Stop a pod: compute is released and no longer billed, its disk is kept."""
        return (yield from self._action(instance_id, "stop", {"EXITED"}))

    def start(self, instance_id: str) -> Flow[Instance]:
        return (yield from self._action(instance_id, "start", {"PROVISIONING", "STARTING",
                                                              "RUNNING"}))

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        """PATCH the pod's *name* only: RunPod's docs say an env change restarts the
        pod and clears everything outside the volume, so env keeps the original
        deadline and the moved one goes into the name as a marker."""
        response = yield self.request("PATCH", wire.pod_path(instance.id), kind="idempotent",
                                      json={"name": mark_name(instance.name, shutdown_at)})
        return self._instance(response, self._object(response))

    # -- jobs: one pod, or an Instant Cluster for several nodes -----------------------

    def submit_job(self, spec: InstanceSpec) -> Flow[Job]:
        if spec.job is None or spec.job.nodes <= 1:
            instance = yield from self.create(spec)
            return job_of(instance)
        return (yield from clusters.create(self, spec))

    def get_job(self, job_id: str) -> Flow[Job]:
        """A pod's job, else the cluster's (a multi-node job's id is its cluster's;
        a member pod's id leads to its cluster too)."""
        response = yield self.request("GET", wire.pod_path(job_id))
        if response.status_code == 404:
            return (yield from clusters.cluster_job(self, job_id))
        raw = self._object(response)
        cluster_id = clusters.cluster_of(raw)
        if cluster_id is not None:
            return (yield from clusters.cluster_job(self, cluster_id))
        return job_of(self._instance(response, raw))

    def list_jobs(self) -> Flow[list[Job]]:
        response = yield from self._pods()
        jobs: list[Job] = []
        members: dict[str, list[Instance]] = {}
        for raw in sorted(self._field(response, "pods"), key=clusters.rank_of):
            instance = self._instance(response, raw)
            cluster_id = clusters.cluster_of(raw)
            if cluster_id is not None:
                members.setdefault(cluster_id, []).append(instance)
            elif (instance.launch_id or "").startswith(JOB_PREFIX):
                jobs.append(job_of(instance))
        return jobs + (yield from clusters.cluster_jobs(self, members))

    def cancel_job(self, job_id: str) -> Flow[None]:
        """Delete the pod, else the cluster with every node (a member pod's id
        cancels its whole cluster: RunPod deletes no single member)."""
        response = yield self.request("DELETE", wire.pod_path(job_id), kind="idempotent")
        if response.status_code == 404:
            yield from clusters.delete_cluster(self, job_id)
            return
        if response.status_code == 409:
            yield from clusters.delete_cluster_of(self, job_id, response)
            return
        self.raise_for_error(response)

    # -- network volumes: requests and parsing in volumes.py -------------------------

    def volume_rate(self, size_gb: int) -> Decimal | None:
        return volumes.new_volume_rate(size_gb)

    def list_volumes(self) -> Flow[list[Volume]]:
        return (yield from volumes.list_volumes(self))

    def create_volume(self, spec: VolumeSpec) -> Flow[Volume]:
        return (yield from volumes.create_volume(self, spec))

    def delete_volume(self, volume_id: str) -> Flow[None]:
        yield from volumes.delete_volume(self, volume_id)

    def verify(self) -> Flow[None]:
        response = yield self.request("GET", "/v2/pods")
        self._field(response, "pods")

    # -- helpers -------------------------------------------------------------------

    @staticmethod
    def takes_nodes(offer: Offer) -> bool:
        # An Instant Cluster runs on the secure cloud only (createCluster has no
        # cloud field), so the planner never picks a community type for one.
        match = wire.TYPE_NAME.fullmatch(offer.instance_type)
        return match is not None and not match.group(3)

    def _type_of(self, offer: Offer) -> tuple[str, bool]:
        """(GPU type id, community cloud) of an offer's instance type."""
        match = wire.TYPE_NAME.fullmatch(offer.instance_type)
        if match is None or int(match.group(1)) != offer.gpu_count:
            raise SpecError(f"not a RunPod instance type: {offer.instance_type!r}",
                            hint="RunPod types are named '<count>x <GPU type id>', "
                                 "see `gpucloud offers --provider runpod`")
        return match.group(2), bool(match.group(3))

    def _container(self, spec: InstanceSpec, end: EndAction, prelude: str = "") -> dict[str, Any]:
        """What a pod create and a cluster create share: image, env, args,
        ports, disk, mounts, SSH. ``prelude`` runs before the job's wrapper."""
        image = spec.job.image if spec.job else spec.image or self.catalog.default_image
        if not image:
            raise SpecError("RunPod pods need a container image",
                            hint=f"pass {option('image', '--image')}")
        env: dict[str, str] = {}
        container: dict[str, Any] = {"image": image, "ports": ["22/tcp"],  # ssh.direct needs it
                                     "env": env}
        if spec.job is not None:
            # The job's command runs wrapped (the script travels in env, args
            # only evaluates it): when it ends, ``end`` runs (a pod stops
            # itself), or RunPod would restart the exited container in a loop.
            env.update(container_env(spec.job))
            shebang, rest = container_script(spec.job, end, self.name).split("\n", 1)
            env[JOB_SCRIPT_ENV] = f"{shebang}\n{prelude}{rest}"
            container["args"] = JOB_ARGS
            mounts = volumes.mounts(spec.job.volumes, spec.job.name)
            if mounts is not None:
                container["mounts"] = mounts
        env[LAUNCH_ID_ENV] = spec.launch_id
        if spec.batch:
            env[batch_mark.ENV] = spec.batch
        if spec.shutdown_at is not None:
            env[SHUTDOWN_AT_ENV] = format_utc(spec.shutdown_at)
        if spec.disk_gb is not None:
            container["disk"] = spec.disk_gb
        if spec.ssh_public_key:
            env[SSH_KEY_ENV] = spec.ssh_public_key.strip()
        else:
            # No key file: let RunPod inject the account's registered keys, if any.
            container["startSsh"] = True
        return container

    def _pods(self) -> Flow[httpx.Response]:
        response: httpx.Response = yield self.request(
            "GET", "/v2/pods", params={"includeClusterPods": "true"})
        return response

    def _action(self, instance_id: str, action: str, done: set[str]) -> Flow[Instance]:
        # Repeating stop or start has the same effect (or a 409): idempotent.
        response = yield self.request("POST", wire.pod_path(instance_id) + "/action",
                                      json={"action": action}, kind="idempotent")
        if response.status_code == 409:
            # Not valid in the current status. When the pod is already where
            # the action leads (a retry that had gone through), that is success.
            current = yield from self.get(instance_id)
            if current.provider_status in done:
                return current
            raise self.map_error(response)
        return self._instance(response, self._object(response))

    def _object(self, response: httpx.Response) -> dict[str, Any]:
        self.raise_for_error(response)
        body = self.json(response)
        if not isinstance(body, dict):
            raise self.invalid(response, "the body is not a JSON object")
        return body

    def _field(self, response: httpx.Response, key: str) -> list[Any]:
        """The list every v2 list endpoint wraps: ``{"pods": [...]}``."""
        value = self._object(response).get(key)
        if not isinstance(value, list):
            raise self.invalid(response, f"no {key!r} list in the body")
        return value

    def _instance(self, response: httpx.Response, raw: Any) -> Instance:
        if not isinstance(raw, dict) or not wire.text(raw.get("id")) \
                or not wire.text(raw.get("status")):
            raise self.invalid(response, "a pod without id or status")
        gpu = raw.get("gpu") if isinstance(raw.get("gpu"), dict) else {}
        env = raw.get("env") if raw.get("env") is not None else {}
        if not isinstance(env, dict):  # env carries the launch id: never guess past it
            raise self.invalid(response, f"pod {raw['id']!r}: env is not an object")
        gpu_id = wire.text(gpu.get("id"))
        count = gpu.get("count", 1) if gpu_id else None
        itype = None
        if gpu_id and wire.is_int(count):
            itype = f"{count}x {gpu_id}" + (
                wire.COMMUNITY_SUFFIX if raw.get("cloud") == "COMMUNITY" else "")
        cost = raw.get("cost")
        status = raw["status"]
        # env holds the deadline set at create; an extend renames the pod (an env
        # change would restart it): the later of the two counts.
        name, extended = split_name(wire.text(raw.get("name")))
        try:
            return Instance(
                provider=self.name, id=raw["id"], name=name,
                status=wire.STATUS.get(status, InstanceStatus.UNKNOWN), provider_status=status,
                gpu=_offers.gpu_of(gpu) if gpu_id else None,
                gpu_count=count if wire.is_int(count) else None, instance_type=itype,
                region=wire.text(raw.get("dataCenterId")),
                price_per_hour=wire.money(cost) if wire.is_number(cost) else None,
                ip=wire.ip_of(raw), private_ip=wire.cluster_ip(raw),
                created_at=parse_utc(raw.get("createdAt")),
                connection=wire.connection_of(raw),
                shutdown_at=latest(parse_utc(env.get(SHUTDOWN_AT_ENV)), extended),
                launch_id=wire.text(env.get(LAUNCH_ID_ENV)),
            )
        except ValueError as exc:  # pydantic's ValidationError included
            raise self.invalid(response, f"pod {raw['id']!r}: {exc}") from exc



__all__ = ["LAUNCH_ID_ENV", "SHUTDOWN_AT_ENV", "RunPodProvider"]
