"""Request handling without the socket: routes the Kubernetes REST paths
gpucloud uses to the cluster, checks bearer tokens and answers errors with
meta/v1 Status bodies. Also an admin endpoint the exec credential plugin
fixture asks for fresh short-lived tokens."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import secrets
import time
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from . import chunks
from .cluster import Cluster
from .objects import (
    ApiError, bad_request, failure, field_matcher, invalid, label_matcher, merge_patch, not_found,
    rfc3339,
)

ADMIN_HEADER = "X-Emulator-Admin"
MERGE_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")

POD_FIELDS = {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
              "spec.schedulerName", "spec.serviceAccountName", "status.phase", "status.podIP",
              "status.nominatedNodeName"}
JOB_FIELDS = {"metadata.name", "metadata.namespace", "status.successful"}
NODE_FIELDS = {"metadata.name", "spec.unschedulable"}
NAME_FIELDS = {"metadata.name", "metadata.namespace"}


def _pod_fields(pod: dict[str, Any]) -> dict[str, str]:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    return {"metadata.name": meta["name"], "metadata.namespace": meta.get("namespace", ""),
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.restartPolicy": spec.get("restartPolicy", ""),
            "spec.schedulerName": spec.get("schedulerName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "status.phase": status.get("phase", ""), "status.podIP": status.get("podIP", ""),
            "status.nominatedNodeName": status.get("nominatedNodeName", "")}


def _job_fields(job: dict[str, Any]) -> dict[str, str]:
    return {"metadata.name": job["metadata"]["name"],
            "metadata.namespace": job["metadata"].get("namespace", ""),
            "status.successful": str(job["status"].get("succeeded", 0))}


def _name_fields(obj: dict[str, Any]) -> dict[str, str]:
    return {"metadata.name": obj["metadata"]["name"],
            "metadata.namespace": obj["metadata"].get("namespace", "")}


def _node_fields(node: dict[str, Any]) -> dict[str, str]:
    return {"metadata.name": node["metadata"]["name"],
            "spec.unschedulable": str(bool(node["spec"].get("unschedulable"))).lower()}


NS = r"/namespaces/(?P<ns>[^/]+)"
NAME = r"(?P<name>[^/]+)"
ROUTES: list[tuple[str, str, str]] = [
    # (method, pattern, handler name)
    ("GET", r"/version", "version"),
    ("GET", r"/api", "api_versions"),
    ("GET", r"/api/v1/nodes", "list_nodes"),
    ("GET", rf"/api/v1/nodes/{NAME}", "get_node"),
    ("GET", r"/api/v1/pods", "list_pods"),
    ("GET", rf"/api/v1{NS}/pods", "list_pods"),
    ("POST", rf"/api/v1{NS}/pods", "create_pod"),
    ("GET", rf"/api/v1{NS}/pods/{NAME}", "get_pod"),
    ("PATCH", rf"/api/v1{NS}/pods/{NAME}", "patch_pod"),
    ("DELETE", rf"/api/v1{NS}/pods/{NAME}", "delete_pod"),
    ("GET", rf"/api/v1{NS}/pods/{NAME}/log", "pod_log"),
    ("GET", rf"/api/v1{NS}/pods/{NAME}/exec", "pod_exec"),
    ("POST", rf"/api/v1{NS}/pods/{NAME}/exec", "pod_exec"),
    ("POST", rf"/api/v1{NS}/serviceaccounts/{NAME}/token", "token_request"),
    ("GET", rf"/api/v1{NS}/services", "list_services"),
    ("POST", rf"/api/v1{NS}/services", "create_service"),
    ("GET", rf"/api/v1{NS}/services/{NAME}", "get_service"),
    ("DELETE", rf"/api/v1{NS}/services/{NAME}", "delete_service"),
    ("GET", rf"/api/v1{NS}/persistentvolumeclaims", "list_claims"),
    ("POST", rf"/api/v1{NS}/persistentvolumeclaims", "create_claim"),
    ("GET", rf"/api/v1{NS}/persistentvolumeclaims/{NAME}", "get_claim"),
    ("DELETE", rf"/api/v1{NS}/persistentvolumeclaims/{NAME}", "delete_claim"),
    ("POST", rf"/apis/coordination.k8s.io/v1{NS}/leases", "create_lease"),
    ("GET", rf"/apis/coordination.k8s.io/v1{NS}/leases/{NAME}", "get_lease"),
    ("PUT", rf"/apis/coordination.k8s.io/v1{NS}/leases/{NAME}", "replace_lease"),
    ("GET", r"/apis/batch/v1/jobs", "list_jobs"),
    ("GET", rf"/apis/batch/v1{NS}/jobs", "list_jobs"),
    ("POST", rf"/apis/batch/v1{NS}/jobs", "create_job"),
    ("GET", rf"/apis/batch/v1{NS}/jobs/{NAME}", "get_job"),
    ("PATCH", rf"/apis/batch/v1{NS}/jobs/{NAME}", "patch_job"),
    ("DELETE", rf"/apis/batch/v1{NS}/jobs/{NAME}", "delete_job"),
]
# RBAC verbs and resources per handler, for the 403 knob (Cluster.denied).
RBAC = {"list_nodes": ("list", "nodes", ""), "get_node": ("get", "nodes", ""),
        "list_pods": ("list", "pods", ""), "create_pod": ("create", "pods", ""),
        "get_pod": ("get", "pods", ""), "patch_pod": ("patch", "pods", ""),
        "delete_pod": ("delete", "pods", ""), "pod_log": ("get", "pods/log", ""),
        # Since 1.35 a WebSocket exec (a GET) needs create as well as get.
        "pod_exec": ("create", "pods/exec", ""),
        "token_request": ("create", "serviceaccounts/token", ""),
        "list_services": ("list", "services", ""), "create_service": ("create", "services", ""),
        "get_service": ("get", "services", ""), "delete_service": ("delete", "services", ""),
        "list_claims": ("list", "persistentvolumeclaims", ""),
        "create_claim": ("create", "persistentvolumeclaims", ""),
        "get_claim": ("get", "persistentvolumeclaims", ""),
        "delete_claim": ("delete", "persistentvolumeclaims", ""),
        "list_jobs": ("list", "jobs", "batch"), "create_job": ("create", "jobs", "batch"),
        "get_job": ("get", "jobs", "batch"), "patch_job": ("patch", "jobs", "batch"),
        "delete_job": ("delete", "jobs", "batch"),
        "create_lease": ("create", "leases", "coordination.k8s.io"),
        "get_lease": ("get", "leases", "coordination.k8s.io"),
        "replace_lease": ("update", "leases", "coordination.k8s.io")}


class Reply:
    def __init__(self, code: int, body: Any = None, text: str | None = None,
                 stream: Callable[[], Any] | None = None, upgrade: Any = None):
        self.code, self.body, self.text, self.stream = code, body, text, stream
        self.upgrade = upgrade  # execs.Upgrade: the server switches to a WebSocket


class Api:
    """Request handling without the socket: (method, path, query, headers, body) -> Reply."""

    def __init__(self, cluster: Cluster, admin_key: str):
        self.cluster = cluster
        self.admin_key = admin_key
        self.log: list[dict[str, Any]] = []
        self.exec_tokens_issued = 0
        self.exec_ttl: float = 3600

    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> Reply:
        parts = urlsplit(target)
        path = parts.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        entry: dict[str, Any] = {"method": method, "path": path, "query": query,
                                 "content_type": headers.get("content-type"), "user": None}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        entry["body"] = copy.deepcopy(body)
        try:
            reply = self._route(method, path, query, headers, body, entry,
                                parse_qs(parts.query))
        except ApiError as exc:
            reply = Reply(exc.code, exc.body)
        entry["status"] = reply.code
        with self.cluster.lock:
            self.log.append(entry)
        return reply

    def _route(self, method: str, path: str, query: dict[str, str], headers: dict[str, str],
               body: Any, entry: dict[str, Any], queries: dict[str, list[str]]) -> Reply:
        if path == "/_emulator/tokens" and method == "POST":
            return self._admin_token(headers, body)
        user = self.cluster.authenticate(headers.get("authorization"))
        # Which token, without keeping it: lets a test see a refreshed token in use.
        entry["user"] = user
        entry["token"] = hashlib.sha256(headers["authorization"].encode()).hexdigest()[:12]
        allowed = False
        for verb, pattern, name in ROUTES:
            match = re.fullmatch(pattern, path)
            if not match:
                continue
            allowed = True
            if verb != method:
                continue
            args = match.groupdict()
            if name in RBAC:
                rbac_verb, resource, group = RBAC[name]
                if name == "pod_exec" and verb == "GET":
                    self.cluster.authorize(user, "get", resource, group, args.get("ns"))
                self.cluster.authorize(user, rbac_verb, resource, group, args.get("ns"))
            if not isinstance(body, (dict, type(None))):
                raise bad_request("the body of the request is not JSON")
            with self.cluster.lock:  # the client may call from several threads
                self.cluster.tick()
                result: Reply = getattr(self, name)(query=query, body=body, headers=headers,
                                                    queries=queries, **args)
            return result
        if allowed:
            raise failure(405, "MethodNotAllowed",
                          "the server does not allow this method on the requested resource")
        raise failure(404, "NotFound", "the server could not find the requested resource",
                      {})

    def _admin_token(self, headers: dict[str, str], body: Any) -> Reply:
        if not secrets.compare_digest(headers.get(ADMIN_HEADER.lower(), ""), self.admin_key):
            raise failure(401, "Unauthorized", "Unauthorized")
        ttl = float((body or {}).get("ttl", self.exec_ttl))
        user = (body or {}).get("user", "exec-user")
        token, expires = self.cluster.issue_token(user, ttl)
        with self.cluster.lock:
            self.exec_tokens_issued += 1
        return Reply(201, {"token": token, "expirationTimestamp": rfc3339(expires or 0)})

    # --- handlers -------------------------------------------------------------
    def version(self, **_: Any) -> Reply:
        return Reply(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-emulator",
                           "platform": "linux/amd64"})

    def api_versions(self, **_: Any) -> Reply:
        return Reply(200, {"kind": "APIVersions", "versions": ["v1"],
                           "serverAddressByClientCIDRs": []})

    def _list(self, kind: str, api: str, items: list[dict[str, Any]], query: dict[str, str]
              ) -> Reply:
        if query.get("continue") and self.cluster.knobs.expire_continue > 0:
            self.cluster.knobs.expire_continue -= 1
            self.cluster.compact()
        selected = bool(query.get("labelSelector") or query.get("fieldSelector"))
        items, meta = chunks.page(items, query, self.cluster._rv, self.cluster.compacted_rv,
                                  selected)
        stripped = []
        for item in items:
            item = copy.deepcopy(item)
            item.pop("kind", None), item.pop("apiVersion", None)  # as real lists
            stripped.append(item)
        return Reply(200, {"kind": kind, "apiVersion": api, "metadata": meta, "items": stripped})

    def _filter(self, items: Any, query: dict[str, str], fields: Any, supported: set[str]
                ) -> list[dict[str, Any]]:
        labels = label_matcher(query.get("labelSelector"))
        by_field = field_matcher(query.get("fieldSelector"), fields, supported)
        return [i for i in items
                if labels(i["metadata"].get("labels") or {}) and by_field(i)]

    def list_nodes(self, query: dict[str, str], **_: Any) -> Reply:
        nodes = [{"kind": "Node", "apiVersion": "v1", **n} for n in self.cluster.nodes.values()]
        return self._list("NodeList", "v1", self._filter(nodes, query, _node_fields, NODE_FIELDS),
                          query)

    def get_node(self, name: str, **_: Any) -> Reply:
        node = self.cluster.nodes.get(name)
        if node is None:
            raise not_found("nodes", name)
        return Reply(200, {"kind": "Node", "apiVersion": "v1", **node})

    def list_pods(self, query: dict[str, str], ns: str | None = None, **_: Any) -> Reply:
        pods = sorted((p for (space, _n), p in self.cluster.pods.items()
                       if ns is None or space == ns),
                      key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
        return self._list("PodList", "v1", self._filter(pods, query, _pod_fields, POD_FIELDS),
                          query)

    def create_pod(self, ns: str, body: Any, **_: Any) -> Reply:
        pod = self._typed(body, "Pod", "v1")
        return Reply(201, self.cluster.create_pod(ns, pod))

    def get_pod(self, ns: str, name: str, **_: Any) -> Reply:
        return Reply(200, copy.deepcopy(self.cluster.pod(ns, name)))

    def patch_pod(self, ns: str, name: str, body: Any, headers: dict[str, str], **_: Any
                  ) -> Reply:
        with self.cluster.lock:
            pod = self.cluster.pod(ns, name)
            return Reply(200, self._patch(pod, body, headers, "Pod", "", set()))

    def delete_pod(self, ns: str, name: str, body: Any, query: dict[str, str], **_: Any
                   ) -> Reply:
        grace = (body or {}).get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        with self.cluster.lock:
            _preconditions(self.cluster.pod(ns, name), (body or {}).get("preconditions"))
            return Reply(200, self.cluster.delete_pod(ns, name,
                                                      None if grace is None else float(grace)))

    def pod_log(self, ns: str, name: str, query: dict[str, str], **_: Any) -> Reply:
        container = query.get("container")
        lines = self.cluster.logs(ns, name, container)
        tail = query.get("tailLines")
        if tail is not None:
            if not tail.lstrip("-").isdigit():
                raise bad_request(f'tailLines: Invalid value: "{tail}"')
            lines = lines[-int(tail):] if int(tail) > 0 else []
        if query.get("follow") != "true":
            return Reply(200, text="".join(f"{line}\n" for line in lines))

        def stream() -> Any:
            first = self.cluster.sims.get((ns, name))
            sent = len(first.logs) if first else 0
            yield "".join(f"{line}\n" for line in lines)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                self.cluster.tick()
                with self.cluster.lock:
                    sim = self.cluster.sims.get((ns, name))
                    new = sim.logs[sent:] if sim else []
                    sent += len(new)
                    done = self.cluster.finished(ns, name)
                if new:
                    yield "".join(f"{line}\n" for line in new)
                if done:
                    return
                time.sleep(0.02)

        return Reply(200, stream=stream)

    def pod_exec(self, ns: str, name: str, queries: dict[str, list[str]],
                 headers: dict[str, str], **_: Any) -> Reply:
        from .execs import upgrade
        return Reply(101, upgrade=upgrade(self.cluster, ns, name, queries, headers))

    def token_request(self, ns: str, name: str, body: Any, **_: Any) -> Reply:
        self._typed(body or {}, "TokenRequest", "authentication.k8s.io/v1")
        return Reply(201, self.cluster.create_token_request(ns, name, body or {}))

    def _namespaced(self, store: dict[tuple[str, str], dict[str, Any]], ns: str,
                    kind: str, api: str) -> list[dict[str, Any]]:
        return [{"kind": kind, "apiVersion": api, **o} for (space, _n), o in sorted(store.items())
                if space == ns]

    def list_services(self, ns: str, query: dict[str, str], **_: Any) -> Reply:
        items = self._namespaced(self.cluster.services, ns, "Service", "v1")
        return self._list("ServiceList", "v1", self._filter(items, query, _name_fields,
                                                            NAME_FIELDS), query)

    def create_service(self, ns: str, body: Any, **_: Any) -> Reply:
        from .services import create_service
        return Reply(201, create_service(self.cluster, ns, self._typed(body, "Service", "v1")))

    def get_service(self, ns: str, name: str, **_: Any) -> Reply:
        from .services import service
        return Reply(200, copy.deepcopy(service(self.cluster, ns, name)))

    def delete_service(self, ns: str, name: str, **_: Any) -> Reply:
        from .services import delete_service
        return Reply(200, delete_service(self.cluster, ns, name))

    def list_claims(self, ns: str, query: dict[str, str], **_: Any) -> Reply:
        items = self._namespaced(self.cluster.claims, ns, "PersistentVolumeClaim", "v1")
        return self._list("PersistentVolumeClaimList", "v1",
                          self._filter(items, query, _name_fields, NAME_FIELDS), query)

    def create_claim(self, ns: str, body: Any, **_: Any) -> Reply:
        from .services import create_claim
        return Reply(201, create_claim(self.cluster, ns,
                                       self._typed(body, "PersistentVolumeClaim", "v1")))

    def get_claim(self, ns: str, name: str, **_: Any) -> Reply:
        from .services import claim
        return Reply(200, copy.deepcopy(claim(self.cluster, ns, name)))

    def delete_claim(self, ns: str, name: str, **_: Any) -> Reply:
        from .services import delete_claim
        return Reply(200, delete_claim(self.cluster, ns, name))

    def create_lease(self, ns: str, body: Any, **_: Any) -> Reply:
        from .leases import API, create_lease
        return Reply(201, create_lease(self.cluster, ns, self._typed(body, "Lease", API)))

    def get_lease(self, ns: str, name: str, **_: Any) -> Reply:
        from .leases import lease
        return Reply(200, copy.deepcopy(lease(self.cluster, ns, name)))

    def replace_lease(self, ns: str, name: str, body: Any, **_: Any) -> Reply:
        from .leases import API, replace_lease
        return Reply(200, replace_lease(self.cluster, ns, name,
                                        self._typed(body, "Lease", API)))

    def list_jobs(self, query: dict[str, str], ns: str | None = None, **_: Any) -> Reply:
        jobs = sorted((j for (space, _n), j in self.cluster.jobs.items()
                       if ns is None or space == ns),
                      key=lambda j: (j["metadata"]["namespace"], j["metadata"]["name"]))
        return self._list("JobList", "batch/v1",
                          self._filter(jobs, query, _job_fields, JOB_FIELDS), query)

    def create_job(self, ns: str, body: Any, **_: Any) -> Reply:
        job = self._typed(body, "Job", "batch/v1")
        return Reply(201, self.cluster.job_controller.create(ns, job))

    def get_job(self, ns: str, name: str, **_: Any) -> Reply:
        return Reply(200, copy.deepcopy(self.cluster.job_controller.get(ns, name)))

    def patch_job(self, ns: str, name: str, body: Any, headers: dict[str, str], **_: Any
                  ) -> Reply:
        with self.cluster.lock:
            job = self.cluster.job_controller.get(ns, name)
            return Reply(200, self._patch(job, body, headers, "Job", "batch",
                                          {"activeDeadlineSeconds", "suspend", "parallelism",
                                           "ttlSecondsAfterFinished"}))

    def delete_job(self, ns: str, name: str, body: Any, query: dict[str, str], **_: Any
                   ) -> Reply:
        options = body or {}
        policy = options.get("propagationPolicy") or query.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is False:
            policy = "Background"  # the deprecated flag's meaning
        return Reply(200, self.cluster.job_controller.delete(ns, name, policy))

    # --- shared ---------------------------------------------------------------
    def _typed(self, body: Any, kind: str, api: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request(f"{kind} in version \"{api.split('/')[-1]}\" cannot be handled "
                              f"as a {kind}: no body")
        if body.get("kind") not in (None, kind) or body.get("apiVersion") not in (None, api):
            raise bad_request(f"the API version in the data ({body.get('apiVersion')}) does "
                              f"not match the expected API version ({api})")
        body.setdefault("kind", kind)
        body.setdefault("apiVersion", api)
        return body

    def _patch(self, obj: dict[str, Any], patch: Any, headers: dict[str, str], kind: str,
               group: str, mutable_spec: set[str]) -> dict[str, Any]:
        content_type = (headers.get("content-type") or "").split(";")[0].strip()
        if content_type not in MERGE_TYPES:
            raise failure(415, "UnsupportedMediaType",
                          "the body of the request was in an unknown format - accepted media "
                          "types include: application/json-patch+json, "
                          "application/merge-patch+json, application/apply-patch+yaml, "
                          "application/strategic-merge-patch+json")
        if not isinstance(patch, dict):
            raise bad_request("the body of the request is not a JSON object")
        merged = merge_patch(obj, patch)
        name = obj["metadata"]["name"]
        old_spec = {k: v for k, v in obj["spec"].items() if k not in mutable_spec}
        new_spec = {k: v for k, v in (merged.get("spec") or {}).items() if k not in mutable_spec}
        if new_spec != old_spec:
            raise invalid(kind, group, name, [(
                "FieldValueForbidden", "spec",
                "Forbidden: pod updates may not change fields other than `spec.containers[*]"
                ".image`, `spec.activeDeadlineSeconds` or `spec.tolerations` (only additions "
                "to existing tolerations)" if kind == "Pod" else "field is immutable")])
        for key in ("labels", "annotations"):
            value = (merged.get("metadata") or {}).get(key)
            if value:
                obj["metadata"][key] = value
            else:
                obj["metadata"].pop(key, None)
        for key in mutable_spec:
            if key in (merged.get("spec") or {}):
                obj["spec"][key] = merged["spec"][key]
        self.cluster.touch(obj)
        return copy.deepcopy(obj)


def _preconditions(obj: dict[str, Any], wanted: Any) -> None:
    """DeleteOptions.preconditions: a mismatch is 409 Conflict, worded as the
    apiserver words it. k8s.io/apiserver pkg/storage/interfaces.go
    (Preconditions.Check) makes "Precondition failed: UID in precondition: %v,
    UID in object meta: %v" (or ResourceVersion) an invalid-object StorageError,
    whose Error() in pkg/storage/errors.go is "StorageError: %s, Code: %d, Key:
    %s, ResourceVersion: %d, AdditionalErrorMsg: %s" (code 4, "invalid
    object"; no resource version); the registry's delete turns that into
    apimachinery's NewConflict: "Operation cannot be fulfilled on %s %q: %v",
    reason Conflict, details {name, kind: the resource}. A published real one,
    for a pod: github.com/virtual-kubelet/tensile-kube/issues/51 ("Operation
    cannot be fulfilled on pods "qabb-...": StorageError: invalid object,
    Code: 4, Key: /registry/pods/qa/qabb-..., ResourceVersion: 0,
    AdditionalErrorMsg: Precondition failed: UID in precondition: ..., UID in
    object meta: ...")."""
    if not wanted:
        return
    meta = obj["metadata"]
    key = f"/registry/pods/{meta.get('namespace')}/{meta['name']}"
    for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        if wanted.get(field) is not None and wanted[field] != meta.get(field):
            raise failure(409, "Conflict", (
                f"Operation cannot be fulfilled on pods \"{meta['name']}\": StorageError: "
                f"invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
                f"AdditionalErrorMsg: Precondition failed: {label} in precondition: "
                f"{wanted[field]}, {label} in object meta: {meta.get(field)}"),
                {"name": meta["name"], "kind": "pods"})
