"""The sandbox provider: a simulated GPU cloud served in-process (no real GPUs).

``adapter.py`` is the adapter, ``server.py`` the simulated cloud (its
docstring documents the HTTP API and the ``GPUCLOUD_SANDBOX_*`` knobs).
"""

from gpucloud.providers.sandbox.adapter import SandboxProvider

__all__ = ["SandboxProvider"]
