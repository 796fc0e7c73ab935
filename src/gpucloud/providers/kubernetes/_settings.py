"""A cluster's settings: the environment first, then config.toml.

    [kubernetes]                       # or [coreweave]
    context = "gpucloud@cks-cluster"   # GPUCLOUD_KUBERNETES_CONTEXT; else current-context
    namespace = "tenant-my-ns"         # GPUCLOUD_KUBERNETES_NAMESPACE; else the context's
    gpu_label = "nvidia.com/gpu.product"   # GPUCLOUD_KUBERNETES_GPU_LABEL
    unschedulable_timeout = 300        # s a pod may stay Unschedulable in `create --wait`
    rdma_resource = "rdma/ib"          # the RDMA device plugin's resource, one per pod
    storage_class = "shared-vast"      # PVCs gpucloud creates; else the cluster's default
    volume_access_mode = "ReadWriteMany"   # PVCs gpucloud creates; default ReadWriteOnce
    volume_price = "0.07"              # USD per GB-month of a PVC; else unknown
    [kubernetes.prices]                # USD per GPU-hour, by GPU name or node-label value
    H100 = "2.21"

A cluster's price is whatever its contract says: without a price here or in
the provider's catalog file it is unknown, and spend caps refuse.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from gpucloud.errors import ConfigurationError

# Where the GPU model is read: CoreWeave's class label, NVIDIA feature discovery's.
DEFAULT_GPU_LABELS = ("nvidia.com/gpu.product", "gpu.nvidia.com/class")
DEFAULT_UNSCHEDULABLE_TIMEOUT = 180.0
# No resource name is common to every cluster: NVIDIA's Network Operator and
# Mellanox's k8s-rdma-shared-dev-plugin name it in their own config
# (rdma/rdma_shared_device_a, rdma/hca_shared_devices_a, ...).
DEFAULT_RDMA_RESOURCE = "rdma/ib"
ACCESS_MODES = ("ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod")


@dataclass(frozen=True)
class Settings:
    context: str | None = None
    namespace: str | None = None
    gpu_labels: tuple[str, ...] = DEFAULT_GPU_LABELS
    unschedulable_timeout: float = DEFAULT_UNSCHEDULABLE_TIMEOUT
    prices: dict[str, Decimal] = field(default_factory=dict)
    rdma_resource: str = DEFAULT_RDMA_RESOURCE
    rdma_configured: bool = False  # the user named it (interconnect: any uses it then)
    storage_class: str | None = None
    volume_access_mode: str = "ReadWriteOnce"
    volume_price: Decimal | None = None


def load(provider: str, default_labels: tuple[str, ...],
         environ: Any = None) -> Settings:
    from gpucloud.config import settings as config_mod

    env = os.environ if environ is None else environ
    section = config_mod.load_config().raw.get(provider, {})
    where = f"config.toml [{provider}]"
    if not isinstance(section, dict):
        raise ConfigurationError(f"{where} must be a table")
    prefix = f"GPUCLOUD_{provider.upper()}_"

    def pick(key: str) -> Any:
        value = env.get(prefix + key.upper(), "").strip()
        return value or section.get(key)

    label = pick("gpu_label")
    labels = (str(label),) if label else default_labels
    timeout = pick("unschedulable_timeout")
    try:
        seconds = float(timeout) if timeout is not None else DEFAULT_UNSCHEDULABLE_TIMEOUT
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 <= seconds <= 86400:
        raise ConfigurationError(f"{where}: unschedulable_timeout must be seconds from 0 to "
                                 f"86400, got {timeout!r}", hint="e.g. unschedulable_timeout = 300")
    rdma = _text(pick("rdma_resource"))
    if rdma is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]"
                                             r"([-A-Za-z0-9_.]*[A-Za-z0-9])?", rdma):
        raise ConfigurationError(f"{where}: rdma_resource must be an extended resource name "
                                 f"(domain/name), got {rdma!r}", hint='e.g. rdma_resource = '
                                 '"rdma/rdma_shared_device_a" (kubectl describe node shows it)')
    mode = _text(pick("volume_access_mode")) or "ReadWriteOnce"
    if mode not in ACCESS_MODES:
        raise ConfigurationError(f"{where}: volume_access_mode must be one of "
                                 f"{', '.join(ACCESS_MODES)}, got {mode!r}",
                                 hint='e.g. volume_access_mode = "ReadWriteMany"')
    return Settings(context=_text(pick("context")), namespace=_text(pick("namespace")),
                    gpu_labels=labels, unschedulable_timeout=seconds,
                    prices=_prices(section.get("prices", {}), where),
                    rdma_resource=rdma or DEFAULT_RDMA_RESOURCE, rdma_configured=rdma is not None,
                    storage_class=_text(pick("storage_class")), volume_access_mode=mode,
                    volume_price=_volume_price(pick("volume_price"), where))


def _volume_price(raw: Any, where: str) -> Decimal | None:
    if raw is None:
        return None
    try:
        price = Decimal(str(raw).strip().lstrip("$")) if not isinstance(raw, bool) else None
    except InvalidOperation:
        price = None
    if price is None or not price.is_finite() or not 0 <= price < 10 ** 3:
        raise ConfigurationError(f"{where}: volume_price must be USD per GB-month, "
                                 f"got {raw!r}", hint='e.g. volume_price = "0.07"')
    return price


def _text(value: Any) -> str | None:
    return str(value) if value else None


def _prices(raw: Any, where: str) -> dict[str, Decimal]:
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{where}.prices must be a table of GPU = \"USD per GPU-hour\"")
    out = {}
    for gpu, value in raw.items():
        try:
            if isinstance(value, bool):
                raise InvalidOperation
            price = Decimal(str(value).strip().lstrip("$"))
        except InvalidOperation:
            price = Decimal(-1)
        if not price.is_finite() or not 0 < price < 10 ** 5:
            raise ConfigurationError(f"{where}.prices: {gpu} must be a positive amount in USD "
                                     f"per GPU-hour, got {value!r}", hint=f'e.g. {gpu} = "2.21"')
        out[str(gpu)] = price
    return out
