"""RunPod Instant Clusters: a multi-node job as one cluster (REST v2 createCluster).

The cluster flows behind the adapter's job methods (create, read, list and
delete a cluster, and end the cluster of a member pod the pod endpoints
refuse), the create body, the shell that gives every node gpucloud's
rendezvous names, and reading a cluster and its member pods back as one Job.

The contract is RunPod's OpenAPI 2.0.0 (tests/fixtures/runpod/openapi-v2.json):
``POST /v2/clusters`` takes ``compute`` {gpuTypeId, gpuCountPerPod, podCount}
plus the container configuration every member pod gets (image, env, args,
ports, disk), ``dataCenterIds``, ``mounts`` and ``startSsh``; a cluster is
always placed in one data center. ``GET /v2/clusters/{id}`` carries only a
summary of the members; ``GET /v2/clusters/{id}/pods`` returns each member
as a full Pod whose ``cluster`` holds its ``rank`` and overlay ``ip``.
``DELETE /v2/clusters/{id}`` "terminates all of its member pods"; member pods
cannot be deleted or modified through the pod endpoints (409).

The rendezvous: RunPod sets on every node (docs.runpod.io/instant-clusters/
configuration, runpod/docs instant-clusters/configuration.mdx):
PRIMARY_ADDR and PRIMARY_PORT (the primary node, also as MASTER_ADDR and
MASTER_PORT), NODE_ADDR (this node's overlay address), NODE_RANK (0 on the
primary), NUM_NODES, NUM_TRAINERS (GPUs per node), HOST_NODE_ADDR and
WORLD_SIZE (NUM_NODES x NUM_TRAINERS). Only the node itself knows its rank and
the primary's address, so the job's start command maps them at run time;
what is known at create (the node count, GPUs per node) is written there.
No RunPod variable lists every node's address, so GPUCLOUD_NODE_ADDRS is not
set on RunPod (docs/providers/runpod.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from gpucloud.errors import SpecError
from gpucloud.models import Instance, InstanceSpec, InstanceStatus, Job, JobStatus, Offer
from gpucloud.providers._jobscript import EndAction, secret_values
from gpucloud.providers.adapter_calls import AdapterCalls
from gpucloud.providers.base import JOB_PREFIX, Flow, parse_utc
from gpucloud.providers.rendezvous import node_env
from gpucloud.providers.runpod import _wire as wire

if TYPE_CHECKING:
    import httpx


# The names gpucloud promises (providers/rendezvous.py) that only the node itself
# knows, each from RunPod's own variables, first found wins (RunPod sets the
# MASTER_* twins too). Any port works between the nodes ("All ports are
# available"): node_env's port only if RunPod set none.
FROM_RUNPOD = {
    "MASTER_ADDR": ("PRIMARY_ADDR", "MASTER_ADDR"),
    "MASTER_PORT": ("PRIMARY_PORT", "MASTER_PORT"),
    "NODE_RANK": ("NODE_RANK",),
}
# Promised names with no RunPod source: left unset rather than guessed.
UNKNOWN_ON_RUNPOD = ("GPUCLOUD_NODE_ADDRS",)
CLUSTER_TYPE = "TRAINING"  # the spec's "generic distributed-training cluster"
# Member pods cannot be stopped through the pod endpoints (409): a node whose
# job ended keeps its container alive, and the cluster goes at its deadline
# (the reaper) or on cancel.
CLUSTER_HOLD = EndAction(
    "waits for gpucloud to delete the cluster (RunPod ends no single node of a cluster)",
    ":", hold=True)


class RunPod(AdapterCalls, Protocol):
    """What the cluster flows need of the adapter (adapter.py imports this module)."""

    def _object(self, response: httpx.Response) -> dict[str, Any]: ...

    def _field(self, response: httpx.Response, key: str) -> list[Any]: ...

    def _instance(self, response: httpx.Response, raw: Any) -> Instance: ...

    def _type_of(self, offer: Offer) -> tuple[str, bool]: ...

    def _container(self, spec: InstanceSpec, end: EndAction,
                   prelude: str = "") -> dict[str, Any]: ...


def create(provider: RunPod, spec: InstanceSpec) -> Flow[Job]:
    """A multi-node job as one Instant Cluster: spec.job.nodes pods of the
    offer's GPU type and count, in the offer's data center. No deadline
    field exists for clusters: the deadline travels in env as for a pod,
    and the reaper deletes the cluster when it passes."""
    job, offer = spec.job, spec.offer
    assert job is not None
    gpu_type, community = provider._type_of(offer)
    if community:
        raise SpecError(
            f"{offer.instance_type!r} is a community-cloud type; a RunPod Instant "
            "Cluster has no cloud choice (createCluster takes none)",
            hint="pick the same GPU without ' (community)' for a multi-node job")
    prelude = rendezvous_shell(job.nodes, offer.gpu_count)
    # No retries on a node: its command run again alone would wait at a
    # rendezvous its peers have left (a lost node fails the job).
    once = spec.model_copy(update={"job": job.model_copy(update={"retries": 0})})
    body = create_body(spec.name, gpu_type, offer.gpu_count, job.nodes,
                       offer.region, provider._container(once, CLUSTER_HOLD, prelude))
    response = yield provider.request("POST", "/v2/clusters", json=body, kind="launch",
                                      secrets=secret_values(job))
    raw = provider._object(response)
    cluster_id = wire.text(raw.get("id"))
    if cluster_id is None:
        raise provider.invalid(response, "no cluster id in the create response")
    return Job(provider=provider.name, id=cluster_id,
               name=wire.text(raw.get("name")) or spec.name,
               status=JobStatus.QUEUED, provider_status=summary(raw),
               launch_id=spec.launch_id, nodes=job.nodes,
               created_at=parse_utc(raw.get("createdAt")), shutdown_at=spec.shutdown_at)


def cluster_job(provider: RunPod, cluster_id: str) -> Flow[Job]:
    response = yield provider.request("GET", cluster_path(cluster_id))
    raw = provider._object(response)
    pods = yield provider.request("GET", cluster_path(cluster_id) + "/pods")
    members = [provider._instance(pods, m)
               for m in sorted(provider._field(pods, "pods"), key=rank_of)]
    return job_of_cluster(
        provider.name, cluster_id, wire.text(raw.get("name")),
        node_count(raw) or len(members), members, summary(raw),
        parse_utc(raw.get("createdAt")))


def cluster_jobs(provider: RunPod, members: dict[str, list[Instance]]
                 ) -> Flow[list[Job]]:
    """The jobs of the clusters whose member pods (cluster id -> pods in rank
    order) carry a job's launch id, each read with its cluster's summary."""
    ours = {k: v for k, v in members.items()
            if any((m.launch_id or "").startswith(JOB_PREFIX) for m in v)}
    if not ours:
        return []
    listed = yield provider.request("GET", "/v2/clusters")
    found = {c["id"]: c for c in provider._field(listed, "clusters")
             if isinstance(c, dict) and wire.text(c.get("id"))}
    jobs: list[Job] = []
    for cluster_id, nodes in ours.items():
        raw = found.get(cluster_id, {})  # a cluster just deleted: its pods say enough
        jobs.append(job_of_cluster(
            provider.name, cluster_id, wire.text(raw.get("name")),
            node_count(raw) or len(nodes), nodes, summary(raw),
            parse_utc(raw.get("createdAt"))))
    return jobs


def delete_cluster(provider: RunPod, cluster_id: str) -> Flow[None]:
    """deleteCluster: "terminates all of its member pods"."""
    response = yield provider.request("DELETE", cluster_path(cluster_id), kind="idempotent")
    provider.raise_for_error(response)


def delete_cluster_of(provider: RunPod, pod_id: str,
                      conflict: httpx.Response) -> Flow[None]:
    """Delete the cluster of a pod the pod endpoints refused to change (409);
    a pod of no cluster: the refusal stands."""
    response = yield provider.request("GET", wire.pod_path(pod_id))
    cluster_id = cluster_of(provider._object(response))
    if cluster_id is None:
        raise provider.map_error(conflict)
    yield from delete_cluster(provider, cluster_id)


def rendezvous_shell(nodes: int, gpus_per_node: int) -> str:
    """Shell run first on every node: gpucloud's rendezvous names from RunPod's."""
    # The addresses are RunPod's to give: node_env is asked for the names and
    # for what the node count and GPUs per node decide.
    static = node_env(0, ["$PRIMARY_ADDR"] * nodes, gpus_per_node)
    lines = [
        "# gpucloud rendezvous on a RunPod Instant Cluster: RunPod sets PRIMARY_ADDR,",
        "# PRIMARY_PORT and NODE_RANK on each node (instant-clusters/configuration).",
    ]
    for name, sources in FROM_RUNPOD.items():
        fallback = static["MASTER_PORT"] if name == "MASTER_PORT" else ""
        expr = fallback
        for source in reversed(sources):
            expr = "${%s:-%s}" % (source, expr)
        lines.append(f'export {name}="{expr}"')
    known = {k: v for k, v in static.items()
             if k not in FROM_RUNPOD and k not in UNKNOWN_ON_RUNPOD}
    lines.append("export " + " ".join(f"{k}={v}" for k, v in known.items()))
    lines += [
        'if [ -z "$MASTER_ADDR" ] || [ -z "$NODE_RANK" ]; then',
        '  echo "gpucloud: RunPod set no PRIMARY_ADDR or NODE_RANK on this node:" \\',
        '    "the job has no rendezvous" >&2',
        "fi",
    ]
    return "\n".join(lines) + "\n"


def create_body(name: str, gpu_type: str, gpus_per_node: int, nodes: int, region: str,
                container: dict[str, Any]) -> dict[str, Any]:
    """createCluster's body: the homogeneous shape, then the container config
    (image, env, args, ports, disk, mounts, startSsh) every member pod gets."""
    return {
        "name": name,
        "type": CLUSTER_TYPE,
        "compute": {"gpuTypeId": gpu_type, "gpuCountPerPod": gpus_per_node,
                    "podCount": nodes},
        "dataCenterIds": [region],
        **container,
    }


def cluster_path(cluster_id: str) -> str:
    from urllib.parse import quote

    return f"/v2/clusters/{quote(cluster_id, safe='')}"


def cluster_of(raw: Any) -> str | None:
    """The id of the cluster a pod belongs to; None for a standalone pod."""
    member = raw.get("cluster") if isinstance(raw, dict) else None
    ident = member.get("id") if isinstance(member, dict) else None
    return ident if isinstance(ident, str) and ident else None


def rank_of(raw: Any) -> int:
    """A member's node rank, for sorting; not yet assigned (or no member) sorts last."""
    member = raw.get("cluster") if isinstance(raw, dict) else None
    rank = member.get("rank") if isinstance(member, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else 1 << 30


def summary(raw: dict[str, Any]) -> str | None:
    """The provider status of a cluster: its members by status ("RUNNING=3,
    PROVISIONING=1"), as GET /v2/clusters/{id} counts them."""
    pods = raw.get("pods")
    by = pods.get("byStatus") if isinstance(pods, dict) else None
    if not isinstance(by, dict):
        return None
    return ",".join(f"{k}={v}" for k, v in sorted(by.items())) or None


def node_count(raw: dict[str, Any]) -> int | None:
    compute = raw.get("compute")
    count = compute.get("podCount") if isinstance(compute, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def job_of_cluster(provider: str, cluster_id: str, name: str | None, nodes: int,
                   members: Sequence[Instance], provider_status: str | None,
                   created_at: Any = None) -> Job:
    """A cluster read back as one Job: node 0's machine as ``instance``, every
    member in rank order as ``instances``. Running once any node runs, queued
    while none does and some are starting; a cluster whose nodes have all
    ended says nothing of the job's outcome (UNKNOWN, never guessed)."""
    statuses = {m.status for m in members}
    if InstanceStatus.RUNNING in statuses:
        status = JobStatus.RUNNING
    elif not members or statuses <= {InstanceStatus.PENDING}:
        status = JobStatus.QUEUED
    else:
        status = JobStatus.UNKNOWN
    first = members[0] if members else None
    return Job(provider=provider, id=cluster_id, name=name, status=status,
               provider_status=provider_status,
               launch_id=next((m.launch_id for m in members if m.launch_id), None),
               instance=first, nodes=nodes, instances=tuple(members),
               created_at=created_at or (first.created_at if first else None),
               shutdown_at=next((m.shutdown_at for m in members if m.shutdown_at), None))


__all__ = ["CLUSTER_HOLD", "CLUSTER_TYPE", "FROM_RUNPOD", "UNKNOWN_ON_RUNPOD", "cluster_job",
           "cluster_jobs", "cluster_of", "cluster_path", "create", "create_body",
           "delete_cluster", "delete_cluster_of", "job_of_cluster", "node_count", "rank_of",
           "rendezvous_shell", "summary"]
