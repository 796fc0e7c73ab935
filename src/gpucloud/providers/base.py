"""The Provider protocol: what every adapter implements.

Adapters are sans-I/O. An operation returns a *flow*: a generator that yields
``httpx.Request`` objects (or ``Sleep`` instructions) and receives
``httpx.Response`` objects, then returns a domain value. ``_http.run_flow``
drives flows with a real ``httpx.Client``; tests step them by hand.

    def delete(self, instance_id):
        response = yield self.request("POST", "/terminate", json={...}, kind="idempotent")
        self.raise_for_error(response)

An adapter only translates. Retries, rate limits, auth, logging and
redaction live once, in the driver.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from gpucloud.errors import APIError, APIResponseValidationError, APIStatusError, NotFoundError
from gpucloud.core.flow import JOB_PREFIX, Flow, OfferQuery, Sleep, T  # noqa: F401 - re-exported
from gpucloud.providers.capabilities import Capabilities
# A job seen through its machine(s); a multi-node job's machines are one job.
from gpucloud.providers import job_nodes
from gpucloud.providers.job_nodes import job_of
from gpucloud.providers.times import format_utc, parse_utc  # noqa: F401 - re-exported
from gpucloud.providers.error_table import ErrorFields, ErrorRule
from gpucloud.transport.ratelimit import RateLimit, account_digest
from gpucloud.transport.urls import parsed  # a URL asked again is parsed once
# The marker for values a request carries that must never be shown (a job's
# secret env): redaction hides them from logs, --debug and exceptions.
from gpucloud.transport.redaction import SECRETS_EXTENSION

if TYPE_CHECKING:
    import httpx  # loaded when a request is built (request()), not at import

    from gpucloud.catalog.bundled import ProviderCatalog
    from gpucloud.config.credentials import Credential
    from gpucloud.models import ExecResult, Instance, InstanceSpec, Job, JobRun, Offer
    from gpucloud.models import Volume, VolumeSpec
    from gpucloud.errors import SpecError


# How a request may be retried (see transport/http.py):
#   read        GET-like, safe to repeat at any time
#   idempotent  repeating it has the same effect (terminate an id)
#   launch      creates something billable: never re-sent once it may have
#               reached the server
#   unsafe      any other write: re-sent only when it provably never left
RequestKind = Literal["read", "idempotent", "launch", "unsafe"]
KIND_EXTENSION = "gpucloud_kind"

class Provider:
    """Base class of the adapters. Subclasses set ``name`` and implement the flows."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()
    # The provider's published request limits per request kind ("*": every
    # request), as its contract states them; {} where it states none. The
    # driver paces every flow of one account in the process to them
    # (ratelimit.py) and slows further when 429s say the real limit is tighter.
    rate_limits: ClassVar[Mapping[str, RateLimit]] = {}
    # The most requests the provider's contract allows in flight at once for one
    # account, where it states such a bound; None where it states none. A batch
    # never keeps more launches in flight than this (core/concurrency.py).
    max_in_flight: ClassVar[int | None] = None
    # What the provider keeps of a deadline: every real cloud here stores it as
    # text to the second (format_utc, the name marker), so extend aims at a
    # whole second and compares what it reads back at that precision.
    deadline_precision: ClassVar[timedelta] = timedelta(seconds=1)
    # The form of a machine id as the provider's API documents it; a create
    # reply whose id does not match is not taken as the machine (core/launch.py
    # then looks for it by launch id). None: no documented form to check.
    id_format: ClassVar[re.Pattern[str] | None] = None
    # Whether create() itself reads the new machine back by the id its reply
    # named (GET by id), turning a 404 into ``not_created``. Where it does not,
    # the launcher makes that read before the machine counts as created.
    create_reads_back: ClassVar[bool] = False
    # The rows that map the provider's error replies to gpucloud's errors
    # (error_table.py; each adapter's _wire.ERRORS), read by map_error.
    errors: ClassVar[Sequence[ErrorRule]] = ()
    def volume_rate(self, size_gb: int) -> Decimal | None:
        """USD per GB-month of a new network volume of ``size_gb``, as the provider
        publishes it (a job's estimate); None where not known here. No request."""
        return None

    @staticmethod
    def takes_nodes(offer: Offer) -> bool:
        """Whether the planner may place a multi-node job's nodes on this offer."""
        return True

    def __init__(self, catalog: ProviderCatalog, credential: Credential | None = None) -> None:
        self.catalog = catalog
        self.credential = credential

    # -- plumbing the driver uses ------------------------------------------

    @property
    def base_url(self) -> str:
        return self.catalog.api_base.rstrip("/")

    def auth(self) -> httpx.Auth | None:
        """The httpx.Auth that signs this provider's requests."""
        if self.credential is None:
            return None
        from gpucloud.transport.bearer_auth import BearerAuth

        return BearerAuth(self.credential.secret)

    def limits(self) -> Mapping[str, RateLimit]:
        """The limits in force: ``rate_limits`` unless configured (the sandbox)."""
        return self.rate_limits

    def rate_scope(self) -> tuple[str, str, str]:
        """Who shares one budget: this provider, API base and account (a digest
        of the credential, never the key itself)."""
        return (self.name, self.base_url, account_digest(self.credential))

    def exec_command(self, instance_id: str, command: str, timeout: float) -> ExecResult:
        """Run `command` through the provider's own exec API (machines whose
        connection method is "api"). Blocking and doing its own I/O, unlike the
        flows: an exec API needs a connection upgrade or a stream (Kubernetes'
        websocket exec) that a request/response flow cannot express. AsyncClient
        runs it in a thread."""
        from gpucloud.errors import SpecError

        raise SpecError(f"{self.name} has no exec API",
                        hint="reach the machine over SSH: `gpucloud ssh REF`")

    def transport(self) -> httpx.BaseTransport | None:
        """A custom transport (the sandbox serves itself in-process)."""
        return None

    def async_transport(self) -> httpx.AsyncBaseTransport | None:
        return None

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        kind: RequestKind | None = None,
        secrets: Sequence[str] = (),
    ) -> httpx.Request:
        import httpx

        if kind is None:
            kind = "read" if method in ("GET", "HEAD") else (
                "idempotent" if method in ("PUT", "DELETE") else "unsafe")
        return httpx.Request(method, parsed(self.base_url + path) if params is None
                             else self.base_url + path, json=json, params=params,
                             headers={"Accept": "application/json", "User-Agent": _user_agent()},
                             extensions={KIND_EXTENSION: kind,
                                         SECRETS_EXTENSION: tuple(v for v in secrets if v)})

    # -- errors --------------------------------------------------------------

    def raise_for_error(self, response: httpx.Response) -> None:
        if response.is_error:
            raise self.map_error(response)

    def error_fields(self, response: httpx.Response) -> ErrorFields:
        """What the provider's error body says (its code, message); an adapter
        sets this to its ``_wire.error_fields``. By default: nothing."""
        return ErrorFields()

    def hint_fields(self) -> Mapping[str, str]:
        """The {fields} a row's hint template may name (this adapter's settings)."""
        return {}

    def map_error(self, response: httpx.Response, *,
                  rules: Sequence[ErrorRule] = ()) -> APIError:
        """An error reply as a gpucloud error, by the adapter's error table
        (error_table.to_error): ``rules`` are a narrower context's rows, tried first."""
        from gpucloud.providers.error_table import to_error

        return to_error(self, response, rules)

    def redact(self, text: str) -> str:
        """A provider message is shown to users and logged: it must never carry our
        secret, whatever the provider chose to echo."""
        from gpucloud.transport.redaction import scrub

        if self.credential is not None:
            secret = self.credential.secret.get_secret_value()
            if secret:
                text = text.replace(secret, "[secure]")
        return scrub(text)  # and a job's secrets, should the provider echo one

    def json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise APIResponseValidationError(
                f"{self.name}: response to {response.request.method} "
                f"{response.request.url.path} is not JSON",
                provider=self.name, request=response.request,
            ) from exc

    def not_created(self, instance_id: str, why: str | None = None) -> APIResponseValidationError:
        """A create reply named ``instance_id`` but it cannot be taken as the
        machine (by default: the provider has no machine by that id); the
        machine may still exist under another id, and the launcher then looks
        for its launch id."""
        why = why or f"{self.name} then says does not exist"
        return APIResponseValidationError(
            f"{self.name}: the create reply names machine {str(instance_id)[:40]!r}, which "
            f"{why}", provider=self.name)

    def check_reply_id(self, instance_id: str) -> None:
        """A create reply's id must have the form the provider documents
        (``id_format``): ``{"id": "<html>"}`` is an unreadable reply, not a machine."""
        if self.id_format is not None and not self.id_format.fullmatch(str(instance_id)):
            raise self.not_created(instance_id, "is not an id of this provider's form")

    def read_back(self, replied: Instance) -> Flow[Instance]:
        """The machine a create reply named, read by its id: one mechanism for
        every provider. An id not of the provider's form, or a 404, means the
        reply named no machine of this launch. Any other failure does not
        contradict the reply, and the machine is billed from here on: it is
        kept as replied (raising would make the caller launch a second one)."""
        self.check_reply_id(replied.id)
        try:
            return (yield from self.get(replied.id))
        except NotFoundError as exc:
            raise self.not_created(replied.id) from exc
        except Exception as exc:  # noqa: BLE001 - any failure of the read-back, see above
            logging.getLogger(f"gpucloud.{self.name}").warning(
                "%s: created %s but could not read it back: %s", self.name, replied.id, exc)
            return replied

    def invalid(self, response: httpx.Response, detail: str) -> APIResponseValidationError:
        return APIResponseValidationError(
            f"{self.name}: unexpected response to {response.request.method} "
            f"{response.request.url.path}: {detail}",
            provider=self.name, request=response.request,
        )

    # -- operations (flows) ---------------------------------------------------

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        raise NotImplementedError

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        """Launch one machine. Must put spec.launch_id where list() can read it back."""
        raise NotImplementedError

    def list_instances(self) -> Flow[list[Instance]]:
        raise NotImplementedError

    def list_page(self, cursor: str | None = None) -> Flow[tuple[list[Instance], str | None]]:
        """One page of ``list_instances`` and the next page's cursor (None: the
        last), so a listing shows and records machines as they come. By default
        the whole list is one page; an adapter whose API pages overrides it."""
        machines = yield from self.list_instances()
        return machines, None

    def get(self, instance_id: str) -> Flow[Instance]:
        raise NotImplementedError

    def delete(self, instance_id: str) -> Flow[None]:
        raise NotImplementedError

    def delete_expired(self, instance: Instance) -> Flow[bool]:
        """Terminate a machine the reaper has just read (`instance`) past its
        deadline. False: not terminated, its deadline moved since that read.

        This default is a plain delete: the provider offers no delete
        conditional on the machine's state, so an extend landing between the
        reaper's read and this request loses (and says so, deadlines.py). An
        adapter whose provider has such a delete overrides this."""
        yield from self.delete(instance.id)
        return True

    def stop(self, instance_id: str) -> Flow[Instance]:
        """Power off, keeping the disk (only where capabilities.stop_start)."""
        raise NotImplementedError

    def start(self, instance_id: str) -> Flow[Instance]:
        raise NotImplementedError

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        """Move a machine's deadline in every place this provider keeps it (what
        ``extend`` does); returns the machine as read back afterwards.

        ``instance`` is the machine as just read (``get``), so an adapter that must
        read-modify-write (a label holding the name too) keeps the rest. Where the
        provider cannot hold a later deadline, raise SpecError saying why: a
        deadline that only the laptop knows is not enforced by any reaper."""
        from gpucloud.errors import SpecError

        raise SpecError(f"{self.name}: moving a machine's deadline is not supported",
                        hint=f"`gpucloud delete {self.name}/{instance.id}` ends it; create a "
                             "new machine with the deadline you want")

    def wait_refusal(self, instance: Instance, waited: float) -> APIError | None:
        """An error that ends a wait early while the machine is still pending
        (Kubernetes: a pod the scheduler has not placed for too long); None:
        keep waiting. ``waited``: seconds the wait has lasted."""
        return None

    # -- jobs (flows) -----------------------------------------------------------
    # Default: a job is a machine that runs the container (spec.job, translated
    # by the adapter's create) and ends with it; its launch id starts with
    # flow.JOB_PREFIX. Its status is what the machine says: a machine that has
    # ended cannot say whether the job succeeded, so that is UNKNOWN. Adapters
    # with real jobs (Kubernetes, the sandbox) override all of these.

    def submit_job(self, spec: InstanceSpec) -> Flow[Job]:
        instance = yield from self.create(spec)
        return job_of(instance)

    def list_jobs(self) -> Flow[list[Job]]:
        machines = yield from self.list_instances()
        return job_nodes.jobs_of([m for m in machines
                                  if (m.launch_id or "").startswith(JOB_PREFIX)])

    def get_job(self, job_id: str) -> Flow[Job]:
        return (yield from job_nodes.read_job(self, job_id))

    def cancel_job(self, job_id: str) -> Flow[None]:
        yield from job_nodes.cancel_job(self, job_id)

    def start_node_job(self, instance: Instance, job: JobRun) -> Flow[bool]:
        """Start a multi-node job's node ``job`` on ``instance`` by the provider's own
        means, its volumes mounted: True; False (default): gpucloud does, over ssh."""
        return False
        yield  # pragma: no cover - a flow

    def node_mounts(self, job: JobRun) -> Flow[tuple[list[tuple[str, str]], list[str]]]:
        """(host directory, container path) binds and setup lines by which a node
        started over ssh mounts the job's volumes (``capabilities.shared_volumes``)."""
        if job.volumes:
            from gpucloud.errors import SpecError

            raise SpecError(f"{self.name} cannot mount one volume on every node of a job")
        return [], []
        yield  # pragma: no cover - a flow

    def job_logs(self, job_id: str, tail: int | None = None) -> Flow[str]:
        """The job's output, where the provider offers it."""
        from gpucloud.errors import SpecError

        raise SpecError(f"{self.name} does not offer a job's logs through its API",
                        hint=f"`gpucloud ssh {self.name}/{job_id}` and read them on the machine")
        yield  # pragma: no cover - a flow

    def verify(self) -> Flow[None]:
        """A cheap authenticated read that proves the credential works."""
        yield from self.list_instances()

    # -- volumes (flows) ----------------------------------------------------------
    # Network storage billed by the GB-month (capabilities.volumes). A provider
    # without volumes refuses with a SpecError naming the ones that have them.

    def volume_refusal(self) -> SpecError | None:
        """Why its volumes are listed but never created or mounted (None: both are done)."""
        return None

    def list_volumes(self) -> Flow[list[Volume]]:
        raise self._no_volumes()
        yield  # pragma: no cover - a flow

    def create_volume(self, spec: VolumeSpec) -> Flow[Volume]:
        raise self._no_volumes()
        yield  # pragma: no cover - a flow

    def delete_volume(self, volume_id: str) -> Flow[None]:
        raise self._no_volumes()
        yield  # pragma: no cover - a flow

    def _no_volumes(self) -> Exception:
        from gpucloud.errors import SpecError

        return SpecError(f"{self.name} has no network volumes in gpucloud",
                         hint="`gpucloud providers` shows which providers have volumes")


@functools.cache  # the same on every request
def _user_agent() -> str:
    from gpucloud import __version__

    return f"gpucloud/{__version__}"


__all__ = [
    "APIStatusError", "Capabilities", "Flow", "KIND_EXTENSION", "OfferQuery", "SECRETS_EXTENSION",
    "Provider", "RequestKind", "Sleep", "job_of",
]

