"""The Kubernetes adapter's jobs: batch/v1 Jobs and the pods they run; a
multi-node job is an Indexed Job and its headless Service (_manifests.py).

A mixin of KubernetesProvider (adapter.py), which supplies request, _body,
_ns, _label, _place and namespace; kept apart so each file reads as one
concept (machines there, jobs here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from gpucloud.errors import NotFoundError, SpecError
from gpucloud.models import Job, JobStatus
from gpucloud.providers.base import Flow, parse_utc
from gpucloud.providers.kubernetes import _pages
from gpucloud.providers.kubernetes import _wire as wire
from gpucloud.providers.kubernetes._manifests import (
    CONTAINER, MANAGER, job_manifest, service_manifest,
)

if TYPE_CHECKING:
    from gpucloud.models import InstanceSpec, JobRun
    from gpucloud.providers.kubernetes._settings import Settings

SELECTOR = f"{wire.MANAGED_BY}={MANAGER}"
BACKGROUND = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}


class KubernetesJobs:
    name: str
    namespace: str
    page_size: int | None
    request: Any
    raise_for_error: Any
    _body: Any
    _ns: Any
    _label: Any
    _place: Any

    if TYPE_CHECKING:  # the adapter's properties
        @property
        def settings(self) -> Settings: ...

    def submit_job(self, spec: InstanceSpec) -> Flow[Job]:
        run = spec.job
        rdma = None
        if run is not None:
            rdma = yield from self._rdma(run, spec.offer.instance_type)
            yield from self._check_claims(run)
        body = job_manifest(spec, namespace=self.namespace, gpu_label=self._label(), rdma=rdma)
        self._place(body["spec"]["template"]["spec"], spec.offer.instance_type)
        secrets = [v.get_secret_value() for v in run.secret_env.values()] if run else []
        request = self.request("POST", "/apis/batch/v1" + self._ns("/jobs"), json=body,
                               kind="launch", secrets=secrets)
        created = self._body((yield request))
        if run is not None and run.nodes > 1:
            yield from self._add_service(created)
        return self._job(created, [])

    def _add_service(self, job: dict[str, Any]) -> Flow[None]:
        """The Indexed Job's headless Service; without it the nodes cannot find
        each other, so a refused Service takes the Job back down with it."""
        response = yield self.request("POST", "/api/v1" + self._ns("/services"),
                                      json=service_manifest(job), kind="launch")
        if response.status_code < 300:
            return
        name = str(wire.meta(job)["name"])
        yield self.request("DELETE", "/apis/batch/v1" + self._ns(f"/jobs/{quote(name)}"),
                           json=BACKGROUND)
        self.raise_for_error(response)

    def _rdma(self, run: JobRun, model: str) -> Flow[str | None]:
        """The RDMA resource each pod requests: with interconnect infiniband,
        where a node of the offer's GPU model advertises it (else refused now,
        not left Pending forever); with interconnect any, only where the user
        named the resource and the nodes have it."""
        settings = self.settings
        if run.interconnect != "infiniband" and not settings.rdma_configured:
            return None
        resource, labels = settings.rdma_resource, settings.gpu_labels

        def add(found: list[str], nodes: list[dict[str, Any]]) -> None:
            found.extend(str(wire.meta(n).get("name")) for n in nodes
                         if any(wire.labels(n).get(k) == model for k in labels)
                         and wire.allocatable(n, resource) > 0)

        advertised = yield from _pages.fold(self, "/api/v1/nodes", {}, list, add)
        if advertised:
            return resource
        if run.interconnect != "infiniband":
            return None
        raise SpecError(
            f"{self.name}: interconnect infiniband needs the RDMA resource {resource}, and no "
            f"{model} node advertises it (status.allocatable)",
            hint=f"set rdma_resource in config.toml [{self.name}] (or "
                 f"GPUCLOUD_{self.name.upper()}_RDMA_RESOURCE) to the name your RDMA device "
                 "plugin gives it (`kubectl describe node` lists it under Allocatable), "
                 "or use interconnect: any")

    def _check_claims(self, run: JobRun) -> Flow[None]:
        """Each volume's PVC exists (a pod naming a missing claim stays Pending
        for good) and, for several nodes, can be mounted by pods on different
        nodes: ReadWriteOnce is one node's, so the other ranks would wait forever."""
        for volume in run.volumes:
            claim = volume.volume_id or volume.name
            response = yield self.request(
                "GET", "/api/v1" + self._ns(f"/persistentvolumeclaims/{quote(claim)}"))
            if response.status_code == 403:
                continue  # may mount claims but not read them: the cluster will say
            if response.status_code == 404:
                raise SpecError(f"{self.name}: no PersistentVolumeClaim {claim} in namespace "
                                f"{self.namespace}",
                                hint=f"`gpucloud volumes list --provider {self.name}` lists them")
            modes = (self._body(response).get("spec") or {}).get("accessModes") or []
            if run.nodes > 1 and "ReadWriteMany" not in modes:
                raise SpecError(
                    f"{self.name}: volume {claim} is {', '.join(modes) or 'ReadWriteOnce'}: "
                    f"the {run.nodes} nodes' pods cannot all mount it",
                    hint=f"use a ReadWriteMany claim (volume_access_mode = \"ReadWriteMany\" "
                         f"in config.toml [{self.name}] for the volumes gpucloud creates, with "
                         "a storage_class that supports it)")

    def list_jobs(self) -> Flow[list[Job]]:
        jobs = yield from _pages.items(self, "/apis/batch/v1" + self._ns("/jobs"),
                                       {"labelSelector": SELECTOR})
        pods = yield from _pages.items(self, "/api/v1" + self._ns("/pods"),
                                       {"labelSelector": SELECTOR})
        by_job: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            by_job.setdefault(wire.labels(pod).get(wire.JOB_NAME, ""), []).append(pod)
        return [self._job(j, by_job.get(str(wire.meta(j).get("name")), [])) for j in jobs]

    def get_job(self, job_id: str) -> Flow[Job]:
        job = self._body((yield self.request(
            "GET", "/apis/batch/v1" + self._ns(f"/jobs/{quote(job_id)}"))))
        pods = yield from self._job_pods(job_id)
        return self._job(job, pods)

    def _job_pods(self, job_id: str) -> Flow[list[dict[str, Any]]]:
        return (yield from _pages.items(self, "/api/v1" + self._ns("/pods"),
                                        {"labelSelector": f"{wire.JOB_NAME}={job_id}"}))

    def cancel_job(self, job_id: str) -> Flow[None]:
        # A multi-node job's Service first (a single-node job has none: 404). The
        # Job owns it, so the garbage collector removes it with the Job anyway:
        # an account that may not delete Services (403) still cancels.
        response = yield self.request(
            "DELETE", "/api/v1" + self._ns(f"/services/{quote(job_id)}"))
        if response.status_code not in (404, 403):
            self.raise_for_error(response)
        # Background: the Job goes now and the garbage collector deletes its pods
        # (the default for a Job via REST is Orphan, which would leave them running).
        response = yield self.request(
            "DELETE", "/apis/batch/v1" + self._ns(f"/jobs/{quote(job_id)}"), json=BACKGROUND)
        self.raise_for_error(response)

    def job_logs(self, job_id: str, tail: int | None = None) -> Flow[str]:
        # A multi-node job's log is rank 0's (its newest pod, after a retry).
        pods = wire.by_rank((yield from self._job_pods(job_id)))
        if not pods:
            raise NotFoundError(f"{self.name}: job {job_id} has no pod (not started yet, or "
                                "removed with its Job)", provider=self.name, status_code=404,
                                hint=f"`gpucloud jobs get {self.name}/{job_id}` shows its status")
        name = str(wire.meta(pods[0])["name"])
        # The job's own container by name: a pod with checkpoint sync has others.
        # No follow=true: `logs -f` polls this whole read (jobs core), which
        # needs no connection held open across token refreshes.
        params = {"container": CONTAINER, **({"tailLines": str(tail)} if tail else {})}
        response = yield self.request("GET", "/api/v1" + self._ns(f"/pods/{quote(name)}/log"),
                                      params=params)
        self.raise_for_error(response)
        return response.text

    def _job(self, job: Any, pods: list[dict[str, Any]]) -> Job:
        if not isinstance(job, dict) or job.get("kind", "Job") != "Job":
            raise TypeError("not a Job")
        meta, status = wire.meta(job), job.get("status") or {}
        pods = wire.newest_first(pods)
        state = wire.job_state(job, pods)
        failed = [p for p in pods if wire.exit_code(p) not in (None, 0)]
        # A failed multi-node job's code is a failed pod's, not a finished peer's
        # 0; a job that succeeded after a failed try, its last pod's.
        ended = failed if failed and state.status is JobStatus.FAILED else pods
        return Job(
            provider=self.name, id=str(meta["name"]),
            name=wire.notes(job).get(wire.NAME) or meta["name"], status=state.status,
            provider_status=state.provider_status, launch_id=wire.labels(job).get(wire.LAUNCH_ID),
            created_at=parse_utc(meta.get("creationTimestamp")),
            started_at=parse_utc(status.get("startTime")),
            finished_at=parse_utc(status.get("completionTime")) or state.finished_at,
            shutdown_at=parse_utc(wire.notes(job).get(wire.SHUTDOWN_AT)),
            exit_code=wire.exit_code(ended[0]) if pods and state.status in (
                JobStatus.SUCCEEDED, JobStatus.FAILED) else None,
            message=state.message, nodes=wire.job_nodes(job))


__all__ = ["KubernetesJobs", "SELECTOR"]
