"""A ``coordination.k8s.io/v1`` Lease on the wire: read, create, replace.

Only the requests: who may take the Lease, and when, is the election's rule
(gpucloud.safety.kube_lease), the same for any cluster. A replace carries the
``metadata.resourceVersion`` of the read it follows, so the API server applies
it only if nobody wrote the Lease in between (optimistic concurrency, "Kubernetes
API Concepts", Resource versions): a stale one, like a create of a name that
exists, is ``409 Conflict`` / ``AlreadyExists``, and means another process won.
Paths: /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases[/{name}]
(Kubernetes API reference, Lease v1 coordination.k8s.io).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gpucloud.providers.base import Flow, Provider

API_VERSION = "coordination.k8s.io/v1"


def _path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/{API_VERSION}/namespaces/{quote(namespace, safe='')}/leases"
    return base if name is None else f"{base}/{quote(name, safe='')}"


def read(provider: Provider, namespace: str, name: str) -> Flow[dict[str, Any] | None]:
    """The Lease as stored, or None when there is none."""
    response = yield provider.request("GET", _path(namespace, name))
    if response.status_code == 404:
        return None
    provider.raise_for_error(response)
    return _lease(provider, response)


def write(provider: Provider, namespace: str, name: str, spec: dict[str, Any],
          resource_version: str | None) -> Flow[dict[str, Any] | None]:
    """Create the Lease (no resource_version) or replace the one read at
    `resource_version`; the Lease as stored, or None when another writer got
    there first (409)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    body = {"apiVersion": API_VERSION, "kind": "Lease", "metadata": meta, "spec": spec}
    # A repeat of either write is refused (the name exists; the version moved
    # on) rather than applied twice, so a retry can only make a win look like
    # a loss, which the next read corrects (the holder is this process).
    if resource_version is None:
        request = provider.request("POST", _path(namespace), json=body, kind="idempotent")
    else:
        request = provider.request("PUT", _path(namespace, name), json=body, kind="idempotent")
    response = yield request
    if response.status_code == 409:
        return None
    provider.raise_for_error(response)
    return _lease(provider, response)


def _lease(provider: Provider, response: Any) -> dict[str, Any]:
    raw = provider.json(response)
    if not isinstance(raw, dict) or not isinstance(raw.get("metadata"), dict) \
            or not isinstance(raw["metadata"].get("resourceVersion"), str):
        raise provider.invalid(response, "not a Lease with metadata.resourceVersion")
    if not isinstance(raw.get("spec", {}), dict):
        raise provider.invalid(response, "the Lease's spec is not an object")
    return raw
