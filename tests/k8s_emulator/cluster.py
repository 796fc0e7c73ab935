"""The emulated cluster's state and the controllers that move it on: the
scheduler, a kubelet that starts and ends containers after simulated delays,
pod deletion with a grace period, and bearer tokens with an expiry.

Time is read from ``clock`` (epoch seconds) and the state is brought up to date
lazily on every request (``tick``), so a test can use the real clock with
short delays, or a ``FakeClock`` it advances by hand."""

from __future__ import annotations

import copy
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable

from . import pods as P
from .objects import (
    ApiError, already_exists, bad_request, failure, forbidden, not_found, rfc3339, unauthorized,
)


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Knobs:
    """Simulated durations and outcomes; change them between calls as a test needs."""
    pod_start_seconds: float = 0.2      # bound to a node -> container running
    terminate_seconds: float = 0.1      # grace period before a deleted pod is gone
    job_run_seconds: float = 0.5        # a job pod's container runs this long
    job_failures: int = 0               # this many job pod runs (in order) exit 1
    pod_log: Callable[[dict[str, Any]], list[str]] | None = None  # extra log lines
    # Called with (cluster, pod) before a pod is admitted: lets a test stage a
    # race, e.g. another tenant's pod taking the GPUs between plan and create.
    admission: Callable[[Any, dict[str, Any]], None] | None = None
    # The exec subprotocols the API server speaks (an older server: no v5).
    # The next this many list requests with a continue token find it compacted
    # away (410 Expired), as when paging took longer than etcd's compaction interval.
    expire_continue: int = 0
    exec_protocols: tuple[str, ...] = ("v5.channel.k8s.io", "v4.channel.k8s.io",
                                       "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")


@dataclass
class Token:
    user: str
    expires_at: float | None
    audiences: list[str] = field(default_factory=list)


def gpu_node(name: str, gpus: int = 8, gpu_class: str = "H100_NVLINK_80GB",
             product: str = "NVIDIA-H100-80GB-HBM3", region: str = "US-EAST-04A",
             cpu: str = "128", memory: str = "2Ti", labels: dict[str, str] | None = None
             ) -> dict[str, Any]:
    """A GPU node as CoreWeave labels it, with NVIDIA feature discovery's labels too."""
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "topology.kubernetes.io/region": region,
                   "gpu.nvidia.com/class": gpu_class, "nvidia.com/gpu.product": product,
                   "nvidia.com/gpu.count": str(gpus), **(labels or {})}
    resources = {"cpu": cpu, "memory": memory, "pods": "110", P.GPU: str(gpus)}
    return {"metadata": {"name": name, "labels": node_labels},
            "spec": {}, "status": {"capacity": dict(resources), "allocatable": dict(resources),
                                   "conditions": [{"type": "Ready", "status": "True",
                                                   "reason": "KubeletReady"}]}}


@dataclass
class PodSim:
    scheduled_at: float | None = None
    running_at: float | None = None
    ends_at: float | None = None
    exit_code: int = 0
    remove_at: float | None = None
    logs: list[str] = field(default_factory=list)


class Cluster:
    def __init__(self, nodes: list[dict[str, Any]] | None = None, *,
                 namespaces: tuple[str, ...] = ("default",),
                 service_accounts: tuple[str, ...] = ("default",),
                 clock: Callable[[], float] = time.time, knobs: Knobs | None = None):
        self.clock = clock
        self.knobs = knobs or Knobs()
        self.lock = threading.RLock()
        self.nodes = {n["metadata"]["name"]: self._stamp(copy.deepcopy(n)) for n in
                      (nodes if nodes is not None else [gpu_node("gpu-node-1"),
                                                        gpu_node("gpu-node-2")])}
        self.namespaces = set(namespaces) | {"kube-system"}
        self.service_accounts = {(ns, sa) for ns in self.namespaces for sa in service_accounts}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.sims: dict[tuple[str, str], PodSim] = {}
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.services: dict[tuple[str, str], dict[str, Any]] = {}
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        # (monotonic time, "create"/"replace", name, spec) of every Lease write (leases.py)
        self.lease_writes: list[tuple[float, str, str, dict[str, Any]]] = []
        self.default_storage_class = "standard"
        self.failed_creates: list[dict[str, Any]] = []  # the Job controller's FailedCreate
        self._service_ips = 0
        self._volumes = 0
        self.tokens: dict[str, Token] = {}
        self.denied: set[tuple[str, str]] = set()   # (verb, resource) -> 403
        self.deletions: list[dict[str, Any]] = []   # every DELETE, with its policy
        self.failures_left = self.knobs.job_failures
        self._rv = 1000
        self.compacted_rv = 0  # continue tokens from before this are gone (410 Expired)
        self._ips = 0
        self._last = self.clock()
        from .jobs import JobController
        self.job_controller = JobController(self)

    # --- bookkeeping --------------------------------------------------------
    def next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", rfc3339(self.clock()))
        meta["resourceVersion"] = self.next_rv() if hasattr(self, "_rv") else "1"
        return obj

    def compact(self) -> None:
        """What etcd's periodic compaction does to lists in progress: every
        continue token issued so far is too old (after some writes: bump the rv)."""
        with self.lock:
            self.compacted_rv = int(self.next_rv())

    def touch(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = self.next_rv()

    def require_namespace(self, namespace: str) -> None:
        if namespace not in self.namespaces:
            raise not_found("namespaces", namespace)

    def collect_dependents(self, owner_uid: str, orphan: bool) -> None:
        """The garbage collector for objects other than pods (a Job's pods are
        its controller's business): dependents of a deleted owner are deleted,
        or with Orphan lose the reference and stay."""
        for key, obj in list(self.services.items()):
            refs = obj["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == owner_uid for r in refs):
                continue
            if orphan:
                obj["metadata"]["ownerReferences"] = [r for r in refs
                                                      if r.get("uid") != owner_uid]
                self.touch(obj)
            else:
                del self.services[key]
                self.deletions.append({"kind": "Service", "namespace": key[0],
                                       "name": key[1], "by": "garbage-collector"})

    # --- auth ---------------------------------------------------------------
    def issue_token(self, user: str = "admin", ttl: float | None = None,
                    audiences: list[str] | None = None) -> tuple[str, float | None]:
        """A bearer token valid until now+ttl (whole seconds, as the
        expirationTimestamp a client is told); ttl None never expires."""
        token = ("eyJhbGciOiJSUzI1NiIsImtpZCI6ImVtdWxhdG9yIn0." + secrets.token_urlsafe(24)
                 + "." + secrets.token_urlsafe(32))
        expires = None if ttl is None else float(int(self.clock() + ttl))
        with self.lock:
            self.tokens[token] = Token(user, expires, list(audiences or []))
        return token, expires

    def expire_tokens(self, user: str | None = None) -> None:
        """Revoke early: the next request with such a token is a 401."""
        with self.lock:
            for token in self.tokens.values():
                if user is None or token.user == user:
                    token.expires_at = self.clock() - 1

    def authenticate(self, header: str | None) -> str:
        if not header or not header.startswith("Bearer "):
            raise unauthorized()
        token = self.tokens.get(header[len("Bearer "):].strip())
        if token is None or (token.expires_at is not None and self.clock() >= token.expires_at):
            raise unauthorized()
        return token.user

    def authorize(self, user: str, verb: str, resource: str, group: str,
                  namespace: str | None) -> None:
        if (verb, resource) in self.denied:
            raise forbidden(user, verb, resource, group, namespace)

    # --- the scheduler and the kubelet ---------------------------------------
    def tick(self) -> None:
        """Replay what happened since the last request in time order (a
        discrete-event loop), so a long clock jump gives the same history as
        many short ones: a retry pod starts when its predecessor failed, a
        deadline fires before a later pod end."""
        with self.lock:
            now = self.clock()
            while True:
                due = [t for t in self._events() if self._last < t <= now]
                if not due:
                    break
                self._process(min(due))
            self._process(now)

    def _events(self) -> list[float]:
        times = []
        for pod_key, sim in self.sims.items():
            if sim.remove_at is not None:
                times.append(sim.remove_at)
                continue
            if sim.scheduled_at is not None and sim.running_at is None:
                times.append(sim.scheduled_at + self.knobs.pod_start_seconds)
            if sim.ends_at is not None and self.pods[pod_key]["status"]["phase"] == "Running":
                times.append(sim.ends_at)
        return times + self.job_controller.events()

    def _process(self, at: float) -> None:
        self._last = max(self._last, at)
        for _ in range(10):  # until nothing changes at this instant
            before = self._rv
            for key in list(self.pods):
                self._advance_pod(key, at)
            self.job_controller.sync(at)
            from .services import release_claims
            release_claims(self)
            if self._rv == before:
                return

    def _advance_pod(self, key: tuple[str, str], now: float) -> None:
        pod, sim = self.pods.get(key), self.sims.get(key)
        if pod is None or sim is None:
            return
        if sim.remove_at is not None and now >= sim.remove_at:
            del self.pods[key], self.sims[key]
            return
        if sim.remove_at is not None:
            return
        if sim.scheduled_at is None:
            self._schedule(pod, sim, now)
        if sim.scheduled_at is not None and sim.running_at is None:
            start = sim.scheduled_at + self.knobs.pod_start_seconds
            if now >= start:
                self._run(pod, sim, start)
        if sim.ends_at is not None and pod["status"]["phase"] == "Running" and now >= sim.ends_at:
            self._end(pod, sim, sim.ends_at)

    def free(self, node: dict[str, Any], resource: str) -> Decimal:
        from .objects import quantity
        total = quantity(node["status"]["allocatable"].get(resource, "0")) or Decimal(0)
        name = node["metadata"]["name"]
        used = sum((P.requested(p, resource) for p in self.pods.values()
                    if p["spec"].get("nodeName") == name
                    and p["status"]["phase"] not in ("Succeeded", "Failed")), Decimal(0))
        return total - used

    def _schedule(self, pod: dict[str, Any], sim: PodSim, now: float) -> None:
        reasons: dict[str, int] = {}
        for name in sorted(self.nodes):
            node = self.nodes[name]
            reason = self._unfit(pod, node)
            if reason is None:
                pod["spec"]["nodeName"] = name
                sim.scheduled_at = now
                pod["status"] = {
                    "phase": "Pending", "qosClass": pod["status"].get("qosClass"),
                    "conditions": [P.condition("PodScheduled", "True", now)],
                    "containerStatuses": P.container_statuses(
                        pod, {"waiting": {"reason": "ContainerCreating"}}, False)}
                self.touch(pod)
                return
            reasons[reason] = reasons.get(reason, 0) + 1
        message = P.unschedulable_message(len(self.nodes), reasons)
        old = (pod["status"].get("conditions") or [{}])[0].get("message")
        if old != message:
            pod["status"]["conditions"] = [P.condition("PodScheduled", "False", now,
                                                       "Unschedulable", message)]
            self.touch(pod)

    def _unfit(self, pod: dict[str, Any], node: dict[str, Any]) -> str | None:
        if node["spec"].get("unschedulable"):
            return "node(s) were unschedulable"
        if not P.node_matches(pod["spec"], node["metadata"].get("labels") or {}):
            return "node(s) didn't match Pod's node affinity/selector"
        for resource in P.resources_of(pod):
            need = P.requested(pod, resource)
            if need and need > self.free(node, resource):
                return f"Insufficient {resource}"
        return None

    def _run(self, pod: dict[str, Any], sim: PodSim, at: float) -> None:
        node = self.nodes[pod["spec"]["nodeName"]]
        index = sorted(self.nodes).index(node["metadata"]["name"])
        self._ips += 1
        ip, host = f"10.244.{index}.{self._ips % 250 + 2}", f"10.0.0.{index + 10}"
        sim.running_at = at
        started = rfc3339(at)
        pod["status"].update({
            "phase": "Running", "hostIP": host, "hostIPs": [{"ip": host}], "podIP": ip,
            "podIPs": [{"ip": ip}], "startTime": rfc3339(sim.scheduled_at or at),
            "conditions": [P.condition(kind, "True", at) for kind in (
                "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                "PodScheduled")],
            "containerStatuses": P.container_statuses(
                pod, {"running": {"startedAt": started}}, True)})
        container = pod["spec"]["containers"][0]
        argv = [*(container.get("command") or []), *(container.get("args") or [])]
        sim.logs += [f"[emulator] container {container.get('name')} started: "
                     f"{container.get('image')} on {node['metadata']['name']}"]
        if argv:
            sim.logs.append("$ " + " ".join(str(a) for a in argv))
        for env in container.get("env") or []:
            if env.get("name") == "CHECKPOINT_DIR":
                sim.logs.append(f"CHECKPOINT_DIR={env.get('value')}")
        if self.knobs.pod_log:
            sim.logs += self.knobs.pod_log(pod)
        if "job-name" in (pod["metadata"].get("labels") or {}):
            sim.ends_at = at + self.knobs.job_run_seconds
            if self.failures_left > 0:
                self.failures_left -= 1
                sim.exit_code = 1
        self.touch(pod)

    def _end(self, pod: dict[str, Any], sim: PodSim, at: float, reason: str | None = None
             ) -> None:
        failed = sim.exit_code != 0 or reason is not None
        sim.logs.append("training done" if not failed else
                        f"error: simulated failure (exit code {sim.exit_code or 137})")
        terminated = {"exitCode": sim.exit_code if reason is None else 137,
                      "reason": reason or ("Completed" if not failed else "Error"),
                      "startedAt": rfc3339(sim.running_at or at), "finishedAt": rfc3339(at)}
        pod["status"].update({
            "phase": "Failed" if failed else "Succeeded",
            "conditions": [P.condition(kind, "False" if kind in ("Ready", "ContainersReady")
                                       else "True", at, "PodCompleted")
                           for kind in ("Initialized", "Ready", "ContainersReady",
                                        "PodScheduled")],
            "containerStatuses": P.container_statuses(pod, {"terminated": terminated}, False)})
        if reason:
            pod["status"]["reason"] = reason
        self.touch(pod)

    # --- pods -----------------------------------------------------------------
    def create_pod(self, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if self.knobs.admission is not None:
                self.knobs.admission(self, pod)
            self.require_namespace(namespace)
            meta = pod.setdefault("metadata", {})
            if meta.get("namespace") not in (None, namespace):
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
            P.check_pod(pod)
            key = (namespace, meta["name"])
            if key in self.pods:
                raise already_exists("pods", meta["name"])
            meta["namespace"] = namespace
            meta.pop("uid", None)
            P.default_pod(pod)
            self._stamp(pod)
            # The scheduler acts after the create returns, as on a real cluster:
            # the 201 carries phase Pending and no conditions yet.
            reply = copy.deepcopy(pod)
            self.pods[key], self.sims[key] = pod, PodSim()
            self._schedule(pod, self.sims[key], self.clock())
            return reply

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise not_found("pods", name)
        return pod

    def delete_pod(self, namespace: str, name: str, grace: float | None = None
                   ) -> dict[str, Any]:
        with self.lock:
            pod, sim = self.pod(namespace, name), self.sims[(namespace, name)]
            self.deletions.append({"kind": "Pod", "namespace": namespace, "name": name})
            if sim.remove_at is None:
                now = self.clock()
                wait = self.knobs.terminate_seconds if grace is None else grace
                if sim.running_at is None or pod["status"]["phase"] in ("Succeeded", "Failed"):
                    wait = 0  # nothing runs: the kubelet has nothing to stop
                sim.remove_at = now + wait
                pod["metadata"]["deletionTimestamp"] = rfc3339(now + wait)
                pod["metadata"]["deletionGracePeriodSeconds"] = int(wait)
                self.touch(pod)
            return copy.deepcopy(pod)

    def logs(self, namespace: str, name: str, container: str | None) -> list[str]:
        pod = self.pod(namespace, name)
        names = [c.get("name") for c in pod["spec"]["containers"]]
        if container is None and len(names) > 1:
            raise bad_request(f"a container name must be specified for pod {name}, "
                              f"choose one of: [{' '.join(names)}]")
        if container is not None and container not in names:
            raise bad_request(f"container {container} is not valid for pod {name}")
        sim = self.sims[(namespace, name)]
        if sim.scheduled_at is not None and sim.running_at is None:
            raise bad_request(f'container "{container or names[0]}" in pod "{name}" is '
                              "waiting to start: ContainerCreating")
        return list(sim.logs)

    def finished(self, namespace: str, name: str) -> bool:
        pod = self.pods.get((namespace, name))
        return pod is None or pod["status"]["phase"] in ("Succeeded", "Failed") or \
            self.sims[(namespace, name)].remove_at is not None

    def create_token_request(self, namespace: str, sa: str, body: dict[str, Any]
                             ) -> dict[str, Any]:
        from .jobs import token_request
        return token_request(self, namespace, sa, body)


__all__ = ["ApiError", "Cluster", "FakeClock", "Knobs", "gpu_node", "failure"]
