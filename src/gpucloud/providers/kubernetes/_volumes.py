"""The Kubernetes adapter's volumes: PersistentVolumeClaims in the namespace.

A mixin of KubernetesProvider (adapter.py), like _jobs.py. A volume's id and
name are the claim's name (what a pod's ``persistentVolumeClaim.claimName``
says); its size is the bound volume's ``status.capacity.storage``, else the
request, in GiB; its region is the cluster's (the kubeconfig context, as for
offers and pods); its price is ``volume_price`` from config.toml, else
unknown. ``attached_to`` lists the live pods that mount it.
"""

from __future__ import annotations

from decimal import Decimal

import math
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from gpucloud.errors import SpecError
from gpucloud.models import Volume, VolumeSpec
from gpucloud.providers.base import Flow, parse_utc
from gpucloud.providers.kubernetes import _pages
from gpucloud.providers.kubernetes import _wire as wire
from gpucloud.providers.kubernetes._manifests import pvc_manifest

if TYPE_CHECKING:
    from gpucloud.providers.kubernetes._kubeconfig import KubeTarget
    from gpucloud.providers.kubernetes._settings import Settings

CLAIMS = "/persistentvolumeclaims"
LIVE = ("Pending", "Running", "Unknown")


def gib(quantity: Any) -> int:
    """A storage quantity in whole GiB, rounded up ("100Gi" -> 100, "1Ti" -> 1024)."""
    return max(0, math.ceil(wire.amount(quantity) / 2**30))


class KubernetesVolumes:
    name: str
    namespace: str
    page_size: int | None
    request: Any
    raise_for_error: Any
    _body: Any
    _ns: Any

    if TYPE_CHECKING:  # the adapter's properties
        @property
        def settings(self) -> Settings: ...

        @property
        def target(self) -> KubeTarget: ...

    def volume_rate(self, size_gb: int) -> Decimal | None:
        """The cluster's storage is the operator's to price: volume_price from
        config.toml, else unknown."""
        return self.settings.volume_price

    def list_volumes(self) -> Flow[list[Volume]]:
        claims = yield from _pages.items(self, "/api/v1" + self._ns(CLAIMS), {})
        users: dict[str, list[str]] = {}

        def add(acc: dict[str, list[str]], pods: list[dict[str, Any]]) -> None:
            for pod in pods:
                if wire.meta(pod).get("deletionTimestamp") or \
                        (pod.get("status") or {}).get("phase", "Unknown") not in LIVE:
                    continue
                for volume in (pod.get("spec") or {}).get("volumes") or []:
                    claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                    if isinstance(claim, str):
                        acc.setdefault(claim, []).append(str(wire.meta(pod)["name"]))

        if claims:
            users = yield from _pages.fold(self, "/api/v1" + self._ns("/pods"), {}, dict, add)
        return [self._volume(c, users) for c in claims]

    def create_volume(self, spec: VolumeSpec) -> Flow[Volume]:
        region = self.target.context
        if spec.region != region:
            raise SpecError(f"{self.name} has one region, its kubeconfig context {region}; "
                            f"got {spec.region}", hint=f"create the volume in {region}")
        settings = self.settings
        body = pvc_manifest(spec, namespace=self.namespace, storage_class=settings.storage_class,
                            access_mode=settings.volume_access_mode)
        response = yield self.request("POST", "/api/v1" + self._ns(CLAIMS), json=body,
                                      kind="launch")
        return self._volume(self._body(response), {})

    def delete_volume(self, volume_id: str) -> Flow[None]:
        # A claim still mounted is kept (the pvc-protection finalizer) until its
        # last pod ends, then deleted: the delete is accepted either way.
        response = yield self.request("DELETE",
                                      "/api/v1" + self._ns(f"{CLAIMS}/{quote(volume_id)}"))
        self.raise_for_error(response)

    def _volume(self, claim: Any, users: dict[str, list[str]]) -> Volume:
        if not isinstance(claim, dict) or claim.get("kind", "PersistentVolumeClaim") != \
                "PersistentVolumeClaim":
            raise TypeError("not a PersistentVolumeClaim")
        meta, spec, status = wire.meta(claim), claim.get("spec") or {}, claim.get("status") or {}
        size = (status.get("capacity") or {}).get("storage") or \
            ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        name = str(meta["name"])
        phase = status.get("phase")
        return Volume(provider=self.name, id=name, name=name, size_gb=gib(size or 0),
                      region=self.target.context, price_per_gb_month=self.settings.volume_price,
                      status=("Terminating" if meta.get("deletionTimestamp")
                              else str(phase) if phase else None),
                      attached_to=tuple(sorted(users.get(name, []))),
                      created_at=parse_utc(meta.get("creationTimestamp")))


__all__ = ["KubernetesVolumes", "gib"]
