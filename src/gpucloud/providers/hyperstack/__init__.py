"""Hyperstack (NexGen Cloud's Infrahub API v1): ``adapter.py`` holds the flows,
``_wire.py`` the wire format and error table."""

from gpucloud.providers.hyperstack.adapter import HyperstackProvider

__all__ = ["HyperstackProvider"]
