"""Kubernetes clusters (``kubernetes``) and CoreWeave's (``coreweave``, a preset)."""

from gpucloud.providers.kubernetes.adapter import CoreWeaveProvider, KubernetesProvider

__all__ = ["CoreWeaveProvider", "KubernetesProvider"]
