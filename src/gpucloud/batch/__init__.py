"""Batches: many machines in one create, what a batch takes and gives back, and
one run at a time per batch key."""

from gpucloud.compat import forward

__getattr__ = forward(__name__)  # gpucloud.batch was a module in 0.1.0
