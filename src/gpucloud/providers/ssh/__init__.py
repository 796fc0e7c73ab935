"""The ssh provider: a team's own machines over SSH (adapter.py)."""

from gpucloud.providers.ssh.adapter import SshProvider

__all__ = ["SshProvider"]
