"""A provider's error table: which error replies become which gpucloud error.

Each adapter's ``_wire.py`` holds two things: ``error_fields(response)``, which
reads the provider's error body (its code, its message), and ``ERRORS``, the
rows. ``to_error`` (behind ``Provider.map_error``) applies them, the same way
for every provider: the first row that matches the reply decides the class
and the hint; no row, or a row without a class, leaves the class to the
reply's HTTP status (transport/errors.py). The reply's message, code and hint
are redacted there too, so no adapter has to remember it.

A row matches when every condition it states holds (a condition left out
matches anything); several rows with one outcome say "or".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import httpx

    from gpucloud.errors import APIError, APIStatusError

# Status ranges for rows.
CLIENT_ERROR = range(400, 500)
SERVER_ERROR = range(500, 600)
# A `text` pattern for "the reply said something": matches any text that
# error_fields found to search (even empty), never a reply without one.
SAID = re.compile("")


@dataclass(frozen=True)
class ErrorFields:
    """What a provider's error body says."""

    code: str | None = None  # its error code or type (shown as the provider's code)
    message: str | None = None  # its message; None: the HTTP reason phrase
    hint: str | None = None  # a remedy the provider itself suggests; a row's hint wins
    text: str | None = None  # the words the rows' `text` patterns search; None: no row's


@dataclass(frozen=True)
class ErrorRule:
    """One row: the conditions a reply must meet, then the error it becomes."""

    error: type[APIStatusError] | None = None  # None: the class of the HTTP status
    status: int | Collection[int] | None = None
    # The provider's code, or codes; None in the collection: a reply without one.
    code: str | Collection[str | None] | None = None
    text: re.Pattern[str] | None = None  # searched in ErrorFields.text
    unless: re.Pattern[str] | None = None  # ...and must not be found there
    request: Callable[[httpx.Request], bool] | None = None  # which request was answered
    # A str.format template: {name} fields come from the adapter's hint_fields().
    hint: str | None = None

    def matches(self, response: httpx.Response, fields: ErrorFields) -> bool:
        status = response.status_code
        if self.status is not None and not (
                status == self.status if isinstance(self.status, int) else status in self.status):
            return False
        if self.code is not None and not (
                fields.code == self.code if isinstance(self.code, str)
                else fields.code in self.code):
            return False
        if self.text is not None and (fields.text is None or not self.text.search(fields.text)):
            return False
        if self.unless is not None and fields.text is not None \
                and self.unless.search(fields.text):
            return False
        return self.request is None or self.request(response.request)


def first_match(rules: Iterable[ErrorRule], response: httpx.Response,
                fields: ErrorFields) -> ErrorRule | None:
    return next((rule for rule in rules if rule.matches(response, fields)), None)


class Mapped(Protocol):
    """What the table reads of an adapter (base.Provider)."""

    name: str
    errors: Sequence[ErrorRule]

    def error_fields(self, response: httpx.Response) -> ErrorFields: ...

    def hint_fields(self) -> Mapping[str, str]: ...

    def redact(self, text: str) -> str: ...


def to_error(provider: Mapped, response: httpx.Response,
             rules: Sequence[ErrorRule] = ()) -> APIError:
    """An error reply as a gpucloud error: the first of ``rules`` and the
    adapter's ``errors`` that matches picks the class and hint; message, code
    and hint redacted."""
    from gpucloud.transport.errors import status_error

    fields = provider.error_fields(response)
    rule = first_match((*rules, *provider.errors), response, fields)
    hint = fields.hint
    if rule is not None and rule.hint is not None:
        hint = rule.hint.format_map(provider.hint_fields()) if "{" in rule.hint else rule.hint
    message = fields.message or response.reason_phrase or "request failed"
    return status_error(
        provider.name, response, message=provider.redact(message),
        provider_code=provider.redact(fields.code) if fields.code else None,
        hint=provider.redact(hint) if hint else None,
        cls=rule.error if rule is not None else None)


def json_body(response: httpx.Response) -> object:
    """The reply's JSON, or None for anything else (an HTML page from a proxy, an
    empty 502, a nesting too deep to parse)."""
    try:
        return response.json()
    except (ValueError, RecursionError):
        return None

