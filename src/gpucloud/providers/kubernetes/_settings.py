"""A cluster's settings: the environment first, then config.toml.

    [kubernetes]                       # or [coreweave]
    context = "gpucloud@cks-cluster"   # GPUCLOUD_KUBERNETES_CONTEXT; else current-context
    namespace = "tenant-my-ns"         # GPUCLOUD_KUBERNETES_NAMESPACE; else the context's
    gpu_label = "nvidia.com/gpu.product"   # GPUCLOUD_KUBERNETES_GPU_LABEL
    unschedulable_timeout = 300        # s a pod may stay Unschedulable in `create --wait`
    [kubernetes.prices]                # USD per GPU-hour, by GPU name or node-label value
    H100 = "2.21"

A cluster's price is whatever its contract says: without a price here or in
the provider's catalog file it is unknown, and spend caps refuse.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from gpucloud.errors import ConfigurationError

# Where the GPU model is read: CoreWeave's class label, NVIDIA feature discovery's.
DEFAULT_GPU_LABELS = ("nvidia.com/gpu.product", "gpu.nvidia.com/class")
DEFAULT_UNSCHEDULABLE_TIMEOUT = 180.0


@dataclass(frozen=True)
class Settings:
    context: str | None = None
    namespace: str | None = None
    gpu_labels: tuple[str, ...] = DEFAULT_GPU_LABELS
    unschedulable_timeout: float = DEFAULT_UNSCHEDULABLE_TIMEOUT
    prices: dict[str, Decimal] = field(default_factory=dict)


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
    return Settings(context=_text(pick("context")), namespace=_text(pick("namespace")),
                    gpu_labels=labels, unschedulable_timeout=seconds,
                    prices=_prices(section.get("prices", {}), where))


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
