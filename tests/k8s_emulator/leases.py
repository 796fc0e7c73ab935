"""coordination.k8s.io/v1 Leases: get, create, replace (PUT), with optimistic concurrency.

What the API server does and the election relies on:

* every write gives the Lease a new ``metadata.resourceVersion``;
* a PUT whose ``metadata.resourceVersion`` differs from the stored one is
  ``409 Conflict``, worded as apimachinery's NewConflict with the registry's
  OptimisticLockErrorMsg ("the object has been modified; please apply your
  changes to the latest version and try again");
* a POST of a name that exists is ``409 AlreadyExists``;
* ``spec.leaseDurationSeconds`` must be greater than 0 and
  ``spec.leaseTransitions`` not negative (ValidateLeaseSpec), and the
  MicroTimes (acquireTime, renewTime) parse as RFC 3339 and are stored with
  six fraction digits, as metav1.MicroTime marshals them.

Stricter than the API server, on purpose: a PUT must carry a resourceVersion
(gpucloud never replaces a Lease it has not read) and a PUT of a missing Lease
is 404, where the real registry may create it.
"""

from __future__ import annotations

import copy
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .objects import already_exists, bad_request, failure, invalid, name_causes, not_found

if TYPE_CHECKING:
    from .cluster import Cluster

GROUP = "coordination.k8s.io"
API = f"{GROUP}/v1"


def _micro(value: Any, field: str, causes: list[tuple[str, str, str]]) -> Any:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        if moment.tzinfo is None:
            raise ValueError
    except ValueError:
        causes.append(("FieldValueInvalid", field, f'Invalid value: "{value}": not RFC 3339'))
        return value
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _checked(name: str, lease: dict[str, Any]) -> dict[str, Any]:
    spec = lease.get("spec")
    spec = dict(spec) if isinstance(spec, dict) else {}
    causes = name_causes(name, False)
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        causes.append(("FieldValueInvalid", "spec.leaseDurationSeconds",
                       f"Invalid value: {duration}: must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and (not isinstance(transitions, int) or transitions < 0):
        causes.append(("FieldValueInvalid", "spec.leaseTransitions",
                       f"Invalid value: {transitions}: must be greater than or equal to 0"))
    for key in ("acquireTime", "renewTime"):
        if key in spec:
            spec[key] = _micro(spec[key], f"spec.{key}", causes)
    if causes:
        raise invalid("Lease", GROUP, name, causes)
    return spec


def create_lease(c: Cluster, namespace: str, lease: dict[str, Any]) -> dict[str, Any]:
    with c.lock:
        c.require_namespace(namespace)
        meta = lease.setdefault("metadata", {})
        if meta.get("namespace") not in (None, namespace):
            raise bad_request("the namespace of the provided object does not match the "
                              "namespace sent on the request")
        if meta.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        name = meta.get("name") or ""
        spec = _checked(name, lease)
        if (namespace, name) in c.leases:
            raise already_exists("leases", name, GROUP)
        meta["namespace"] = namespace
        meta.pop("uid", None)
        stored = {"kind": "Lease", "apiVersion": API, "metadata": meta, "spec": spec}
        c._stamp(stored)
        c.leases[(namespace, name)] = stored
        c.lease_writes.append((time.monotonic(), "create", name, copy.deepcopy(spec)))
        return copy.deepcopy(stored)


def lease(c: Cluster, namespace: str, name: str) -> dict[str, Any]:
    found = c.leases.get((namespace, name))
    if found is None:
        raise not_found("leases", name, GROUP)
    return found


def replace_lease(c: Cluster, namespace: str, name: str, body: dict[str, Any]
                  ) -> dict[str, Any]:
    with c.lock:
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, name):
            raise bad_request(f'the name of the object ({meta.get("name")}) does not match '
                              f"the name on the URL ({name})")
        stored = lease(c, namespace, name)
        wanted = meta.get("resourceVersion")
        if not wanted:
            raise invalid("Lease", GROUP, name, [(
                "FieldValueInvalid", "metadata.resourceVersion",
                'Invalid value: "": the emulator requires a resourceVersion on a PUT')])
        if wanted != stored["metadata"]["resourceVersion"]:
            raise failure(409, "Conflict", (
                f'Operation cannot be fulfilled on leases.{GROUP} "{name}": the object has '
                "been modified; please apply your changes to the latest version and try again"),
                {"name": name, "group": GROUP, "kind": "leases"})
        stored["spec"] = _checked(name, body)
        for key in ("labels", "annotations"):
            if key in meta:
                stored["metadata"][key] = meta[key]
        c.touch(stored)
        c.lease_writes.append((time.monotonic(), "replace", name, copy.deepcopy(stored["spec"])))
        return copy.deepcopy(stored)
