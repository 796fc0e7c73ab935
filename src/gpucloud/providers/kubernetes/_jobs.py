"""The Kubernetes adapter's jobs: batch/v1 Jobs and the pods they run.

A mixin of KubernetesProvider (adapter.py), which supplies request, _body,
_ns, _label, _place and namespace; kept apart so each file reads as one
concept (machines there, jobs here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from gpucloud.errors import NotFoundError
from gpucloud.models import Job, JobStatus
from gpucloud.providers.base import Flow, parse_utc
from gpucloud.providers.kubernetes import _pages
from gpucloud.providers.kubernetes import _wire as wire
from gpucloud.providers.kubernetes._manifests import CONTAINER, MANAGER, job_manifest

if TYPE_CHECKING:
    from gpucloud.models import InstanceSpec

SELECTOR = f"{wire.MANAGED_BY}={MANAGER}"


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

    def submit_job(self, spec: InstanceSpec) -> Flow[Job]:
        body = job_manifest(spec, namespace=self.namespace, gpu_label=self._label())
        self._place(body["spec"]["template"]["spec"], spec.offer.instance_type)
        secrets = [v.get_secret_value() for v in spec.job.secret_env.values()] if spec.job else []
        request = self.request("POST", "/apis/batch/v1" + self._ns("/jobs"), json=body,
                               kind="launch", secrets=secrets)
        return self._job(self._body((yield request)), [])

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
        # Background: the Job goes now and the garbage collector deletes its pods
        # (the default for a Job via REST is Orphan, which would leave them running).
        response = yield self.request(
            "DELETE", "/apis/batch/v1" + self._ns(f"/jobs/{quote(job_id)}"),
            json={"kind": "DeleteOptions", "apiVersion": "v1",
                  "propagationPolicy": "Background"})
        self.raise_for_error(response)

    def job_logs(self, job_id: str, tail: int | None = None) -> Flow[str]:
        pods = wire.newest_first((yield from self._job_pods(job_id)))
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
        return Job(
            provider=self.name, id=str(meta["name"]),
            name=wire.notes(job).get(wire.NAME) or meta["name"], status=state.status,
            provider_status=state.provider_status, launch_id=wire.labels(job).get(wire.LAUNCH_ID),
            created_at=parse_utc(meta.get("creationTimestamp")),
            started_at=parse_utc(status.get("startTime")),
            finished_at=parse_utc(status.get("completionTime")) or state.finished_at,
            shutdown_at=parse_utc(wire.notes(job).get(wire.SHUTDOWN_AT)),
            exit_code=wire.exit_code(pods[0]) if pods and state.status in (
                JobStatus.SUCCEEDED, JobStatus.FAILED) else None,
            message=state.message)


__all__ = ["KubernetesJobs", "SELECTOR"]
