"""Kubernetes objects read back: Pods as Instances, Jobs as Jobs, Nodes as free
GPUs, a meta/v1 Status as an error. Pure functions over the JSON; a shape that
is not a Kubernetes object raises ValueError/TypeError/KeyError, which the
driver reports as the provider's unexpected shape (APIResponseValidationError)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from gpucloud.catalog.gpus import gpu_info, normalize_gpu
from gpucloud.models import InstanceStatus, JobStatus
from gpucloud.errors import BadRequestError, QuotaExceededError
from gpucloud.providers.base import parse_utc
from gpucloud.providers.error_table import ErrorFields, ErrorRule, json_body

if TYPE_CHECKING:
    import httpx

GPU_RESOURCE = "nvidia.com/gpu"
MANAGED_BY = "app.kubernetes.io/managed-by"
LAUNCH_ID = "gpucloud.dev/launch-id"
SHUTDOWN_AT = "gpucloud.dev/shutdown-at"
NAME = "gpucloud.dev/name"  # the user's name for it (labels cannot hold every name)
JOB_NAME = "job-name"  # set on a Job's pods by the Job controller
# Where the Job controller writes an Indexed Job pod's index (k8s.io/api batch/v1
# JobCompletionIndexAnnotation; pkg/controller/job/indexed_job_utils.go).
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


# A meta/v1 Status reply: its reason is the code, its message the words. The
# hints name the kubeconfig context and the namespace (hint_fields()).
ERRORS = (
    ErrorRule(status=401, hint="the cluster refused the kubeconfig's credentials ({context}): "
                               "an expired token? `kubectl auth whoami` shows who you are"),
    ErrorRule(status=403, text=re.compile("exceeded quota"), error=QuotaExceededError,
              hint="the namespace's ResourceQuota is used up"),
    ErrorRule(status=403, hint="RBAC: your account may not do this in namespace {namespace}; "
                               "ask the cluster admin for a Role"),
    ErrorRule(status=(400, 422), error=BadRequestError),
)
# An exec handshake's refusal, before ERRORS: what exec itself needs.
EXEC_ERRORS = (
    ErrorRule(status=403, unless=re.compile("quota"),
              hint="RBAC: exec needs the verbs get and create on pods/exec in namespace "
                   "{namespace} (a Role with resources: [pods/exec]); "
                   "`kubectl auth can-i create pods/exec` checks it"),
    ErrorRule(status=400, error=BadRequestError,
              hint="is the pod running? `gpucloud get REF` shows its status"),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    body = json_body(response)
    body = body if isinstance(body, dict) else {}
    message = str(body["message"]) if body.get("message") else None
    reason = body.get("reason") if isinstance(body.get("reason"), str) else None
    return ErrorFields(code=reason, message=message,
                       text=message or response.reason_phrase)


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    value = obj.get("metadata") or {}
    if not isinstance(value, dict):
        raise TypeError("metadata is not an object")
    return value


def labels(obj: dict[str, Any]) -> dict[str, str]:
    value = meta(obj).get("labels") or {}
    return value if isinstance(value, dict) else {}


def notes(obj: dict[str, Any]) -> dict[str, str]:
    value = meta(obj).get("annotations") or {}
    return value if isinstance(value, dict) else {}


def items(body: Any) -> list[dict[str, Any]]:
    """The items of a List object."""
    if not isinstance(body, dict) or not isinstance(body.get("items") or [], list):
        raise TypeError("not a Kubernetes List")
    return [i for i in body.get("items") or [] if isinstance(i, dict)]


def gpu_name(label: str) -> str:
    """A node label value as a canonical GPU name: CoreWeave's classes
    (H100_NVLINK_80GB) parse as they are, NVIDIA feature discovery's products
    (NVIDIA-H100-80GB-HBM3) once the vendor prefix and dashes are gone."""
    name = normalize_gpu(label)
    if gpu_info(name) is None:
        bare = re.sub(r"^(nvidia|tesla)[-_ ]", "", label, flags=re.I).replace("-", " ")
        if gpu_info(normalize_gpu(bare)) is not None:
            return normalize_gpu(bare)
    return name


def quantity(value: Any) -> int:
    """A GPU count (an extended resource: whole numbers only)."""
    if isinstance(value, bool):
        raise TypeError("GPU quantity is a boolean")
    number = int(str(value))
    if number < 0:
        raise ValueError(f"negative GPU quantity {value!r}")
    return number


def pod_gpus(pod: dict[str, Any]) -> int:
    """GPUs a pod holds: its containers' limits (a GPU request equals its limit)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        amount = (resources.get("limits") or {}).get(GPU_RESOURCE,
                                                     (resources.get("requests") or {}).get(
                                                         GPU_RESOURCE, 0))
        total += quantity(amount)
    return total


def selected_gpu(spec: dict[str, Any], label: str) -> str | None:
    """The node-label value a pod spec asks for (nodeSelector or nodeAffinity)."""
    selector = spec.get("nodeSelector") or {}
    if isinstance(selector.get(label), str):
        return selector[label]
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == label and expr.get("operator") == "In" and expr.get("values"):
                return str(expr["values"][0])
    return None


def unschedulable(pod: dict[str, Any]) -> str | None:
    """The scheduler's message when it cannot place the pod."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if (cond.get("type") == "PodScheduled" and cond.get("status") == "False"
                and cond.get("reason") == "Unschedulable"):
            return str(cond.get("message") or "the scheduler cannot place the pod")
    return None


UNSCHEDULABLE = "Unschedulable"


def pod_state(pod: dict[str, Any]) -> tuple[InstanceStatus, str]:
    """(status, provider_status). An Unschedulable pod's provider_status is
    "Unschedulable: <the scheduler's message>"."""
    phase = str((pod.get("status") or {}).get("phase") or "Unknown")
    if meta(pod).get("deletionTimestamp"):
        return InstanceStatus.TERMINATING, f"{phase} (deleting)"
    if phase == "Pending":
        message = unschedulable(pod)
        if message is not None:
            return InstanceStatus.PENDING, f"{UNSCHEDULABLE}: {message}"
        return InstanceStatus.PENDING, _waiting_reason(pod) or phase
    status = {"Running": InstanceStatus.RUNNING, "Succeeded": InstanceStatus.TERMINATED,
              "Failed": InstanceStatus.FAILED}.get(phase, InstanceStatus.UNKNOWN)
    return status, phase


def _waiting_reason(pod: dict[str, Any]) -> str | None:
    """ContainerCreating, ImagePullBackOff ...: more telling than "Pending"."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            message = waiting.get("message")
            return f"Pending: {waiting['reason']}" + (f": {message}" if message else "")
    return None


def exit_code(pod: dict[str, Any]) -> int | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (cs.get("state") or {}).get("terminated") or {}
        if isinstance(terminated.get("exitCode"), int):
            return int(terminated["exitCode"])
    return None


@dataclass(frozen=True)
class JobState:
    status: JobStatus
    provider_status: str
    message: str | None = None
    finished_at: Any = None


def job_state(job: dict[str, Any], pods: list[dict[str, Any]]) -> JobState:
    """A Job's status from its conditions, then its pods (newest first)."""
    status = job.get("status") or {}
    if meta(job).get("deletionTimestamp"):
        return JobState(JobStatus.CANCELLED, "Deleting")
    for cond in status.get("conditions") or []:
        if cond.get("status") != "True":
            continue
        when = parse_utc(cond.get("lastTransitionTime"))
        if cond.get("type") == "Complete":
            return JobState(JobStatus.SUCCEEDED, "Complete", finished_at=when)
        if cond.get("type") == "Failed":
            reason = str(cond.get("reason") or "Failed")
            return JobState(JobStatus.FAILED, f"Failed: {reason}",
                            message=cond.get("message") or reason, finished_at=when)
    if status.get("suspend") or (job.get("spec") or {}).get("suspend"):
        return JobState(JobStatus.QUEUED, "Suspended")
    if job_nodes(job) > 1:
        # Several nodes run only together: while one waits for a node, the job
        # waits (queued, with the scheduler's words), even if its peers started.
        for pod in pods:
            state, word = pod_state(pod)
            if state == InstanceStatus.PENDING:
                return JobState(JobStatus.QUEUED, word, message=unschedulable(pod))
    for pod in pods:
        state, word = pod_state(pod)
        if state == InstanceStatus.RUNNING:
            return JobState(JobStatus.RUNNING, "Running")
        if state == InstanceStatus.PENDING:
            message = unschedulable(pod)
            return JobState(JobStatus.QUEUED, word, message=message)
    if (status.get("active") or 0) > 0:
        return JobState(JobStatus.RUNNING, "Active")
    return JobState(JobStatus.QUEUED, "Created")


def newest_first(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(pods, key=lambda p: str(meta(p).get("creationTimestamp") or ""), reverse=True)


def completion_index(pod: dict[str, Any]) -> int | None:
    """An Indexed Job pod's index (its node rank); None for any other pod."""
    value = notes(pod).get(COMPLETION_INDEX)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def by_rank(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rank 0 first (pods without an index count as rank 0), newest first within a rank."""
    return sorted(newest_first(pods), key=lambda p: completion_index(p) or 0)


def job_nodes(job: dict[str, Any]) -> int:
    """How many nodes a Job runs on: an Indexed Job's completions, else one."""
    spec = job.get("spec") or {}
    if spec.get("completionMode") != "Indexed":
        return 1
    count = spec.get("completions")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1


# resource.Quantity suffixes (k8s.io/apimachinery pkg/api/resource): binary and decimal.
SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def amount(value: Any) -> Decimal:
    """A resource.Quantity as a number ("1k" -> 1000, "100Gi" -> 107374182400);
    ValueError when it is not one."""
    text = str(value).strip()
    factor = 1
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            text, factor = text[:-len(suffix)], SUFFIXES[suffix]
            break
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a quantity: {value!r}") from None
    if not number.is_finite():
        raise ValueError(f"not a quantity: {value!r}")
    return number * factor


def allocatable(node: dict[str, Any], resource: str) -> Decimal:
    """A node's allocatable amount of a resource (0 when absent or unreadable).
    An RDMA shared-device plugin advertises shares: its rdmaHcaMax, 1000 by
    default, which a Quantity writes "1k"."""
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource, 0)
    try:
        return amount(value)
    except ValueError:
        return Decimal(0)


def gpu_node(node: dict[str, Any], gpu_labels: tuple[str, ...]) -> tuple[str, str, int] | None:
    """(node name, GPU label value, allocatable) of a schedulable, Ready node
    with GPUs; None for any other node."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    allocatable = quantity((status.get("allocatable") or {}).get(GPU_RESOURCE, 0))
    if allocatable < 1 or spec.get("unschedulable") is True:
        return None
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    if ready and ready[0].get("status") != "True":
        return None
    node_labels = labels(node)
    model = next((node_labels[k] for k in gpu_labels if isinstance(node_labels.get(k), str)),
                 None)
    if model is None:
        return None
    return str(meta(node).get("name")), model, allocatable


def add_pod_gpus(used: dict[str, int], pods: list[dict[str, Any]]) -> None:
    """Add the GPUs each pod holds to its node's count in `used`."""
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if isinstance(node, str):
            gpus = pod_gpus(pod)
            if gpus:
                used[node] = used.get(node, 0) + gpus
