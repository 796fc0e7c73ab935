"""The price catalog: the bundled data and its reader, GPU names, pricing,
plausibility bounds, catalog rows priced for a query, and which providers sell
spot."""

from gpucloud.compat import forward

__getattr__ = forward(__name__)  # gpucloud.catalog was a module in 0.1.0
