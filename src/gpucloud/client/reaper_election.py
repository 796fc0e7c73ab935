"""The elector of ``gpucloud reap --watch --lease KIND``: which reaper acts.

Kinds (gpucloud.safety.election): ``none`` (this process always acts),
``database`` (the team database's lock, gpucloud.safety.team_lease),
``kubernetes`` (a coordination.k8s.io/v1 Lease, gpucloud.safety.kube_lease).
Without ``--lease``: ``database`` when a team state URL is set
(``GPUCLOUD_STATE_URL`` or config.toml ``[state] url``), else ``none``.
The Lease is kept on the cluster of ``GPUCLOUD_REAPER_KUBECONFIG`` when set
(the Deployment of ``reap --install kubernetes`` points it at its
ServiceAccount), else on provider kubernetes's.

The elector gets a client of its own: it is asked from a second thread while
a pass runs (the renewal, reaper_watch.py), and a client's sessions serve one
caller at a time.

    [reaper]
    lease_namespace = "gpucloud"   # the Lease's namespace; else the cluster's
                                   # (provider kubernetes: [kubernetes] namespace,
                                   # else the kubeconfig context's, else "default")
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gpucloud.errors import ConfigurationError, SpecError

if TYPE_CHECKING:
    from gpucloud.config.settings import Config
    from gpucloud.safety.election import Elector

KINDS = ("kubernetes", "database", "none")
# The cluster whose Lease elects: the provider that reads KUBECONFIG.
LEASE_PROVIDER = "kubernetes"


def default_kind(config: Config) -> str:
    from gpucloud.config.settings import state_url

    return "database" if state_url(config) else "none"


def lease_namespace(config: Config) -> str | None:
    section = config.raw.get("reaper", {})
    if not isinstance(section, dict):
        raise ConfigurationError(f"{config.path}: [reaper] must be a table",
                                 hint='write it as a [reaper] section: lease_namespace = "ops"')
    value = section.get("lease_namespace")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{config.path}: reaper.lease_namespace must be a namespace "
                                 f"name, got {value!r}", hint='e.g. lease_namespace = "ops"')
    return value.strip()


def elector(kind: str | None, interval: float, *, lease_seconds: int) -> Elector:
    """The elector of `kind` (None: the default) for passes every `interval`
    seconds; a kubernetes Lease lasts `lease_seconds`."""
    from gpucloud.client.sync_client import Client

    # The Lease's own cluster (the Deployment's ServiceAccount), apart from the
    # clouds a pass reaps: GPUCLOUD_REAPER_KUBECONFIG; else the kubernetes
    # provider's kubeconfig (KUBECONFIG, GPUCLOUD_KUBERNETES_KUBECONFIG).
    own = os.environ.get("GPUCLOUD_REAPER_KUBECONFIG", "").strip()
    client = Client(credentials={LEASE_PROVIDER: own} if own else None)
    chosen = kind or default_kind(client.config)
    if chosen not in KINDS:
        raise SpecError(f"unknown lease kind {chosen!r}",
                        hint=f"--lease takes {', '.join(KINDS)}")
    if chosen == "none":
        from gpucloud.safety.election import Alone

        client.close()
        return Alone()
    if chosen == "database":
        from gpucloud.safety.team_lease import DatabaseLease

        return DatabaseLease(client._ctx.journal, interval)
    from gpucloud.safety.kube_lease import KubernetesLease

    store = client.provider(LEASE_PROVIDER)
    client._ctx.require_callable(LEASE_PROVIDER)  # no kubeconfig: say so before the loop
    return KubernetesLease(store, lease_seconds, namespace=lease_namespace(client.config))


__all__ = ["KINDS", "default_kind", "elector", "lease_namespace"]
