"""RunPod REST v2 wire format: statuses, error texts, type names and field readers.

The pure half of the RunPod adapter (runpod.py holds the flows); the contract
is tests/fixtures/runpod/openapi-v2.json (RunPod's OpenAPI, version 2.0.0).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import httpx

from gpucloud.errors import (
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
)
from gpucloud.models import Connection, InstanceStatus
from gpucloud.providers._connection import ssh_endpoint
from gpucloud.providers._fields import integer, is_int, is_number, money  # noqa: F401  (used by the adapter)
from gpucloud.providers.base import OfferQuery

COMMUNITY_SUFFIX = " (community)"

STATUS = {
    "PROVISIONING": InstanceStatus.PENDING,
    "STARTING": InstanceStatus.PENDING,
    "RUNNING": InstanceStatus.RUNNING,
    "EXITED": InstanceStatus.STOPPED,
    "ERROR": InstanceStatus.FAILED,
    "TERMINATED": InstanceStatus.TERMINATED,
}

BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError,
    404: NotFoundError, 409: ConflictError, 422: BadRequestError, 429: RateLimitError,
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

TYPE_NAME = re.compile(r"(\d+)x (.+?)(" + re.escape(COMMUNITY_SUFFIX) + r")?")


def sells(raw: dict[str, Any], cloud: str, count: int, query: OfferQuery, gpu: str) -> bool:
    """Whether this GPU type is sold in that cloud, in that count, for the query."""
    key = cloud.lower()
    if query.gpu is not None and gpu != query.gpu:
        return False
    if raw[key] is not True:
        return False
    return integer(raw["maxCount"][key]) >= count and money(raw["price"][key]) > 0


def is_create(response: httpx.Response) -> bool:
    request = response.request
    return request.method == "POST" and request.url.path.rstrip("/") == "/v2/pods"


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
