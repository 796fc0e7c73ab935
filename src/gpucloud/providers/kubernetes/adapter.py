"""Kubernetes (any conformant cluster; CoreWeave is a preset), over REST.

The REST paths, labels and annotation are listed in the project's Kubernetes
path sheet (docs/providers/kubernetes.md): pods are machines, batch/v1
Jobs are jobs, everything carries ``app.kubernetes.io/managed-by: gpucloud``
and ``gpucloud.dev/launch-id``; the deadline is the
``gpucloud.dev/shutdown-at`` annotation. The cluster, the namespace and who
we are come from kubeconfig (_kubeconfig.py); exec-plugin tokens refresh
through the engine's RefreshingTokenAuth (_exec.py).

Multi-node jobs are Indexed Jobs with a headless Service; volumes are
PersistentVolumeClaims (_volumes.py).

Offers are live: per GPU model (a node label), the nodes' allocatable
``nvidia.com/gpu`` minus what running pods hold. Prices are contractual: from
config.toml or the provider's catalog file, else unknown (price 0 in the
offer, which estimates show as unknown and caps refuse).
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from gpucloud.errors import (
    APIError,
    CredentialsError,
    InsufficientCapacityError,
    PermissionDeniedError,
    SpecError,
    option,
)
from gpucloud.catalog.gpus import gpu_info
from gpucloud.models import Connection, ExecResult, Instance, InstanceSpec, InstanceStatus
from gpucloud.models import Offer
from gpucloud.providers.base import (
    JOB_PREFIX, Capabilities, Flow, OfferQuery, Provider, format_utc, parse_utc,
)
from gpucloud.providers.kubernetes import _kubeconfig, _offers, _pages, _settings
from gpucloud.providers.kubernetes import _wire as wire
from gpucloud.providers.kubernetes._jobs import SELECTOR, KubernetesJobs
from gpucloud.providers.kubernetes._manifests import pod_manifest
from gpucloud.providers.kubernetes._volumes import KubernetesVolumes
from gpucloud.providers.kubernetes._tokens import check_ttl

LIVE_PHASES = "status.phase!=Succeeded,status.phase!=Failed"
MIN_TOKEN_TTL = 600  # TokenRequest's minimum expirationSeconds

if TYPE_CHECKING:
    from gpucloud.catalog.bundled import ProviderCatalog
    from gpucloud.config.credentials import Credential


class KubernetesProvider(KubernetesJobs, KubernetesVolumes, Provider):
    name = "kubernetes"
    # multi_node native: an Indexed Job places every node itself (_manifests.py);
    # volumes: PersistentVolumeClaims (_volumes.py).
    capabilities = Capabilities(jobs=True, spot=False, stop_start=False, custom_disk=False,
                                needs_ssh_key=False, native_shutdown=False,
                                multi_node="native", volumes=True)
    # None in the API: the API server sheds load itself (429 TooManyRequests
    # + Retry-After, StatusReasonTooManyRequests in k8s.io/apimachinery
    # pkg/apis/meta/v1), which the shared limiter honours; client-go's QPS 5 /
    # burst 10 is a client default, not a server limit.
    rate_limits = {}
    default_gpu_labels: tuple[str, ...] = _settings.DEFAULT_GPU_LABELS
    # Items per list request (`limit`); None lists everything in one response.
    page_size: int | None = _pages.PAGE_SIZE

    def __init__(self, catalog: ProviderCatalog, credential: Credential | None = None) -> None:
        super().__init__(catalog, credential)
        self._target: _kubeconfig.KubeTarget | None = None
        self._settings: _settings.Settings | None = None
        self._auth: httpx.Auth | None = None
        self._ssl: Any = None

    # -- configuration -----------------------------------------------------------

    @property
    def settings(self) -> _settings.Settings:
        if self._settings is None:
            self._settings = _settings.load(self.name, self.default_gpu_labels)
        return self._settings

    @property
    def target(self) -> _kubeconfig.KubeTarget:
        if self._target is None:
            path = self.credential.client_id if self.credential is not None else None
            if not path:
                from gpucloud.config.credentials import how_to_set

                raise CredentialsError(f"no kubeconfig for {self.name}",
                                       hint=how_to_set(self.name, "kubeconfig"))
            # The path(s) KUBECONFIG lists, merged as kubectl merges them.
            self._target = _kubeconfig.load(path, self.settings.context)
        return self._target

    @property
    def namespace(self) -> str:
        return self.settings.namespace or self.target.namespace

    @property
    def base_url(self) -> str:
        return self.target.server

    def auth(self) -> httpx.Auth | None:
        if self._auth is None:
            target = self.target
            if target.exec is not None:
                from gpucloud.providers.kubernetes._exec import ExecAuth, ExecTokenSource

                secure = self.base_url.startswith("https:")
                self._auth = ExecAuth(ExecTokenSource(
                    target.exec, target=target,
                    on_certificate=self._use_client_certificate if secure else None))
            else:
                token = target.static_token()
                if token is not None:
                    from gpucloud.config.credentials import BearerAuth

                    self._auth = BearerAuth(token)
        return self._auth

    def _use_client_certificate(self, cert: bytes, key: bytes) -> None:
        """An exec plugin's certificate: presented by every new connection from now
        (one SSLContext serves all this adapter's clients)."""
        _kubeconfig.load_cert_chain(self._verify(), (None, cert), (None, key),
                                    what="the exec plugin's")

    def _verify(self) -> Any:
        if not self.base_url.startswith("https:"):
            return True
        if self._ssl is None:
            self._ssl = self.target.ssl_context()
        return self._ssl

    def proxy(self) -> str | None:
        """The proxy to the API server: proxy-url, else the environment (_transport.py)."""
        import os

        from gpucloud.providers.kubernetes._transport import proxy_for

        return proxy_for(self.target, os.environ)

    def identity_headers(self) -> list[tuple[str, str]]:
        """Impersonate-* headers for the kubeconfig's ``as`` (none without it)."""
        from gpucloud.providers.kubernetes._transport import impersonation_headers

        who = self.target.impersonate
        return impersonation_headers(who) if who is not None else []

    def transport(self) -> httpx.BaseTransport | None:
        from gpucloud.providers.kubernetes._transport import KubeTransport

        return KubeTransport(self.target, self._verify(), self.proxy())

    def async_transport(self) -> httpx.AsyncBaseTransport | None:
        from gpucloud.providers.kubernetes._transport import AsyncKubeTransport

        return AsyncKubeTransport(self.target, self._verify(), self.proxy())

    def redact(self, text: str) -> str:
        text = super().redact(text)  # the kubeconfig credential and any job secret
        auth = self._auth
        if auth is not None and hasattr(auth, "redact"):
            text = auth.redact(text)
        token = self._target.token if self._target is not None else None
        if token is not None and token.get_secret_value():
            text = text.replace(token.get_secret_value(), "[secure]")
        return text

    def _ns(self, path: str) -> str:
        return f"/namespaces/{quote(self.namespace, safe='')}{path}"

    # -- errors ----------------------------------------------------------------------

    errors = wire.ERRORS
    error_fields = staticmethod(wire.error_fields)

    def hint_fields(self) -> dict[str, str]:
        return {"context": self.target.context, "namespace": self.namespace}

    def _body(self, response: httpx.Response) -> Any:
        self.raise_for_error(response)
        return self.json(response)

    # -- offers -------------------------------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        region = self.target.context
        if query.spot or (query.region is not None and query.region != region):
            return []
        # Each page of nodes and pods is folded into per-node figures and dropped:
        # a cluster of thousands of nodes is never held as a whole list (_pages.py).
        labels = self.settings.gpu_labels
        nodes: dict[str, tuple[str, int]] = yield from _pages.fold(
            self, "/api/v1/nodes", {}, dict,
            lambda acc, page: _offers.add_gpu_nodes(acc, page, labels))
        used: dict[str, int] | None
        try:
            used = yield from _pages.fold(self, "/api/v1/pods", {"fieldSelector": LIVE_PHASES},
                                          dict, wire.add_pod_gpus)
        except PermissionDeniedError:
            used = None  # a namespaced account may not list every pod: free is unknown
        out = []
        for model, (allocatable, free) in sorted(_offers.by_model(nodes, used).items()):
            gpu = wire.gpu_name(model)
            if query.gpu is not None and gpu != query.gpu:
                continue
            counts = [query.count] if query.count else _offers.sizes(allocatable)
            per_gpu = _offers.price(self.settings.prices, self.catalog, model, gpu)
            info = gpu_info(gpu)
            for count in counts:
                if count > allocatable:
                    continue
                out.append(Offer(
                    provider=self.name, instance_type=model, region=region, gpu=gpu,
                    gpu_count=count, gpu_memory_gb=info.memory_gb if info else None,
                    price_per_hour=per_gpu * count if per_gpu is not None else Decimal(0),
                    available=None if free is None else free >= count, source="live",
                    as_of=self.catalog.as_of))
        return out

    # -- machines (pods) ------------------------------------------------------------

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        image = spec.image or self.catalog.default_image
        if not image:
            raise SpecError(f"{self.name} needs a container image",
                            hint=f"pass {option('image', '--image')}")
        body = pod_manifest(spec, namespace=self.namespace, gpu_label=self._label(),
                            image=image)
        self._place(body["spec"], spec.offer.instance_type)
        response = yield self.request("POST", "/api/v1" + self._ns("/pods"),
                                      json=body, kind="launch")
        return self._instance(self._body(response))

    def _label(self) -> str:
        return self.settings.gpu_labels[0]

    def _place(self, pod_spec: dict[str, Any], value: str) -> None:
        """With several candidate labels, any of them may name the model: node
        selector terms are ORed, one per label."""
        terms = [{"matchExpressions": [{"key": label, "operator": "In", "values": [value]}]}
                 for label in self.settings.gpu_labels]
        (pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
         ["nodeSelectorTerms"]) = terms

    def list_instances(self) -> Flow[list[Instance]]:
        return (yield from _pages.fold(self, "/api/v1" + self._ns("/pods"),
                                       {"labelSelector": SELECTOR}, list, self._add_machines))

    def _add_machines(self, machines: list[Instance], pods: list[dict[str, Any]]) -> None:
        # A job's pods belong to its Job (jobs list them): deleting one as a
        # "machine" would only make the Job controller start another.
        machines.extend(self._instance(p) for p in pods
                        if not wire.labels(p).get(wire.LAUNCH_ID, "").startswith(JOB_PREFIX)
                        and wire.JOB_NAME not in wire.labels(p))

    def get(self, instance_id: str) -> Flow[Instance]:
        response = yield self.request("GET", "/api/v1" + self._ns(f"/pods/{quote(instance_id)}"))
        return self._instance(self._body(response))

    def delete(self, instance_id: str) -> Flow[None]:
        response = yield self.request("DELETE",
                                      "/api/v1" + self._ns(f"/pods/{quote(instance_id)}"))
        self.raise_for_error(response)

    def delete_expired(self, instance: Instance) -> Flow[bool]:
        """Delete a pod only as it was when its deadline was checked: the pod is
        read, its deadline annotation checked again, and the DELETE carries
        DeleteOptions.preconditions.resourceVersion of that read, so an extend
        (a PATCH, which changes resourceVersion) landing in between makes the
        apiserver refuse the delete with 409 Conflict instead of the pod dying
        (Kubernetes API reference, DeleteOptions: "Must be fulfilled before a
        deletion is carried out. If not possible, a 409 Conflict status will
        be returned.")."""
        from gpucloud.safety.journal import utcnow

        response = yield self.request("GET", "/api/v1" + self._ns(f"/pods/{quote(instance.id)}"))
        pod = self._body(response)
        deadline = self._instance(pod).shutdown_at
        if deadline is None or deadline > utcnow():
            return False
        meta = wire.meta(pod)
        options = {"kind": "DeleteOptions", "apiVersion": "v1",
                   "preconditions": {"uid": meta.get("uid"),
                                     "resourceVersion": meta.get("resourceVersion")}}
        request = self.request("DELETE", "/api/v1" + self._ns(f"/pods/{quote(instance.id)}"),
                               json=options)
        response = yield request
        if response.status_code == 409:
            return False  # changed since the read: the next pass reads it again
        self.raise_for_error(response)
        return True

    def exec_command(self, instance_id: str, command: str, timeout: float) -> ExecResult:
        """`command` in the pod's main container through the exec API (_podexec.py)."""
        from gpucloud.providers.kubernetes._podexec import run

        return run(self, instance_id, command, timeout)

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        if (instance.launch_id or "").startswith(JOB_PREFIX):
            raise SpecError(f"{instance.ref} belongs to a Kubernetes Job, whose deadline "
                            "(activeDeadlineSeconds) cannot be moved later",
                            hint="submit the job again with a longer max_runtime")
        patch = {"metadata": {"annotations": {wire.SHUTDOWN_AT: format_utc(shutdown_at)}}}
        request = self.request("PATCH", "/api/v1" + self._ns(f"/pods/{quote(instance.id)}"),
                               json=patch, kind="idempotent")
        request.headers["Content-Type"] = "application/merge-patch+json"
        return self._instance(self._body((yield request)))

    def wait_refusal(self, instance: Instance, waited: float) -> APIError | None:
        """End `create --wait` on a pod the scheduler has not placed for
        unschedulable_timeout seconds: no capacity, with the scheduler's words."""
        word = instance.provider_status or ""
        if (instance.status != InstanceStatus.PENDING or not word.startswith(wire.UNSCHEDULABLE)
                or waited < self.settings.unschedulable_timeout):
            return None
        message = word.partition(": ")[2] or word
        return InsufficientCapacityError(
            f"{self.name}: {instance.ref} could not be scheduled after {int(waited)} s: "
            f"{message}", provider=self.name, status_code=200, provider_code=wire.UNSCHEDULABLE,
            hint=f"the pod is still queued and starts (and bills) once capacity frees up: "
                 f"`gpucloud delete {instance.ref}` removes it; unschedulable_timeout in "
                 f"config.toml [{self.name}] sets how long to wait")

    def _instance(self, pod: Any) -> Instance:
        if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod":
            raise TypeError("not a Pod")
        meta, spec = wire.meta(pod), pod.get("spec") or {}
        status, word = wire.pod_state(pod)
        model = next((v for v in (wire.selected_gpu(spec, k) for k in self.settings.gpu_labels)
                      if v), None)
        gpus = wire.pod_gpus(pod)
        gpu = wire.gpu_name(model) if model else None
        per_gpu = _offers.price(self.settings.prices, self.catalog, model, gpu) \
            if model and gpu else None
        notes, marks = wire.notes(pod), wire.labels(pod)
        return Instance(
            provider=self.name, id=str(meta["name"]), name=notes.get(wire.NAME) or meta["name"],
            status=status, provider_status=word, gpu=gpu, gpu_count=gpus,
            instance_type=model, region=self.target.context,
            price_per_hour=per_gpu * gpus if per_gpu is not None else None,
            ip=(pod.get("status") or {}).get("podIP") or None,
            created_at=parse_utc(meta.get("creationTimestamp")),
            shutdown_at=parse_utc(notes.get(wire.SHUTDOWN_AT)),
            launch_id=marks.get(wire.LAUNCH_ID),
            # Reached through the API's exec (no SSH daemon in the pod), once it runs.
            connection=Connection(method="api") if status == InstanceStatus.RUNNING else None)

    # -- short-lived tokens --------------------------------------------------------------

    # The token lifetime's bounds, checked before anything else is asked of
    # the cluster (or of the credentials): client.provider(...) reads it here.
    check_token_ttl = staticmethod(check_ttl)

    def mint_token(self, service_account: str, namespace: str | None = None,
                   ttl_seconds: int = 3600) -> Flow[Any]:
        """A TokenRequest for a service account: (token, expiry) that expires by itself."""
        from gpucloud.providers.kubernetes._tokens import mint

        return (yield from mint(self, service_account, namespace or self.namespace,
                                ttl_seconds))

    # -- the reapers' Lease (leader election) ------------------------------------------

    def read_lease(self, name: str, namespace: str | None = None) -> Flow[Any]:
        """The coordination.k8s.io/v1 Lease `name`, or None (_lease.py)."""
        from gpucloud.providers.kubernetes import _lease

        return (yield from _lease.read(self, namespace or self.namespace, name))

    def write_lease(self, name: str, spec: dict[str, Any], resource_version: str | None,
                    namespace: str | None = None) -> Flow[Any]:
        """Create or replace the Lease; None when another writer won (409)."""
        from gpucloud.providers.kubernetes import _lease

        return (yield from _lease.write(self, namespace or self.namespace, name, spec,
                                        resource_version))

    def verify(self) -> Flow[None]:
        yield from self.list_instances()


class CoreWeaveProvider(KubernetesProvider):
    """CoreWeave's Kubernetes (CKS): its GPU class label and its own price file."""

    name = "coreweave"
    default_gpu_labels = ("gpu.nvidia.com/class",)
