"""Vast.ai adapter: the flows in adapter.py, the wire format in _wire.py."""

from gpucloud.providers.vastai._wire import (
    DEFAULT_DISK_GB, VAST_GPU_NAMES, instance_type_name, map_status, search_body,
)
from gpucloud.providers.vastai.adapter import VastProvider

__all__ = ["DEFAULT_DISK_GB", "VAST_GPU_NAMES", "VastProvider", "instance_type_name",
           "map_status", "search_body"]
