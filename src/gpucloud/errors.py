"""The one error hierarchy of gpucloud.

    GpuCloudError
      ConfigurationError (CredentialsError, StateError), SpecError (UnknownGPUError),
      BudgetExceededError, ConfirmationRequired, NoOffersError, BatchBusyError
      APIError(provider, request)
        APIConnectionError -> APITimeoutError
        APIStatusError(status_code, provider_code, request_id)
          BadRequestError, AuthenticationError, PermissionDeniedError, NotFoundError,
          ConflictError, RateLimitError, InternalServerError
        APIResponseValidationError
        InsufficientCapacityError (OfferRefusedError), QuotaExceededError
      WaitError -> InstanceFailedError, WaitTimeoutError

Every error carries a one-line ``message`` and an optional ``hint``. The CLI
maps classes to exit codes in one table (``EXIT_CODES`` below) and callers
catch "no capacity" once, not once per cloud.

This module imports nothing heavy: the CLI loads it on every error path.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # names only: this module stays free of heavy imports
    import httpx

    from gpucloud.models import Attempt, Instance


class _Keep(enum.Enum):
    KEEP = "keep"


KEEP = _Keep.KEEP  # with_details: this field as it is
_E = TypeVar("_E", bound="GpuCloudError")


class GpuCloudError(Exception):
    """Base class of every error gpucloud raises on purpose."""

    code = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # Set where a create raises (with_details): every offer tried, and the
        # machines created before it failed part-way (still running).
        self.attempts: list[Attempt] = []
        self.instances: list[Instance] = []
        # The client-generated launch id when the error belongs to a launch:
        # the machine may exist and carries this id (reconcile looks for it).
        self.launch_id: str | None = None

    def __str__(self) -> str:
        return self.message

    def with_details(self: _E, *, message: str | _Keep = KEEP, hint: str | None | _Keep = KEEP,
                     attempts: list[Attempt] | _Keep = KEEP,
                     instances: list[Instance] | _Keep = KEEP,
                     launch_id: str | None | _Keep = KEEP) -> _E:
        """A new error of this class with every field of this one, the given ones
        changed: what a create knows (its attempts, the machines it made) is put
        in a complete error raised there (``raise exc.with_details(...) from
        exc``), never written into an error on its way up."""
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        text = self.message if message is KEEP else message
        Exception.__init__(new, text, *self.args[1:])
        changes = {"message": message, "hint": hint, "attempts": attempts,
                   "instances": instances, "launch_id": launch_id}
        new.__dict__.update({k: v for k, v in changes.items() if v is not KEEP})
        return new


class ConfigurationError(GpuCloudError):
    code = "configuration"


class CredentialsError(ConfigurationError):
    code = "credentials"


class StateError(ConfigurationError):
    """The local state database (the journal) is unreadable or unwritable."""

    code = "state"

    def __init__(self, message: str, *, path: object, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = str(path)


class SpecError(GpuCloudError):
    """The request itself is invalid: bad GPU name, negative count, bad spec."""

    code = "invalid_spec"


class UnknownGPUError(SpecError):
    code = "unknown_gpu"

    def __init__(self, name: str, suggestions: list[str]) -> None:
        hint = (
            f"did you mean {' or '.join(suggestions)}?"
            if suggestions
            else "run `gpucloud gpus` to list known GPU names"
        )
        super().__init__(f"unknown GPU {name!r}", hint=hint)
        self.name = name
        self.suggestions = suggestions


class BudgetExceededError(GpuCloudError):
    code = "over_budget"


class NoOffersError(GpuCloudError):
    """No provider in scope sells (or has available) what was asked for."""

    code = "no_offers"


class ConfirmationRequired(GpuCloudError):
    """A command that costs money was neither confirmed nor given --yes."""

    code = "confirmation_required"


class BatchBusyError(GpuCloudError):
    """Another run of the same batch key is in progress (another process, thread
    or client): both would launch the same missing slots. Raised before anything
    is planned or launched; the key is free again when that run ends or dies."""

    code = "batch_busy"


class APIError(GpuCloudError):
    """Something went wrong talking to a provider."""

    code = "api_error"

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        request: httpx.Request | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.provider = provider
        self.request = request

    @property
    def request(self) -> httpx.Request | None:
        """The httpx.Request, copied with its credentials redacted (the
        Authorization header, a token request's client secret or refresh token):
        an exception is logged, pickled and sent to error trackers."""
        return self._request

    @request.setter
    def request(self, value: httpx.Request | None) -> None:
        from gpucloud.transport.redaction import redact_request

        self._request = redact_request(value)


class APIConnectionError(APIError):
    code = "connection_error"

    def __init__(self, message: str, *, provider: str, request: httpx.Request | None = None,
                 hint: str | None = None, sent: bool = False) -> None:
        super().__init__(message, provider=provider, request=request, hint=hint)
        # True when the request may have reached the server (read timeout,
        # broken connection after writing): the outcome is unknown.
        self.sent = sent


class APITimeoutError(APIConnectionError):
    code = "timeout"


class APIResponseValidationError(APIError):
    code = "invalid_response"


class APIStatusError(APIError):
    """The provider answered with an error status."""

    code = "api_status_error"

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int,
        provider_code: str | None = None,
        request_id: str | None = None,
        request: httpx.Request | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, provider=provider, request=request, hint=hint)
        self.status_code = status_code
        self.provider_code = provider_code
        self.request_id = request_id


class BadRequestError(APIStatusError):
    """The provider rejected the request's parameters (bad region, bad name...)."""

    code = "invalid_request"


class AuthenticationError(APIStatusError):
    code = "authentication"


class PermissionDeniedError(APIStatusError):
    code = "permission_denied"


class NotFoundError(APIStatusError):
    code = "not_found"


class ConflictError(APIStatusError):
    code = "conflict"


class RateLimitError(APIStatusError):
    code = "rate_limited"
    # Seconds the provider asked us to wait (Retry-After), when it said.
    retry_after: float | None = None


class InternalServerError(APIStatusError):
    code = "server_error"


class InsufficientCapacityError(APIStatusError):
    code = "no_capacity"


class OfferRefusedError(InsufficientCapacityError):
    """This one offer cannot be launched by this account (a pool it may not use,
    a host that refused the rental) while other offers may work: failover moves
    on to the next candidate, as for no capacity."""

    code = "offer_refused"


class QuotaExceededError(APIStatusError):
    code = "quota_exceeded"


class WaitError(GpuCloudError):
    code = "wait_failed"


class InstanceFailedError(WaitError):
    code = "instance_failed"


class WaitTimeoutError(WaitError):
    code = "wait_timeout"


# Who reads the hints: a program calling the SDK (keyword arguments) unless
# the command line has said it is the reader (flags); see spoken_by_cli.
_READER = ["sdk"]


def option(sdk: str, cli: str, example: str | None = None,
           cli_example: str | None = None) -> str:
    """How a hint names an argument, in the words of whoever reads it: the SDK
    keyword to a program (``max_cost=200``), the flag on the command line
    (``--max-cost 200``). ``cli_example`` when the flag's value is written
    otherwise (``hours=72`` is ``--hours 72h``); "" for a flag that takes none."""
    if _READER[0] == "cli":
        value = example if cli_example is None else cli_example
        return f"{cli} {value}" if value else cli
    return f"{sdk}={example if example is not None else ''}"


def spoken_by_cli() -> Callable[[], None]:
    """Hints built from now on name CLI flags (the CLI calls this once per run);
    returns what restores the SDK's words (the CLI also runs inside programs)."""
    before = _READER[0]
    _READER[0] = "cli"

    def restore() -> None:
        _READER[0] = before
    return restore


# One table: error class -> CLI exit code (the codes docs/errors.md documents).
# Looked up along the MRO, so the most specific entry wins.
EXIT_CODES: dict[type[BaseException], int] = {
    GpuCloudError: 10,
    SpecError: 2,
    BadRequestError: 2,
    ConfigurationError: 3,
    CredentialsError: 3,
    AuthenticationError: 4,
    PermissionDeniedError: 4,
    NotFoundError: 5,
    InsufficientCapacityError: 6,
    QuotaExceededError: 6,
    NoOffersError: 6,
    BudgetExceededError: 7,
    ConfirmationRequired: 8,
    # A usage error: the command is fine, but not while its batch key runs.
    BatchBusyError: 2,
    WaitError: 9,
    APIError: 10,
    KeyboardInterrupt: 130,
}


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code for an exception; 1 for anything unexpected."""
    for cls in type(exc).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    return 1
