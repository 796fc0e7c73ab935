"""Pod admission (defaults and validation) and the pod status shapes the
kubelet and scheduler write, kept apart from the state machine in cluster.py."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from .objects import invalid, name_causes, quantity, rfc3339

GPU = "nvidia.com/gpu"
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                     "characters or '-', and must start and end with an alphanumeric character "
                     "(e.g. 'my-name',  or '123-abc', regex used for validation is "
                     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
# Extended resources (anything with a domain other than kubernetes.io) cannot be
# overcommitted: requests must equal limits and be whole numbers.
_NATIVE = {"cpu", "memory", "ephemeral-storage"}


def validate_pod_spec(spec: Any, kind: str, group: str, name: str, prefix: str
                      ) -> list[tuple[str, str, str]]:
    causes: list[tuple[str, str, str]] = []
    if not isinstance(spec, dict):
        return [("FieldValueRequired", prefix, "Required value")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(("FieldValueRequired", f"{prefix}.containers", "Required value"))
        return causes
    for i, container in enumerate(containers):
        where = f"{prefix}.containers[{i}]"
        if not isinstance(container, dict):
            causes.append(("FieldValueInvalid", where, "Invalid value: must be an object"))
            continue
        if not container.get("name"):
            causes.append(("FieldValueRequired", f"{where}.name", "Required value"))
        if not container.get("image"):
            causes.append(("FieldValueRequired", f"{where}.image", "Required value"))
        causes.extend(_resource_causes(container.get("resources") or {}, where))
    for field in ("hostname", "subdomain"):  # DNS-1123 labels (ValidatePodSpec)
        value = spec.get(field)
        if value is not None and (len(str(value)) > 63 or not DNS1123_LABEL.match(str(value))):
            causes.append(("FieldValueInvalid", f"{prefix}.{field}",
                           f'Invalid value: "{value}": ' + (
                               "must be no more than 63 characters" if len(str(value)) > 63
                               else DNS1123_LABEL_MSG)))
    policy = spec.get("restartPolicy", "Always")
    if policy not in ("Always", "OnFailure", "Never"):
        causes.append(("FieldValueNotSupported", f"{prefix}.restartPolicy",
                       f'Unsupported value: "{policy}": supported values: "Always", '
                       '"OnFailure", "Never"'))
    return causes


def _resource_causes(resources: dict[str, Any], where: str) -> list[tuple[str, str, str]]:
    causes = []
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    for section, values in (("requests", requests), ("limits", limits)):
        for res, value in values.items():
            if quantity(value) is None:
                causes.append(("FieldValueInvalid", f"{where}.resources.{section}[{res}]",
                               f'Invalid value: "{value}": quantities must match the '
                               "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
    for res in set(requests) | set(limits):
        if "/" not in res or res.split("/")[0].endswith("kubernetes.io") or res in _NATIVE:
            continue
        req, lim = quantity(requests.get(res)), quantity(limits.get(res))
        if res in requests and res not in limits:
            causes.append(("FieldValueRequired", f"{where}.resources.limits",
                           "Required value: Limit must be set for non overcommitable "
                           "resources"))
        elif res in requests and req is not None and lim is not None and req != lim:
            causes.append(("FieldValueInvalid", f"{where}.resources.requests",
                           f'Invalid value: "{requests[res]}": must be equal to {res} '
                           f"limit of {limits[res]}"))
        for value in (req, lim):
            if value is not None and value != value.to_integral_value():
                causes.append(("FieldValueInvalid", f"{where}.resources.requests[{res}]",
                               f'Invalid value: "{value}": must be an integer'))
    return causes


def check_pod(pod: dict[str, Any]) -> None:
    meta = pod.get("metadata") or {}
    name = meta.get("name") or ""
    causes = name_causes(name, bool(meta.get("generateName")))
    causes += validate_pod_spec(pod.get("spec"), "Pod", "", name, "spec")
    if causes:
        raise invalid("Pod", "", name, causes)


def resources_of(pod: dict[str, Any]) -> list[str]:
    """The resources the scheduler fits: GPU, cpu, memory and any other
    resource a container asks for (an RDMA device plugin's, say)."""
    names = [GPU, "cpu", "memory"]
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for res in [*(resources.get("requests") or {}), *(resources.get("limits") or {})]:
            if res not in names:
                names.append(res)
    return names


def container_env(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """The env the kubelet gives a container: values as written, and fieldRef
    through the downward API (metadata.name, metadata.namespace,
    metadata.labels['k'], metadata.annotations['k'], status.podIP). Not
    emulated: $(VAR) expansion, configMap and secret refs."""
    meta, out = pod["metadata"], {}
    for item in container.get("env") or []:
        if "value" in item or "valueFrom" not in item:
            out[item["name"]] = str(item.get("value", ""))
            continue
        path = ((item["valueFrom"] or {}).get("fieldRef") or {}).get("fieldPath", "")
        match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
        if match:
            out[item["name"]] = (meta.get(match.group(1)) or {}).get(match.group(2), "")
        elif path in ("metadata.name", "metadata.namespace"):
            out[item["name"]] = meta.get(path.split(".")[1], "")
        elif path == "status.podIP":
            out[item["name"]] = (pod.get("status") or {}).get("podIP", "")
    return out


def requested(pod: dict[str, Any], resource: str) -> Decimal:
    """What the scheduler counts: per container requests, defaulting to limits."""
    total = Decimal(0)
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get(resource,
                                                      (resources.get("limits") or {}).get(resource))
        if value is not None:
            total += quantity(value) or 0
    return total


def default_pod(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    for container in spec.get("containers") or []:
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("imagePullPolicy", "IfNotPresent")
        resources = container.setdefault("resources", {})
        limits = resources.get("limits") or {}
        if limits:  # requests default to limits (the API's own defaulting)
            requests = resources.setdefault("requests", {})
            for res, value in limits.items():
                requests.setdefault(res, value)
    pod["status"] = {"phase": "Pending", "qosClass": _qos(spec)}


def _qos(spec: dict[str, Any]) -> str:
    guaranteed, any_set = True, False
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        req, lim = resources.get("requests") or {}, resources.get("limits") or {}
        any_set = any_set or bool(req or lim)
        if not ("cpu" in lim and "memory" in lim) or any(
                quantity(req.get(r, lim.get(r))) != quantity(lim.get(r)) for r in lim):
            guaranteed = False
    if guaranteed and any_set:
        return "Guaranteed"
    return "Burstable" if any_set else "BestEffort"


def condition(kind: str, status: str, at: float, reason: str | None = None,
              message: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": kind, "status": status, "lastProbeTime": None,
                            "lastTransitionTime": rfc3339(at)}
    if reason:
        item["reason"] = reason
    if message:
        item["message"] = message
    return item


def container_statuses(pod: dict[str, Any], state: dict[str, Any], ready: bool
                       ) -> list[dict[str, Any]]:
    return [{"name": c.get("name"), "image": c.get("image"), "imageID": "",
             "containerID": "" if "waiting" in state else f"containerd://{pod['metadata']['uid']}",
             "ready": ready, "restartCount": 0, "started": "running" in state, "state": state}
            for c in pod["spec"].get("containers") or []]


def unschedulable_message(total: int, reasons: dict[str, int]) -> str:
    """The scheduler's FitError text (framework.FitError.Error) with the
    preemption postfilter's summary, as `kubectl describe` shows it."""
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    text = f"0/{total} nodes are available: {', '.join(parts)}."
    victims = sum(c for r, c in reasons.items() if r.startswith("Insufficient"))
    hopeless = total - victims
    pre = []
    if victims:
        pre.append(f"{victims} No preemption victims found for incoming pod")
    if hopeless:
        pre.append(f"{hopeless} Preemption is not helpful for scheduling")
    return f"{text} preemption: 0/{total} nodes are available: {', '.join(sorted(pre))}."


def node_matches(spec: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    return any(all(_expression(e, labels) for e in term.get("matchExpressions") or [])
               for term in terms)


def _expression(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = str(expr.get("key")), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels:
        try:
            a, b = int(labels[key]), int(values[0])
        except (ValueError, IndexError):
            return False
        return a > b if op == "Gt" else a < b
    return False
