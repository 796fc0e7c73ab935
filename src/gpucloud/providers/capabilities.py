"""What an adapter declares it can do: plain data, read by `gpucloud providers`,
the planner (spot, disks, ssh keys) and the deadline logic (who holds a
deadline). Kept apart from the Provider class so it can be read as data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Capabilities:
    """What an adapter can do; every flag defaults to False (cannot)."""

    spot: bool = False
    stop_start: bool = False
    custom_disk: bool = False  # disk size can be chosen at create
    needs_ssh_key: bool = False  # launch fails without a registered key
    native_shutdown: bool = False  # the provider enforces a deadline itself
    # A start-up guard on the machine ends it at its deadline (plus grace) with a
    # credential the provider scopes to that one machine; never an account key.
    self_guard: bool = False
    # A one-node job: the machine (or pod) runs the job's container to
    # completion and ends with it. A provider without it is never planned for
    # a one-node job (a multi-node job is ``multi_node``'s).
    jobs: bool = False
    # A job over several machines: "native" the provider places the nodes itself
    # (a Kubernetes Indexed Job, RunPod Instant Clusters, the sandbox); "batch"
    # gpucloud launches the nodes as one all-or-nothing batch in one region and
    # starts the job on each over ssh; "none" refused at plan time.
    multi_node: Literal["none", "native", "batch"] = "none"
    # A multi-node job's ``retries`` rerun every node together (the sandbox).
    # Elsewhere a node run again alone would wait at a rendezvous its peers
    # have left, so a lost node fails the whole job and retries do not apply.
    multi_node_retries: bool = False
    volumes: bool = False  # network volumes: list/create/delete, jobs mount them
    # One volume mounts on several machines at once (a shared filesystem over
    # NFS), so a "batch" multi-node job's nodes can all mount the job's
    # volumes: each node's launch attaches them, its start over ssh mounts them.
    shared_volumes: bool = False
