"""What a provider package's flow modules (offers, volumes, clusters, deadlines)
use of their adapter, typed as a Protocol: the adapter module imports those
modules, so they cannot import the adapter class back. Each module extends it
with the adapter's own helpers it calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx

    from gpucloud.catalog.bundled import ProviderCatalog
    from gpucloud.errors import APIError, APIResponseValidationError
    from gpucloud.providers.base import RequestKind
    from gpucloud.providers.error_table import ErrorRule


class AdapterCalls(Protocol):
    """The Provider base class's request and error calls."""

    @property
    def name(self) -> str: ...

    @property
    def catalog(self) -> ProviderCatalog: ...

    def request(self, method: str, path: str, *, json: Any = None,
                params: dict[str, Any] | None = None, kind: RequestKind | None = None,
                secrets: Sequence[str] = ()) -> httpx.Request: ...

    def raise_for_error(self, response: httpx.Response) -> None: ...

    def map_error(self, response: httpx.Response, *,
                  rules: Sequence[ErrorRule] = ()) -> APIError: ...

    def invalid(self, response: httpx.Response, detail: str) -> APIResponseValidationError: ...


__all__ = ["AdapterCalls"]
