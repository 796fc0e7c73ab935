"""Validate the httpx requests an adapter sends (and the bodies it parses)
against a provider's OpenAPI 3.x document, with openapi-core.

    from tests.openapi_check import validate_request, validate_response
    validate_request(SPEC, request)            # AssertionError when it breaks the contract
    validate_response(SPEC, request, response)

openapi-core speaks its own request/response protocols; the two small classes
below present an ``httpx.Request`` / ``httpx.Response`` that way. Specs are
parsed once per path (parsing and checking a spec costs far more than one
validation).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from werkzeug.datastructures import Headers, ImmutableMultiDict

__all__ = ["HttpxOpenAPIRequest", "HttpxOpenAPIResponse", "load_spec", "request_errors",
           "response_errors", "validate_request", "validate_response"]


class HttpxOpenAPIRequest:
    """An httpx.Request seen through openapi-core's Request protocol."""

    def __init__(self, request: httpx.Request) -> None:
        self.request = request
        url = request.url
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(parse_qsl(url.query.decode("ascii"), keep_blank_values=True)),
            header=Headers(list(request.headers.multi_items())),
            cookie=ImmutableMultiDict(),
        )

    @property
    def host_url(self) -> str:
        url = self.request.url
        port = f":{url.port}" if url.port else ""
        return f"{url.scheme}://{url.host}{port}"

    @property
    def path(self) -> str:
        # Still percent-encoded, as sent: an id holding "/" must not match a deeper path.
        return self.request.url.raw_path.split(b"?", 1)[0].decode("ascii")

    @property
    def method(self) -> str:
        return self.request.method.lower()

    @property
    def body(self) -> bytes | None:
        # A request built with json=/content= is already read; a streaming one
        # is read here so the body can be checked too.
        content = self.request.read()
        return content or None

    @property
    def content_type(self) -> str:
        return self.request.headers.get("content-type", "")


class HttpxOpenAPIResponse:
    """An httpx.Response seen through openapi-core's Response protocol."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    @property
    def data(self) -> bytes:
        return self.response.read()

    @property
    def status_code(self) -> int:
        return self.response.status_code

    @property
    def content_type(self) -> str:
        return self.response.headers.get("content-type", "")

    @property
    def headers(self) -> Headers:
        return Headers(list(self.response.headers.multi_items()))


@lru_cache(maxsize=None)
def load_spec(spec_path: str | Path) -> OpenAPI:
    return OpenAPI.from_file_path(str(spec_path))


def _describe(request: httpx.Request) -> str:
    query = request.url.query.decode()
    return f"{request.method} {request.url.path}{'?' + query if query else ''}"


def _flatten(errors: list[Exception]) -> list[str]:
    """Messages of the errors and of the schema errors nested inside them."""
    out: list[str] = []
    for exc in errors:
        out.append(f"{type(exc).__name__}: {exc}")
        cause = exc.__cause__
        nested_errors = getattr(cause, "schema_errors", None) or getattr(exc, "schema_errors", ())
        for nested in nested_errors or ():
            where = "/".join(str(p) for p in nested.absolute_path) or "(root)"
            out.append(f"  at {where}: {nested.message}")
    return out


def request_errors(spec_path: str | Path, request: httpx.Request) -> list[str]:
    spec = load_spec(str(spec_path))
    return _flatten(list(spec.iter_request_errors(HttpxOpenAPIRequest(request))))


def response_errors(spec_path: str | Path, request: httpx.Request,
                    response: httpx.Response) -> list[str]:
    spec = load_spec(str(spec_path))
    return _flatten(list(spec.iter_response_errors(
        HttpxOpenAPIRequest(request), HttpxOpenAPIResponse(response))))


def validate_request(spec_path: str | Path, request: httpx.Request) -> None:
    """AssertionError listing every way the request breaks the spec."""
    errors = request_errors(spec_path, request)
    if errors:
        raise AssertionError(
            f"{_describe(request)} does not match {Path(spec_path).name}:\n" + "\n".join(errors))


def validate_response(spec_path: str | Path, request: httpx.Request,
                      response: httpx.Response) -> None:
    """AssertionError when a (fixture) response is not what the spec says the API returns."""
    errors = response_errors(spec_path, request, response)
    if errors:
        raise AssertionError(
            f"response {response.status_code} to {_describe(request)} does not match "
            f"{Path(spec_path).name}:\n" + "\n".join(errors))


class SpecCheckedAPI:
    """respx routes that validate every request against ``spec``, then answer in turn.

    Subclass per provider with ``spec = <path>``. ``on(method, path, *answers)``
    answers with each callable (request -> Response) in turn, repeating the
    last; an exception instance is raised instead (transport errors).
    """

    spec: Path

    def __init__(self, router: Any) -> None:
        self.router = router
        self.requests: list[httpx.Request] = []
        self.violations: list[str] = []

    def on(self, method: str, path: str, *answers: Any) -> Any:
        queue = list(answers)

        def handler(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            errors = request_errors(self.spec, request)
            if errors:
                self.violations.extend(errors)
                raise AssertionError("\n".join(errors))
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
            if isinstance(answer, Exception):
                raise answer
            return answer(request)

        return self.router.route(method=method, path=path).mock(side_effect=handler)
