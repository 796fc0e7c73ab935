"""gpucloud's adapter for Shadeform (api.shadeform.ai), a GPU cloud aggregator."""

from gpucloud.providers.shadeform.adapter import ShadeformProvider

__all__ = ["ShadeformProvider"]
