"""Configuration: where gpucloud keeps its files and the config file (settings),
credentials and the keyring probe, file-size limits, YAML read within limits,
atomic file writes, and who is acting (identity: a label, never access control)."""

from gpucloud.compat import forward

__getattr__ = forward(__name__)  # gpucloud.config was a module in 0.1.0
