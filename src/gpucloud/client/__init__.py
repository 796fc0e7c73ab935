"""The SDK's clients: Client (threads) and AsyncClient (asyncio), with the same
methods and the same answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpucloud.client.sync_client import Client
from gpucloud.compat import forward

if TYPE_CHECKING:
    from gpucloud.client.async_client import AsyncClient

__all__ = ["AsyncClient", "Client"]

_forward = forward(__name__)  # gpucloud.client was a module in 0.1.0


def __getattr__(name: str) -> Any:
    # AsyncClient on first use: the CLI and synchronous scripts never load asyncio.
    if name == "AsyncClient":
        from gpucloud.client.async_client import AsyncClient

        return AsyncClient
    return _forward(name)
