"""Vast.ai adapter: the flows in adapter.py, the wire format and error table in _wire.py."""

from gpucloud.providers.vastai.adapter import VastProvider

__all__ = ["VastProvider"]
