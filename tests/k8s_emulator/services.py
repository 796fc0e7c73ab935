"""core/v1 Services and PersistentVolumeClaims: create, get, list, delete.

Services: the name is a DNS-1035 label (k8s.io/apimachinery validation
IsDNS1035Label, as ValidateServiceName asks); ``clusterIP: None`` makes a
headless Service (clusterIPs ["None"]), anything else is given an address
from the service range; ``type`` defaults to ClusterIP and
``sessionAffinity`` to None, as the API's defaulting does. A DELETE answers
with the deleted Service (its registry returns the object).

PersistentVolumeClaims: ``spec.accessModes`` and
``spec.resources.requests.storage`` are required (ValidatePersistentVolumeClaimSpec's
messages); a claim binds at once (a StorageClass with volumeBindingMode
Immediate: status.phase Bound, capacity = the request, accessModes), and a
claim a live pod still mounts is only marked for deletion
(kubernetes.io/pvc-protection) until its last pod is gone.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

from .objects import already_exists, bad_request, invalid, name_causes, not_found, quantity, rfc3339

if TYPE_CHECKING:
    from .cluster import Cluster

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
               "start with an alphabetic character, and end with an alphanumeric character "
               "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
               "'[a-z]([-a-z0-9]*[a-z0-9])?')")
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
PVC_PROTECTION = "kubernetes.io/pvc-protection"


def _admit(c: Cluster, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    c.require_namespace(namespace)
    meta = obj.setdefault("metadata", {})
    if meta.get("namespace") not in (None, namespace):
        raise bad_request("the namespace of the provided object does not match the "
                          "namespace sent on the request")
    meta["namespace"] = namespace
    meta.pop("uid", None)
    return meta


# --- Services ---------------------------------------------------------------------

def create_service(c: Cluster, namespace: str, service: dict[str, Any]) -> dict[str, Any]:
    with c.lock:
        meta = _admit(c, namespace, service)
        name = meta.get("name") or ""
        causes = [] if name else [("FieldValueRequired", "metadata.name",
                                   "Required value: name or generateName is required")]
        if name and (len(name) > 63 or not DNS1035.match(name)):
            causes.append(("FieldValueInvalid", "metadata.name",
                           f'Invalid value: "{name}": ' + (
                               "must be no more than 63 characters" if len(name) > 63
                               else DNS1035_MSG)))
        spec = service.setdefault("spec", {})
        kind = spec.setdefault("type", "ClusterIP")
        if kind not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
            causes.append(("FieldValueNotSupported", "spec.type",
                           f'Unsupported value: "{kind}": supported values: "ClusterIP", '
                           '"ExternalName", "LoadBalancer", "NodePort"'))
        if spec.get("clusterIP") not in (None, "", "None") and kind == "ClusterIP":
            causes.append(("FieldValueInvalid", "spec.clusterIPs",
                           "Invalid value: the emulator allocates cluster IPs itself"))
        if causes:
            raise invalid("Service", "", name, causes)
        if (namespace, name) in c.services:
            raise already_exists("services", name)
        spec.setdefault("sessionAffinity", "None")
        if spec.get("clusterIP") != "None":
            c._service_ips += 1
            spec["clusterIP"] = f"10.96.{c._service_ips // 250}.{c._service_ips % 250 + 1}"
        spec["clusterIPs"] = [spec["clusterIP"]]
        c._stamp(service)
        service["status"] = {"loadBalancer": {}}
        c.services[(namespace, name)] = service
        return copy.deepcopy(service)


def service(c: Cluster, namespace: str, name: str) -> dict[str, Any]:
    found = c.services.get((namespace, name))
    if found is None:
        raise not_found("services", name)
    return found


def delete_service(c: Cluster, namespace: str, name: str) -> dict[str, Any]:
    with c.lock:
        gone = service(c, namespace, name)
        del c.services[(namespace, name)]
        c.deletions.append({"kind": "Service", "namespace": namespace, "name": name})
        return copy.deepcopy(gone)


# --- PersistentVolumeClaims ----------------------------------------------------------

def create_claim(c: Cluster, namespace: str, claim: dict[str, Any]) -> dict[str, Any]:
    with c.lock:
        meta = _admit(c, namespace, claim)
        name = meta.get("name") or ""
        causes = name_causes(name, False)
        spec = claim.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        modes = spec.get("accessModes") or []
        if not modes:
            causes.append(("FieldValueRequired", "spec.accessModes",
                           "Required value: at least 1 access mode is required"))
        for mode in modes:
            if mode not in ACCESS_MODES:
                causes.append(("FieldValueNotSupported", "spec.accessModes",
                               f'Unsupported value: "{mode}": supported values: '
                               '"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", '
                               '"ReadWriteOncePod"'))
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        if storage is None:
            causes.append(("FieldValueRequired", "spec.resources[storage]", "Required value"))
        elif quantity(storage) is None or quantity(storage) <= 0:  # type: ignore[operator]
            causes.append(("FieldValueInvalid", "spec.resources[storage]",
                           f'Invalid value: "{storage}": must be greater than zero'))
        if causes:
            raise invalid("PersistentVolumeClaim", "", name, causes)
        if (namespace, name) in c.claims:
            raise already_exists("persistentvolumeclaims", name)
        claim["spec"] = spec
        spec.setdefault("volumeMode", "Filesystem")
        spec.setdefault("storageClassName", c.default_storage_class)
        c._stamp(claim)
        meta["finalizers"] = [PVC_PROTECTION]
        c._volumes += 1
        spec["volumeName"] = f"pvc-{meta['uid']}"
        claim["status"] = {"phase": "Bound", "accessModes": list(modes),
                           "capacity": {"storage": storage}}
        c.claims[(namespace, name)] = claim
        return copy.deepcopy(claim)


def claim(c: Cluster, namespace: str, name: str) -> dict[str, Any]:
    found = c.claims.get((namespace, name))
    if found is None:
        raise not_found("persistentvolumeclaims", name)
    return found


def claim_users(c: Cluster, namespace: str, name: str) -> list[str]:
    """Live pods (not ended, not gone) that mount the claim."""
    return [key[1] for key, pod in c.pods.items()
            if key[0] == namespace and pod["status"]["phase"] not in ("Succeeded", "Failed")
            and c.sims[key].remove_at is None
            and any((v.get("persistentVolumeClaim") or {}).get("claimName") == name
                    for v in pod["spec"].get("volumes") or [])]


def delete_claim(c: Cluster, namespace: str, name: str) -> dict[str, Any]:
    with c.lock:
        found = claim(c, namespace, name)
        c.deletions.append({"kind": "PersistentVolumeClaim", "namespace": namespace,
                            "name": name})
        if not found["metadata"].get("deletionTimestamp"):
            found["metadata"]["deletionTimestamp"] = rfc3339(c.clock())
            found["metadata"]["deletionGracePeriodSeconds"] = 0
            c.touch(found)
        answer = copy.deepcopy(found)
        release_claims(c)
        return answer


def release_claims(c: Cluster) -> None:
    """The pvc-protection controller: a claim marked for deletion goes once no
    live pod mounts it."""
    for (namespace, name), found in list(c.claims.items()):
        if found["metadata"].get("deletionTimestamp") and not claim_users(c, namespace, name):
            del c.claims[(namespace, name)]
