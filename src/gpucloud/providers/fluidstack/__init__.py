"""Fluidstack (Atlas Infrastructure API v1alpha1): ``adapter.py`` holds the
flows, ``_wire.py`` the wire format and error table, ``_settings.py`` the
project and region."""

from gpucloud.providers.fluidstack.adapter import FluidstackProvider

__all__ = ["FluidstackProvider"]
