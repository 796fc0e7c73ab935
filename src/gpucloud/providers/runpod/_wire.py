"""RunPod REST v2 wire format: statuses, error texts, type names and field readers.

The pure half of the RunPod adapter (adapter.py holds the flows); the contract
is tests/fixtures/runpod/openapi-v2.json (RunPod's OpenAPI, version 2.0.0).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import httpx

from gpucloud.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InsufficientCapacityError,
    NotFoundError,
    OfferRefusedError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
)
from gpucloud.models import Connection, InstanceStatus
from gpucloud.providers._connection import ssh_endpoint
from gpucloud.providers._fields import integer, is_int, is_number, money  # noqa: F401  (used by the adapter)
from gpucloud.providers.base import OfferQuery
from gpucloud.providers.error_table import SAID, ErrorFields, ErrorRule, json_body

COMMUNITY_SUFFIX = " (community)"

STATUS = {
    "PROVISIONING": InstanceStatus.PENDING,
    "STARTING": InstanceStatus.PENDING,
    "RUNNING": InstanceStatus.RUNNING,
    "EXITED": InstanceStatus.STOPPED,
    "ERROR": InstanceStatus.FAILED,
    "TERMINATED": InstanceStatus.TERMINATED,
}

# The capacity 400 has only prose. RunPod's own wording ("There are no longer
# any instances available with the requested specifications"), v1's ("There
# are no instances currently available"), and the spec's ("could not be placed").
CAPACITY = re.compile(
    r"no longer any instances available"
    r"|no (?:gpu |gpus |machines? |hosts? )?instances? (?:are )?(?:currently )?available"
    r"|(?:not enough|insufficient|no|out of) (?:gpu )?capacity"
    r"|could not be placed"
    r"|no (?:gpus?|machines?|hosts?) (?:are )?(?:currently )?available",
    re.IGNORECASE)


def is_create(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.rstrip("/") == "/v2/pods"


_POD = re.compile(r"/v2/pods/[^/]+")


def changes_pod(request: httpx.Request) -> bool:
    """DELETE or PATCH of one pod: the calls RunPod refuses (409) for a member
    pod of a cluster ("cannot be terminated/modified via the pod endpoints")."""
    return request.method in ("DELETE", "PATCH") and bool(_POD.fullmatch(request.url.path))


# Rows before the status ones: RunPod's problem+json replies carry a title and a
# detail but no code to branch on.
ERRORS = (
    ErrorRule(status=400, text=CAPACITY, error=InsufficientCapacityError,
              hint="try another data center or GPU type"),
    # The createPod contract: a 400 that matches the schema means "try your next
    # candidate" (a cross-field rule or a GPU/data-center pair that could not be
    # placed), a 403 "your account cannot access the requested pool: skip this
    # candidate, keep going". Per offer, not per account.
    ErrorRule(status=400, request=is_create, text=SAID, error=OfferRefusedError,
              hint="RunPod refused this GPU type / data center; if every candidate is "
                   "refused alike, the request itself is at fault"),
    ErrorRule(status=403, request=is_create, text=SAID, error=OfferRefusedError,
              hint="this account cannot use this RunPod pool; other offers may work"),
    # Insufficient balance: no RunPod candidate will succeed until the account
    # is funded, but another provider may. Like a quota refusal, the launcher
    # then skips RunPod's other offers and goes on.
    ErrorRule(status=402, error=QuotaExceededError,
              hint="the RunPod account balance is too low: add funds in the RunPod console"),
    ErrorRule(status=409, request=changes_pod, error=ConflictError,
              hint="this pod is a node of a RunPod Instant Cluster (a multi-node job): "
                   "RunPod deletes and changes a cluster's nodes only all together, so "
                   "`gpucloud jobs cancel` the job (its nodes' deadline cannot move)"),
    ErrorRule(status=(400, 422), error=BadRequestError),
    ErrorRule(status=401, error=AuthenticationError),
    ErrorRule(status=403, error=PermissionDeniedError),
    ErrorRule(status=404, error=NotFoundError),
    ErrorRule(status=409, error=ConflictError),
    ErrorRule(status=429, error=RateLimitError),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    """{title, detail, errors[]}: the message is the detail (else the title)
    with a 422's violations after it; the rows search the detail, whitespace
    folded, present whenever the reply had a title or a detail."""
    body = json_body(response)
    if not isinstance(body, dict):
        return ErrorFields()
    title, detail = text(body.get("title")), text(body.get("detail"))
    listed = body.get("errors")  # 422: one entry per violation
    errors = [e for e in listed if isinstance(e, str)] if isinstance(listed, list) else []
    message = detail or title
    if errors:
        message = f"{message or response.reason_phrase or 'request failed'}: {'; '.join(errors)}"
    said = " ".join((detail or "").split()) if title or detail else None
    return ErrorFields(code=title, message=message, text=said)


TYPE_NAME = re.compile(r"(\d+)x (.+?)(" + re.escape(COMMUNITY_SUFFIX) + r")?")


def sells(raw: dict[str, Any], cloud: str, count: int, query: OfferQuery, gpu: str) -> bool:
    """Whether this GPU type is sold in that cloud, in that count, for the query."""
    key = cloud.lower()
    if query.gpu is not None and gpu != query.gpu:
        return False
    if raw[key] is not True:
        return False
    return integer(raw["maxCount"][key]) >= count and money(raw["price"][key]) > 0


def pod_path(instance_id: str) -> str:
    return f"/v2/pods/{quote(instance_id, safe='')}"


def ip_of(raw: dict[str, Any]) -> str | None:
    """The public address of the pod's 22/tcp mapping, else the direct SSH host."""
    runtime = raw.get("runtime") if isinstance(raw.get("runtime"), dict) else {}
    for port in runtime.get("ports") or ():
        if isinstance(port, dict) and port.get("private") == 22 and text(port.get("ip")):
            return port["ip"]
    ssh = raw.get("ssh") if isinstance(raw.get("ssh"), dict) else {}
    direct = ssh.get("direct") if isinstance(ssh.get("direct"), dict) else {}
    return text(direct.get("host"))


def cluster_ip(raw: dict[str, Any]) -> str | None:
    """A cluster member's address on the cluster's private overlay network
    (PodCluster.ip; omitted until assigned, and on a standalone pod)."""
    member = raw.get("cluster")
    return text(member.get("ip")) if isinstance(member, dict) else None


# RunPod's images log in as root; the spec's PodSshEndpoint example says so too
# ("ssh root@195.26.233.3 -p 34446").
SSH_USER = "root"


def connection_of(raw: dict[str, Any]) -> Connection | None:
    """The pod's direct SSH endpoint: the spec's `ssh.direct` {host, port,
    username}, else the public ip and port that `runtime.ports` maps to 22/tcp
    (a pod created with "22/tcp" in `ports`, as create does). `ssh.proxy`
    (ssh.runpod.io) is not used: the spec says nothing of how it handles a
    command instead of a terminal, and nothing here could try it. None until
    RunPod has mapped the port (the spec: no runtime before RUNNING)."""
    ssh = raw.get("ssh") if isinstance(raw.get("ssh"), dict) else {}
    direct = ssh.get("direct") if isinstance(ssh.get("direct"), dict) else {}
    if direct:
        user = direct.get("username") if isinstance(direct.get("username"), str) else SSH_USER
        found = ssh_endpoint(direct.get("host"), direct.get("port"), user)
        if found is not None:
            return found
    runtime = raw.get("runtime") if isinstance(raw.get("runtime"), dict) else {}
    ports = runtime.get("ports") if isinstance(runtime.get("ports"), list) else []
    for port in ports:
        if isinstance(port, dict) and port.get("private") == 22 \
                and port.get("type") in ("tcp", None):
            found = ssh_endpoint(port.get("ip"), port.get("public"), SSH_USER)
            if found is not None:
                return found
    return None


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
