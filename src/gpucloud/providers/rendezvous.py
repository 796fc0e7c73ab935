"""The rendezvous every node of a multi-node job is given: one place for the
names and values, used by every provider's translation.

The names are torchrun's (https://pytorch.org/docs/stable/elastic/run.html)
and torch.distributed's env:// init method: MASTER_ADDR/MASTER_PORT name node
0, NODE_RANK this node, NNODES the count; WORLD_SIZE is the number of
processes (nodes x GPUs per node, one process per GPU). GPUCLOUD_NODE_ADDRS
lists every node's address in rank order (comma-separated) for launchers that
want a host list (mpirun -H, deepspeed's hostfile).
"""

from __future__ import annotations

from collections.abc import Sequence

# torchrun's default rendezvous port (torch.distributed.run --master_port).
MASTER_PORT = 29500


def node_env(rank: int, addrs: Sequence[str], gpus_per_node: int,
             master_port: int = MASTER_PORT) -> dict[str, str]:
    """The env of node ``rank`` of a job whose nodes are reached at ``addrs``
    (rank order; node 0 is the master)."""
    if not addrs:
        raise ValueError("a multi-node job needs at least one node address")
    if not 0 <= rank < len(addrs):
        raise ValueError(f"node rank {rank} is not in 0..{len(addrs) - 1}")
    return {
        "MASTER_ADDR": addrs[0],
        "MASTER_PORT": str(master_port),
        "NODE_RANK": str(rank),
        "NNODES": str(len(addrs)),
        "WORLD_SIZE": str(len(addrs) * gpus_per_node),
        "GPUS_PER_NODE": str(gpus_per_node),
        "GPUCLOUD_NODE_ADDRS": ",".join(addrs),
    }


__all__ = ["MASTER_PORT", "node_env"]
