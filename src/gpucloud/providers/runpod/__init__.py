"""RunPod (runpod.io), REST API v2: ``adapter.py`` holds the flows, ``_wire.py``
the wire format and error table."""

from gpucloud.providers.runpod.adapter import RunPodProvider

__all__ = ["RunPodProvider"]
