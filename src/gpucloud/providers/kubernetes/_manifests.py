"""The objects gpucloud creates on a cluster: a Pod per machine, a batch/v1 Job
per job. Pure functions (golden-tested, and validated with kubernetes-validate
in the tests).

A machine is a long-running Pod: ``restartPolicy: Never`` (a container that
exits ends the machine, it is not silently restarted) and no
``activeDeadlineSeconds``, because that field cannot be moved later and
``extend`` must be able to move the deadline: the deadline is the
``gpucloud.dev/shutdown-at`` annotation that ``gpucloud reap`` enforces.

A job is a Job with ``activeDeadlineSeconds`` = max_runtime (the cluster
enforces it, no reaper needed), ``backoffLimit`` = retries (0 for several
nodes) and ``ttlSecondsAfterFinished`` so finished Jobs do not pile up. The job's cpu
and memory, when asked, are its container's requests and limits.

A job with a checkpoint URL gets the runner's sync (``_jobscript.sync_shell``)
around an emptyDir at CHECKPOINT_DIR: an init container restores it, a native
sidecar (an init container with ``restartPolicy: Always``, Kubernetes 1.29+)
saves it every interval and once more when the pod ends (SIGTERM, within
``terminationGracePeriodSeconds``). Both run the storage tool's own image.

A job of N > 1 nodes is an Indexed Job (``completionMode: Indexed``,
``completions = parallelism = N``) beside a headless Service of the Job's
name whose selector is the Job's pods, with the pod template's ``subdomain``
set to it: the Job controller names each pod's hostname ``<job>-<index>``,
so node i is ``<job>-<i>.<service>`` in DNS (Kubernetes docs, "Job with
Pod-to-Pod Communication"). Every pod gets providers/rendezvous.py's rendezvous
env; NODE_RANK is read from the pod's completion-index annotation. Its
``backoffLimit`` is 0: the Job controller would recreate a failed index's pod
alone, to wait at a rendezvous its peers have left; at 0 the first failed
pod fails the Job and the controller ends the others.

A job's volumes are PersistentVolumeClaims (``persistentVolumeClaim.claimName``
= the volume's id) mounted at their paths; a PVC gpucloud creates is
``pvc_manifest``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gpucloud.errors import SpecError
from gpucloud.providers.rendezvous import node_env
from gpucloud.models import InstanceSpec, JobRun, VolumeSpec
from gpucloud.providers._jobscript import sync_commands, sync_shell
from gpucloud.providers import _batch_mark as batch_mark
from gpucloud.providers.base import format_utc
from gpucloud.providers.kubernetes._wire import (
    COMPLETION_INDEX, GPU_RESOURCE, JOB_NAME, LAUNCH_ID, MANAGED_BY, NAME, SHUTDOWN_AT,
)

MANAGER = "gpucloud"
CONTAINER = "main"
NAME_MAX = 63  # a Job's name ends up in its pods' job-name label: 63 characters
JOB_TTL_SECONDS = 86400  # a finished Job (status, logs) stays readable for a day
# Runs until deleted; the trap makes the delete quick (sleep as PID 1 would
# ignore SIGTERM and hold the GPU for the 30 s grace period).
IDLE_COMMAND = ("/bin/sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait")
ANNOTATION_MAX = 253
# The sync containers' images, by tool (each has /bin/sh and its tool on PATH).
SYNC_IMAGES = {"aws": "amazon/aws-cli", "rclone": "rclone/rclone",
               "gsutil": "gcr.io/google.com/cloudsdktool/google-cloud-cli:slim"}
CHECKPOINT_VOLUME = "checkpoints"
SAVE_GRACE_SECONDS = 300  # time the sidecar has for its last save once the pod ends


def rfc1123(text: str, limit: int = NAME_MAX) -> str:
    """A lowercase RFC 1123 label from free text."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    name = re.sub(r"-{2,}", "-", name).strip("-")[:limit].rstrip("-")
    return name


def pod_name(launch_id: str) -> str:
    return rfc1123(f"gpucloud-{launch_id}")


def job_name(name: str, launch_id: str, nodes: int = 1) -> str:
    """gpucloud-<name>-<short id>, at most 63 characters (the short id kept whole).

    An Indexed Job's pods get the hostname ``<job>-<index>``, itself a DNS label
    of at most 63 characters: a multi-node job's name leaves room for it."""
    short = rfc1123(launch_id.split("-", 1)[-1])
    reserve = len(f"-{nodes - 1}") if nodes > 1 else 0
    room = NAME_MAX - reserve - len("gpucloud--") - len(short)
    stem = rfc1123(name, room) if room > 0 else ""
    return rfc1123("-".join(p for p in ("gpucloud", stem, short) if p), NAME_MAX - reserve)


def _metadata(name: str, namespace: str, spec: InstanceSpec) -> dict[str, Any]:
    notes = {NAME: spec.name[:ANNOTATION_MAX]}
    if spec.shutdown_at is not None:
        notes[SHUTDOWN_AT] = format_utc(spec.shutdown_at)
    labels = _labels(spec.launch_id)
    if spec.batch:  # a label where the key is a label value, else an annotation
        into = labels if batch_mark.kubernetes_label_value(spec.batch) else notes
        into[batch_mark.KUBERNETES] = spec.batch[:ANNOTATION_MAX]
    return {"name": name, "namespace": namespace, "labels": labels, "annotations": notes}


def _labels(launch_id: str) -> dict[str, str]:
    if rfc1123(launch_id) != launch_id.lower() or len(launch_id) > NAME_MAX:
        raise SpecError(f"launch id {launch_id!r} cannot be a Kubernetes label value")
    return {MANAGED_BY: MANAGER, LAUNCH_ID: launch_id}


def _placement(gpu_label: str, gpu_value: str) -> dict[str, Any]:
    """Pin to the nodes of one GPU model; tolerate the GPU nodes' usual taint."""
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": gpu_label, "operator": "In", "values": [gpu_value]}]}]}}},
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }


def _resources(gpus: int, cpu: float | None = None,
               memory_gb: float | None = None, rdma: str | None = None) -> dict[str, Any]:
    # Extended resources: the request must equal the limit; both are written so
    # the object reads the same wherever it is inspected. cpu and memory too:
    # what the job file asks is what it gets, no more (Guaranteed QoS).
    amounts = {GPU_RESOURCE: str(gpus)}
    if cpu is not None:
        amounts["cpu"] = str(int(cpu)) if cpu == int(cpu) else f"{round(cpu * 1000)}m"
    if memory_gb is not None:
        amounts["memory"] = (f"{int(memory_gb)}G" if memory_gb == int(memory_gb)
                             else f"{round(memory_gb * 1000)}M")
    if rdma is not None:
        # One per pod: an RDMA device plugin's resource is a share of the node's
        # HCAs, not a count of them.
        amounts[rdma] = "1"
    return {"limits": dict(amounts), "requests": dict(amounts)}


def pod_manifest(spec: InstanceSpec, *, namespace: str, gpu_label: str,
                 image: str) -> dict[str, Any]:
    """A machine: a Pod holding the offer's GPUs, running until deleted."""
    offer = spec.offer
    container = {"name": CONTAINER, "image": image, "command": list(IDLE_COMMAND),
                 "resources": _resources(offer.gpu_count)}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": _metadata(pod_name(spec.launch_id), namespace, spec),
        "spec": {"restartPolicy": "Never", "containers": [container],
                 **_placement(gpu_label, offer.instance_type)},
    }


def job_env(job: JobRun, rendezvous: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The container's env: the job's plain env, CHECKPOINT_DIR, a multi-node
    job's rendezvous, then its secrets.

    Secret values go in the request body and nowhere else: the request is marked
    so that an error keeps no copy of its body (see the adapter)."""
    env = dict(job.env)
    if job.checkpoint_dir:
        env["CHECKPOINT_DIR"] = job.checkpoint_dir
    if job.checkpoint_url:
        env["CHECKPOINT_URL"] = job.checkpoint_url
    out: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in env.items()]
    out += rendezvous
    out += [{"name": k, "value": v.get_secret_value()} for k, v in job.secret_env.items()]
    return out


def node_addresses(name: str, nodes: int) -> list[str]:
    """The pods' DNS names in rank order: <hostname>.<subdomain>, found through
    the pod's DNS search path (<namespace>.svc.<cluster domain>)."""
    return [f"{name}-{i}.{name}" for i in range(nodes)]


def rendezvous_env(name: str, job: JobRun) -> list[dict[str, Any]]:
    """providers/rendezvous.py's env for every pod of the Job; the rank is each
    pod's own completion index, which only the pod knows: the downward API
    reads it from the annotation the Job controller writes (the same fieldRef
    the controller gives JOB_COMPLETION_INDEX; the annotation, not the label
    of the same name, which exists only from Kubernetes 1.28)."""
    env: list[dict[str, Any]] = []
    for key, value in node_env(0, node_addresses(name, job.nodes), job.gpu_count).items():
        if key == "NODE_RANK":
            env.append({"name": key, "valueFrom": {"fieldRef": {
                "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}})
        else:
            env.append({"name": key, "value": value})
    return env


def service_manifest(job: dict[str, Any]) -> dict[str, Any]:
    """The headless Service that gives an Indexed Job's pods their DNS names.

    Owned by the Job, so the garbage collector removes it with the Job (a
    cancel, the Job's TTL after it ends) even if the explicit delete is missed.
    publishNotReadyAddresses: a node's name resolves as soon as its pod has an
    address, so a rank that starts first does not fail its lookup of the
    master while the master's container is still starting."""
    meta = job["metadata"]
    name = meta["name"]
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": meta["uid"]}
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": meta["namespace"],
                     "labels": dict(meta.get("labels") or {}),
                     "annotations": {NAME: (meta.get("annotations") or {}).get(NAME, name)},
                     "ownerReferences": [owner]},
        "spec": {"clusterIP": "None", "selector": {JOB_NAME: name},
                 "publishNotReadyAddresses": True},
    }


def pvc_manifest(spec: VolumeSpec, *, namespace: str, storage_class: str | None,
                 access_mode: str) -> dict[str, Any]:
    """A PersistentVolumeClaim of spec.size_gb GiB (the unit the cluster's
    provisioners round to; Volume.size_gb reads it back the same way)."""
    name = rfc1123(spec.name)
    if name != spec.name or not name:
        raise SpecError(f"volume name {spec.name!r} cannot be a Kubernetes object name",
                        hint="use lowercase letters, digits and '-', at most 63 characters")
    body: dict[str, Any] = {"accessModes": [access_mode],
                            "resources": {"requests": {"storage": f"{spec.size_gb}Gi"}}}
    if storage_class is not None:
        body["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {MANAGED_BY: MANAGER}},
            "spec": body}


def job_manifest(spec: InstanceSpec, *, namespace: str, gpu_label: str,
                 rdma: str | None = None) -> dict[str, Any]:
    """A batch/v1 Job running spec.job's container on the offer's GPU model
    (with ``rdma``, that resource too); an Indexed Job for several nodes."""
    job = spec.job
    if job is None:
        raise SpecError("submit_job needs a job to run (InstanceSpec.job)")
    name = job_name(job.name, spec.launch_id, job.nodes)
    container: dict[str, Any] = {"name": CONTAINER, "image": job.image}
    if job.command:
        container["command"] = list(job.command)
    if job.args:
        container["args"] = list(job.args)
    env = job_env(job, rendezvous_env(name, job) if job.nodes > 1 else ())
    if env:
        container["env"] = env
    container["resources"] = _resources(job.gpu_count, job.cpu, job.memory_gb, rdma)
    metadata = _metadata(name, namespace, spec)
    body: dict[str, Any] = {"backoffLimit": job.retries if job.nodes == 1 else 0,
                            "ttlSecondsAfterFinished": JOB_TTL_SECONDS}
    if job.nodes > 1:
        body.update(completionMode="Indexed", completions=job.nodes, parallelism=job.nodes)
    if job.max_runtime_seconds is not None:
        body["activeDeadlineSeconds"] = job.max_runtime_seconds
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container],
                           **_placement(gpu_label, spec.offer.instance_type)}
    if job.nodes > 1:
        pod["subdomain"] = name  # the headless Service's name (service_manifest)
    if job.checkpoint_dir and job.checkpoint_url:
        _add_checkpoint_sync(pod, job, env)
    _add_volumes(pod, job)
    body["template"] = {"metadata": {"labels": _labels(spec.launch_id)}, "spec": pod}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": body}


def _add_volumes(pod: dict[str, Any], job: JobRun) -> None:
    """Each of the job's volumes as its PersistentVolumeClaim, at its mount path."""
    for i, volume in enumerate(job.volumes):
        key = f"volume-{i}"
        pod.setdefault("volumes", []).append(
            {"name": key, "persistentVolumeClaim": {"claimName": volume.volume_id or volume.name}})
        pod["containers"][0].setdefault("volumeMounts", []).append(
            {"name": key, "mountPath": volume.mount})


def _add_checkpoint_sync(pod: dict[str, Any], job: JobRun, env: list[dict[str, Any]]) -> None:
    """An emptyDir at CHECKPOINT_DIR, restored before the job and saved beside it."""
    tool = sync_commands(job.checkpoint_url or "")[0]
    # The sync containers write to their own log (kubectl logs -c checkpoint-sync).
    functions = sync_shell(job, log="/dev/stderr")
    restore = f"{functions}\ngc_ckpt restore || true\n"
    save = (f"{functions}\n"
            "trap 'kill \"$gc_nap\" 2>/dev/null; gc_ckpt save; exit 0' TERM\n"
            'while :; do sleep "$GC_SYNC" & gc_nap=$!; wait "$gc_nap"; gc_ckpt save; done\n')
    mount = [{"name": CHECKPOINT_VOLUME, "mountPath": job.checkpoint_dir}]
    pod["containers"][0]["volumeMounts"] = mount

    def side(name: str, script: str) -> dict[str, Any]:
        return {"name": name, "image": SYNC_IMAGES[tool], "command": ["/bin/sh", "-c", script],
                "env": env, "volumeMounts": mount}

    pod["initContainers"] = [side("checkpoint-restore", restore),
                             {**side("checkpoint-sync", save), "restartPolicy": "Always"}]
    pod["volumes"] = [{"name": CHECKPOINT_VOLUME, "emptyDir": {}}]
    pod["terminationGracePeriodSeconds"] = SAVE_GRACE_SECONDS
