"""The rendezvous env of a multi-node job, for the layers above the providers
(the job core, the CLI's doctor): defined once in providers/rendezvous.py,
where the adapters that place the nodes themselves also read it."""

from gpucloud.providers.rendezvous import MASTER_PORT, node_env

__all__ = ["MASTER_PORT", "node_env"]
