"""batch/v1 Jobs (the job controller and the garbage collector's propagation
policies) and the TokenRequest subresource.

Indexed Jobs follow kubernetes/kubernetes pkg/controller/job (job_controller.go
manageJob, indexed_job_utils.go): one pod per pending index up to
parallelism, each pod annotated (and, PodIndexLabel being on by default from
1.28, labelled) batch.kubernetes.io/job-completion-index, with the hostname
``<job>-<index>``, the generateName ``<job>-<index>-`` and a
JOB_COMPLETION_INDEX env var read from that label through the downward API;
a failed index gets a new pod, the Job completes when every index has
succeeded (status.completedIndexes) and fails once failures exceed
backoffLimit. The garbage collector removes what the Job owns (pods and any
object whose ownerReferences name it, e.g. a Service) by its propagation
policy."""

from __future__ import annotations

import copy
import secrets
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .objects import (
    ApiError, already_exists, bad_request, invalid, name_causes, not_found, rfc3339, success,
)
from .pods import validate_pod_spec

if TYPE_CHECKING:
    from .cluster import Cluster

GROUP = "batch"
FINISHED = ("Complete", "Failed")
INDEX = "batch.kubernetes.io/job-completion-index"  # batch/v1 JobCompletionIndexAnnotation
INDEX_ENV = "JOB_COMPLETION_INDEX"
MAX_GENERATED_NAME = 58  # apiserver/pkg/storage/names: 63 minus the 5 random characters
TOKEN_MIN, TOKEN_MAX = 600, 2**32


def _condition(kind: str, reason: str, message: str, at: float) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastProbeTime": rfc3339(at),
            "lastTransitionTime": rfc3339(at), "reason": reason, "message": message}


class JobController:
    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    # --- API ----------------------------------------------------------------
    def create(self, namespace: str, job: dict[str, Any]) -> dict[str, Any]:
        c = self.cluster
        with c.lock:
            c.require_namespace(namespace)
            meta = job.setdefault("metadata", {})
            if meta.get("namespace") not in (None, namespace):
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
            name = meta.get("name") or ""
            self._validate(job, name)
            if (namespace, name) in c.jobs:
                raise already_exists("jobs", name, GROUP)
            meta["namespace"] = namespace
            meta.pop("uid", None)
            c._stamp(job)
            spec = job["spec"]
            spec.setdefault("backoffLimit", 6)
            spec.setdefault("completionMode", "NonIndexed")
            spec.setdefault("completions", 1)
            spec.setdefault("parallelism", 1)
            spec.setdefault("suspend", False)
            uid = meta["uid"]
            marks = {"batch.kubernetes.io/controller-uid": uid,
                     "batch.kubernetes.io/job-name": name,
                     "controller-uid": uid, "job-name": name}
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            template_meta = spec["template"].setdefault("metadata", {})
            template_meta["labels"] = {**(template_meta.get("labels") or {}), **marks}
            job["status"] = {"ready": 0, "uncountedTerminatedPods": {}}
            c.jobs[(namespace, name)] = job
            self.sync(c.clock())
            return copy.deepcopy(job)

    def _validate(self, job: dict[str, Any], name: str) -> None:
        # A Job's name becomes the job-name label value, so 63 characters at most.
        causes = name_causes(name, bool(job["metadata"].get("generateName")), 63)
        spec = job.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("template"), dict):
            causes.append(("FieldValueRequired", "spec.template", "Required value"))
            raise invalid("Job", GROUP, name, causes)
        pod_spec = spec["template"].get("spec")
        causes += validate_pod_spec(pod_spec, "Job", GROUP, name, "spec.template.spec")
        policy = (pod_spec or {}).get("restartPolicy")
        if policy not in ("OnFailure", "Never"):
            causes.append(("FieldValueNotSupported", "spec.template.spec.restartPolicy",
                           f'Unsupported value: "{policy or "Always"}": supported values: '
                           '"OnFailure", "Never"'))
        mode = spec.get("completionMode", "NonIndexed")
        if mode not in ("NonIndexed", "Indexed"):
            causes.append(("FieldValueNotSupported", "spec.completionMode",
                           f'Unsupported value: "{mode}": supported values: "NonIndexed", '
                           '"Indexed"'))
        elif mode == "Indexed" and spec.get("completions") is None:
            causes.append(("FieldValueRequired", "spec.completions",
                           "Required value: when completion mode is Indexed"))
        for field in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished",
                      "completions", "parallelism"):
            value = spec.get(field)
            if value is not None and (not isinstance(value, int) or value < 0):
                causes.append(("FieldValueInvalid", f"spec.{field}",
                               f"Invalid value: {value}: must be greater than or equal to 0"))
        if causes:
            raise invalid("Job", GROUP, name, causes)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        job = self.cluster.jobs.get((namespace, name))
        if job is None:
            raise not_found("jobs", name, GROUP)
        return job

    def delete(self, namespace: str, name: str, policy: str | None) -> dict[str, Any]:
        """Jobs' default propagation through the REST API is Orphan (the batch/v1
        registry's DefaultGarbageCollectionPolicy): a client that sends no policy
        leaves the pods running, which is exactly what a test must be able to see."""
        c = self.cluster
        with c.lock:
            job = self.get(namespace, name)
            effective = policy or "Orphan"
            if effective not in ("Orphan", "Background", "Foreground"):
                raise invalid("DeleteOptions", "", "", [(
                    "FieldValueNotSupported", "propagationPolicy",
                    f'Unsupported value: "{policy}": supported values: "Foreground", '
                    '"Background", "Orphan"')])
            c.deletions.append({"kind": "Job", "namespace": namespace, "name": name,
                                "propagationPolicy": policy, "effective": effective})
            mine = self.pods_of(job)
            uid = job["metadata"]["uid"]
            if effective == "Background":
                del c.jobs[(namespace, name)]
                for pod in mine:
                    c.delete_pod(namespace, pod["metadata"]["name"])
                c.collect_dependents(uid, orphan=False)
                return success(name, "jobs", uid, GROUP)
            now = c.clock()
            job["metadata"]["deletionTimestamp"] = rfc3339(now)
            job["metadata"]["deletionGracePeriodSeconds"] = 0
            job["metadata"]["finalizers"] = ["orphan" if effective == "Orphan"
                                             else "foregroundDeletion"]
            c.touch(job)
            answer = copy.deepcopy(job)
            if effective == "Orphan":
                for pod in mine:
                    pod["metadata"]["ownerReferences"] = []
                    c.touch(pod)
                del c.jobs[(namespace, name)]
                c.collect_dependents(uid, orphan=True)
            else:
                for pod in mine:
                    c.delete_pod(namespace, pod["metadata"]["name"])
                c.collect_dependents(uid, orphan=False)
            return answer

    def pods_of(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        uid = job["metadata"]["uid"]
        return [p for p in self.cluster.pods.values()
                if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]

    # --- the controller -------------------------------------------------------
    def events(self) -> list[float]:
        """When a deadline or a TTL will fire, for the cluster's event loop."""
        times = []
        for job in self.cluster.jobs.values():
            spec, status = job["spec"], job["status"]
            done = [x for x in status.get("conditions") or [] if x["type"] in FINISHED]
            if done and spec.get("ttlSecondsAfterFinished") is not None:
                finished = status.get("completionTime") or done[0]["lastTransitionTime"]
                times.append(_epoch(finished) + spec["ttlSecondsAfterFinished"])
            elif not done and "startTime" in status and spec.get("activeDeadlineSeconds"):
                times.append(_epoch(status["startTime"]) + spec["activeDeadlineSeconds"])
        return times

    def sync(self, now: float) -> None:
        c = self.cluster
        for key, job in list(c.jobs.items()):
            mine = self.pods_of(job)
            meta, spec, status = job["metadata"], job["spec"], job["status"]
            if meta.get("deletionTimestamp"):  # Foreground: gone once its pods are
                if not mine:
                    del c.jobs[key]
                continue
            done = next((x for x in status.get("conditions") or [] if x["type"] in FINISHED),
                        None)
            if done:
                ttl = spec.get("ttlSecondsAfterFinished")
                finished = status.get("completionTime") or done["lastTransitionTime"]
                if ttl is not None and now >= _epoch(finished) + ttl:
                    self.delete(key[0], key[1], "Background")
                continue
            self._count(job, mine, now)

    def _count(self, job: dict[str, Any], mine: list[dict[str, Any]], now: float) -> None:
        c = self.cluster
        spec, status, namespace = job["spec"], job["status"], job["metadata"]["namespace"]
        if "startTime" not in status:
            status["startTime"] = rfc3339(now)
        started = _epoch(status["startTime"])
        deadline = spec.get("activeDeadlineSeconds")
        deadline_at = None if deadline is None else started + deadline
        succeeded = failed = 0
        active: list[dict[str, Any]] = []
        done_indexes: set[int] = set()
        for pod in mine:
            sim = c.sims[(namespace, pod["metadata"]["name"])]
            phase = pod["status"]["phase"]
            late = deadline_at is not None and sim.ends_at is not None and sim.ends_at > deadline_at
            if phase == "Succeeded" and not late:
                succeeded += 1
                if _index(pod) is not None:
                    done_indexes.add(_index(pod))  # type: ignore[arg-type]
            elif phase == "Failed" and not late:
                failed += 1
            elif sim.remove_at is None and phase not in ("Succeeded", "Failed"):
                active.append(pod)
        before = dict(status)
        for field, value in (("succeeded", succeeded), ("failed", failed),
                             ("active", len(active))):
            if value:
                status[field] = value
            else:
                status.pop(field, None)
        status["ready"] = sum(1 for p in active if p["status"]["phase"] == "Running")
        indexed = spec.get("completionMode") == "Indexed"
        if indexed:
            if done_indexes:
                status["completedIndexes"] = _intervals(done_indexes)
            complete = len(done_indexes) >= spec["completions"]
        else:
            complete = succeeded >= spec["completions"]
        if complete:
            end = max(c.sims[(namespace, p["metadata"]["name"])].ends_at or now
                      for p in mine if p["status"]["phase"] == "Succeeded")
            self._finish(job, "Complete", "CompletionsReached",
                         "Reached expected number of succeeded pods", end, active)
            status["completionTime"] = rfc3339(end)
        elif deadline_at is not None and now >= deadline_at:
            self._finish(job, "Failed", "DeadlineExceeded",
                         "Job was active longer than specified deadline", deadline_at, active)
        elif failed > spec["backoffLimit"]:
            self._finish(job, "Failed", "BackoffLimitExceeded",
                         "Job has reached the specified backoff limit", now, active)
        elif indexed and not spec.get("suspend"):
            running = {_index(p) for p in active}
            pending = [i for i in range(spec["completions"])
                       if i not in done_indexes and i not in running]
            for index in pending[:max(0, spec["parallelism"] - len(active))]:
                if self._start_pod(job, index):
                    status["active"] = status.get("active", 0) + 1
        elif not active and not spec.get("suspend"):
            if self._start_pod(job):
                status["active"] = 1
        if status != before:
            c.touch(job)

    def _finish(self, job: dict[str, Any], kind: str, reason: str, message: str, at: float,
                active: list[dict[str, Any]]) -> None:
        target = "SuccessCriteriaMet" if kind == "Complete" else "FailureTarget"
        job["status"]["conditions"] = [_condition(target, reason, message, at),
                                       _condition(kind, reason, message, at)]
        job["status"].pop("active", None)
        job["status"]["ready"] = 0
        if kind == "Failed" and active:
            job["status"]["failed"] = job["status"].get("failed", 0) + len(active)
            for pod in active:
                self.cluster.delete_pod(job["metadata"]["namespace"], pod["metadata"]["name"])

    def _start_pod(self, job: dict[str, Any], index: int | None = None) -> bool:
        c = self.cluster
        template = copy.deepcopy(job["spec"]["template"])
        job_name = job["metadata"]["name"]
        prefix = f"{job_name}-"
        if index is not None:
            for container in (template["spec"].get("initContainers") or []) + \
                    template["spec"]["containers"]:
                if not any(e.get("name") == INDEX_ENV for e in container.get("env") or []):
                    container.setdefault("env", []).append({"name": INDEX_ENV, "valueFrom": {
                        "fieldRef": {"fieldPath": f"metadata.labels['{INDEX}']"}}})
            meta = template.setdefault("metadata", {})
            meta.setdefault("annotations", {})[INDEX] = str(index)
            meta.setdefault("labels", {})[INDEX] = str(index)
            template["spec"]["hostname"] = f"{job_name}-{index}"
            prefix = f"{job_name}-{index}-"
            if len(prefix) > MAX_GENERATED_NAME:
                prefix = prefix[:MAX_GENERATED_NAME - len(f"-{index}-")] + f"-{index}-"
        name = f"{prefix}{secrets.token_hex(4)[:5]}"
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {**template.get("metadata", {}), "name": name,
                            "namespace": job["metadata"]["namespace"],
                            "ownerReferences": [{
                                "apiVersion": "batch/v1", "kind": "Job",
                                "name": job["metadata"]["name"], "uid": job["metadata"]["uid"],
                                "controller": True, "blockOwnerDeletion": True}]},
               "spec": template["spec"]}
        try:
            c.create_pod(job["metadata"]["namespace"], pod)
        except ApiError as exc:  # the controller records a FailedCreate event, tries again
            c.failed_creates.append({"job": job_name, "message": exc.body.get("message")})
            return False
        return True


def _index(pod: dict[str, Any]) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(INDEX)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _intervals(indexes: set[int]) -> str:
    """status.completedIndexes: "0-2,5" (intervals of consecutive indexes)."""
    runs: list[list[int]] = []
    for i in sorted(indexes):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _epoch(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def token_request(c: Cluster, namespace: str, sa: str, body: dict[str, Any]) -> dict[str, Any]:
    with c.lock:
        if (namespace, sa) not in c.service_accounts:
            raise not_found("serviceaccounts", sa)
        spec = dict(body.get("spec") or {})
        seconds = spec.get("expirationSeconds", 3600)
        if seconds is None:
            seconds = 3600
        problem = None
        if not isinstance(seconds, int):
            raise bad_request("TokenRequest in version \"v1\" cannot be handled as a TokenRequest: "
                              "json: cannot unmarshal into Go struct field "
                              "TokenRequestSpec.spec.expirationSeconds of type int64")
        if seconds < TOKEN_MIN:
            problem = "may not specify a duration less than 10 minutes"
        elif seconds > TOKEN_MAX:
            problem = "may not specify a duration larger than 2^32 seconds"
        if problem:
            raise invalid("TokenRequest", "authentication.k8s.io", "", [(
                "FieldValueInvalid", "spec.expirationSeconds",
                f"Invalid value: {seconds}: {problem}")])
        audiences = spec.get("audiences") or ["https://kubernetes.default.svc"]
        token, expires = c.issue_token(f"system:serviceaccount:{namespace}:{sa}", seconds,
                                       audiences)
        return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": sa, "namespace": namespace, "creationTimestamp": None},
                "spec": {"audiences": audiences, "expirationSeconds": seconds,
                         "boundObjectRef": spec.get("boundObjectRef")},
                "status": {"token": token, "expirationTimestamp": rfc3339(expires or 0)}}
