"""Verda (formerly DataCrunch): ``adapter.py`` is the adapter, ``_wire.py`` the
token endpoint, status and error tables and field readers it uses."""

from gpucloud.providers.verda.adapter import VerdaProvider

__all__ = ["VerdaProvider"]
