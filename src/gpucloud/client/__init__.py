"""The SDK's clients: Client (threads) and AsyncClient (asyncio), with the same
methods and the same answers."""

from gpucloud.client.async_client import AsyncClient
from gpucloud.client.sync_client import Client
from gpucloud.compat import forward

__all__ = ["AsyncClient", "Client"]

__getattr__ = forward(__name__)  # gpucloud.client was a module in 0.1.0
