"""Kubernetes clusters (``kubernetes``) and CoreWeave's (``coreweave``, a preset)."""

from ._tokens import ServiceAccountToken
from .adapter import CoreWeaveProvider, KubernetesProvider

__all__ = ["CoreWeaveProvider", "KubernetesProvider", "ServiceAccountToken"]
