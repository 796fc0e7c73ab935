"""The batch key on a machine, beside its launch id and the same way.

``Client.create_many`` gives every machine of a batch the batch's key (the one
``batch=`` / ``--batch`` names, or a fresh random one). Each provider carries
it where it carries the launch id, under these names:

    sandbox     label  gpucloud-batch
    Lambda      tag    gpucloud-batch (values up to 128 characters, the API's
                RequestedTagEntry.value; a longer key is left off)
    RunPod      env    GPUCLOUD_BATCH (a pod has no labels: its env is what
                the API gives back)
    Vast.ai     env    GPUCLOUD_BATCH (the instance label, one free-text
                string, already holds the launch id, deadline and name)
    Verda       description  ``batch=<key>`` (no labels in the create body;
                characters other than [A-Za-z0-9._-] become "_")
    Kubernetes  label  gpucloud.dev/batch when the key is a valid label value
                (63 characters of [A-Za-z0-9._-], alphanumeric at both
                ends: the API's label syntax), else annotation gpucloud.dev/batch
    ssh         the lock's info line ``batch=``

The machines of one multi-node job on a VM cloud (jobs/multinode_batch.py)
are such a batch, under a key that says so and how many nodes the job has:
``mn-<nodes>-<10 hex digits>``, only characters every provider above keeps
as written. With a job launch id (``gj-``), it is what makes a listing's
machines one job, and what lets the reaper see that a node is missing.
"""

from __future__ import annotations

import re

LABEL = "gpucloud-batch"  # sandbox labels, Lambda tags
ENV = "GPUCLOUD_BATCH"  # RunPod and Vast.ai container env
KUBERNETES = "gpucloud.dev/batch"
# Kubernetes label values: "Labels and Selectors", kubernetes.io/docs/concepts/
# overview/working-with-objects/labels/#syntax-and-character-set
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


_JOB_KEY = re.compile(r"mn-([1-9][0-9]{0,2})-[0-9a-f]{10}")
NODE_NAME = re.compile(r"-node([0-9]{1,3})$")  # a node machine's name ends so


def job_key(nodes: int) -> str:
    """A fresh batch key for the machines of one multi-node job."""
    import secrets

    return f"mn-{nodes}-{secrets.token_hex(5)}"


def job_nodes(key: str | None) -> int | None:
    """The node count a multi-node job's batch key carries; None for any other key."""
    found = _JOB_KEY.fullmatch(key) if isinstance(key, str) else None
    return int(found.group(1)) if found else None


def node_name(job: str, rank: int) -> str:
    return f"{job}-node{rank}"


def node_rank(name: str | None) -> int | None:
    """The rank a node machine's name ends with (``-node<rank>``), if it does."""
    found = NODE_NAME.search(name or "")
    return int(found.group(1)) if found else None


def kubernetes_label_value(key: str) -> bool:
    return _LABEL_VALUE.fullmatch(key) is not None


__all__ = ["ENV", "KUBERNETES", "LABEL", "NODE_NAME", "job_key", "job_nodes",
           "kubernetes_label_value", "node_name", "node_rank"]
