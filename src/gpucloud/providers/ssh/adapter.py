"""The ssh provider: a team's own machines, reached over SSH.

The rent-or-own half that is owned: the hosts config.toml lists
([[providers.ssh.hosts]], _settings.py) are offers beside the rented ones,
the same job spec runs on both, and the cost ledger counts each host at the
hourly cost configured for it, so `gpucloud costs` shows owned machines
beside rented ones.

* An offer per host: its GPUs, its configured cost (0: not configured, shown
  as unknown), available while no one holds its lock.
* Create allocates a free host of the offer's GPU and count (the offer's
  host first, then any other): it takes the lock on the host itself
  (_remote.py: an atomic mkdir, recording our launch id, deadline and
  owner) and checks with `nvidia-smi -L` that the host holds what config
  says; a host that does not is released again and skipped.
* A machine is a held lock: list and get read the hosts' locks, so the
  reaper finds a past-deadline allocation by its launch id and releases it
  through the normal reap path.
* Delete releases: ends what gpucloud started there (the job runner's
  session, the job's container), removes the lock. The host stays on.
* A job runs as on the VM clouds (_jobscript.vm_script), started detached
  on the host; it ends by releasing the host instead of powering it off.
"""

from __future__ import annotations

import getpass
import re
import socket
from collections.abc import Sequence
from datetime import datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from gpucloud.errors import (
    APIError, AuthenticationError, InsufficientCapacityError, NotFoundError, PermissionDeniedError,
)
from gpucloud.models import Instance, InstanceSpec, InstanceStatus, JobRun, Offer
from gpucloud.providers._connection import ssh_endpoint
from gpucloud.providers.base import Capabilities, Flow, OfferQuery, Provider, format_utc, \
    parse_utc
from gpucloud.providers.error_table import ErrorFields, ErrorRule, json_body
from gpucloud.providers.ssh import _settings
from gpucloud.providers.ssh._settings import Host

if TYPE_CHECKING:
    from gpucloud.catalog.bundled import ProviderCatalog
    from gpucloud.config.credentials import Credential

REGION = "owned"
ERRORS = (
    ErrorRule(code="auth_failed", error=AuthenticationError),
    ErrorRule(code="host_key", error=PermissionDeniedError),
    ErrorRule(code=("unknown_host", "free"), error=NotFoundError),
    ErrorRule(code="held", error=InsufficientCapacityError),
)


def error_fields(response: httpx.Response) -> ErrorFields:
    """The transport's error body: {"error": {"code", "message", "hint"}}."""
    body = json_body(response)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return ErrorFields()
    text = {k: str(error[k]) if error.get(k) is not None else None
            for k in ("code", "message", "hint")}
    return ErrorFields(code=text["code"], message=text["message"], hint=text["hint"],
                       text=text["message"])


_HTTP_SUFFIX = re.compile(r" \(HTTP \d+(?:, [^)]*)?\)$")


def owner() -> str:
    """Who holds an allocation: this computer's user and hostname."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no user name in this environment (no passwd entry)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


class SshProvider(Provider):
    name = "ssh"
    # No spot, no power control (the hosts stay on), no disk choice; the deadline
    # is kept on the host (the lock) and enforced by the reaper, not the host.
    capabilities = Capabilities(jobs=True, spot=False, stop_start=False, custom_disk=False,
                                needs_ssh_key=False, native_shutdown=False,
                                multi_node="batch")
    rate_limits = {}
    errors = ERRORS
    error_fields = staticmethod(error_fields)

    def __init__(self, catalog: ProviderCatalog, credential: Credential | None = None,
                 hosts: tuple[Host, ...] | None = None) -> None:
        super().__init__(catalog, credential)
        self._hosts = hosts

    @property
    def hosts(self) -> tuple[Host, ...]:
        if self._hosts is None:
            self._hosts = _settings.load()
        return self._hosts

    def map_error(self, response: httpx.Response, *,
                  rules: Sequence[ErrorRule] = ()) -> APIError:
        """As every adapter's, without the "(HTTP 503, ...)" of the message: no
        HTTP reaches a host, the status is only this adapter's own wire (kept on
        the error as status_code and provider_code)."""
        error = super().map_error(response, rules=rules)
        return error.with_details(message=_HTTP_SUFFIX.sub("", error.message))

    def host(self, name: str) -> Host | None:
        return next((h for h in self.hosts if h.name == name), None)

    def auth(self) -> httpx.Auth | None:
        return None  # each host's key is ssh's to present (the configured identity)

    def transport(self) -> httpx.BaseTransport:
        from gpucloud.providers.ssh._transport import SshTransport

        return SshTransport(self.hosts)

    def async_transport(self) -> httpx.AsyncBaseTransport:
        from gpucloud.providers.ssh._transport import SshTransport

        return SshTransport(self.hosts)

    def _path(self, name: str, action: str = "") -> str:
        return f"/hosts/{quote(name, safe='')}" + (f"/{action}" if action else "")

    # -- reading hosts ------------------------------------------------------------------

    def _instance(self, host: Host, info: dict[str, Any], state: str = "locked") -> Instance:
        # A held lock is a machine that runs (the host is on); a state this
        # version does not know is said as unknown, never guessed.
        return Instance(
            provider=self.name, id=host.name, name=info.get("name") or host.name,
            status=InstanceStatus.RUNNING if state == "locked" else InstanceStatus.UNKNOWN,
            provider_status="allocated" if state == "locked" else str(state)[:40],
            gpu=host.gpu, gpu_count=host.gpu_count, instance_type=host.name, region=REGION,
            price_per_hour=host.cost_per_hour, ip=host.host,
            created_at=parse_utc(info.get("created")), shutdown_at=parse_utc(info.get("deadline")),
            launch_id=info.get("launch_id") or None, batch=info.get("batch") or None,
            connection=ssh_endpoint(host.host, host.port, host.user))

    def _body(self, response: httpx.Response) -> dict[str, Any]:
        self.raise_for_error(response)
        body = self.json(response)
        if not isinstance(body, dict):
            raise self.invalid(response, "not an object")
        return body

    def offers(self, query: OfferQuery) -> Flow[list[Offer]]:
        if query.spot or (query.region is not None and query.region != REGION):
            return []
        wanted = [h for h in self.hosts if (query.gpu is None or h.gpu == query.gpu)
                  and (query.count is None or h.gpu_count == query.count)]
        if not wanted:
            return []
        body = self._body((yield self.request("GET", "/hosts")))
        entries = {str(h.get("name")): h for h in body.get("hosts", []) if isinstance(h, dict)}
        states = {name: entry.get("state") for name, entry in entries.items()}
        failed = [entries[h.name] for h in wanted
                  if states.get(h.name) == "unreachable"]
        if len(failed) == len(wanted):
            # Not one of them could be read: why (a refused key, a host that is
            # down) is the answer, not "no capacity".
            raise self._unreadable(failed[0])
        return [Offer(provider=self.name, instance_type=h.name, region=REGION, gpu=h.gpu,
                      gpu_count=h.gpu_count, price_per_hour=h.cost_per_hour or Decimal(0),
                      available=states.get(h.name) == "free", source="live",
                      notes=() if h.cost_per_hour is not None else (
                          f"{h.name}: no cost_per_hour in config.toml, so its cost is "
                          "unknown",))
                for h in wanted]

    def _unreadable(self, entry: dict[str, Any]) -> Exception:
        """The error of a host `GET /hosts` could not read (its own status and body)."""
        status = entry.get("status")
        response = httpx.Response(status if isinstance(status, int) and status >= 400 else 503,
                                  json={"error": entry.get("error")},
                                  request=self.request("GET", "/hosts"))
        return self.map_error(response)

    def list_instances(self) -> Flow[list[Instance]]:
        if not self.hosts:
            return []
        body = self._body((yield self.request("GET", "/hosts")))
        out = []
        for entry in body.get("hosts", []):
            host = self.host(str(entry.get("name"))) if isinstance(entry, dict) else None
            if host is None:
                continue
            if entry.get("state") == "unreachable":
                # A listing that left it out would read as "released": the ledger
                # would close a host that may still be allocated. Say so instead.
                raise self._unreadable(entry)
            if entry.get("state") == "locked":
                out.append(self._instance(host, entry.get("info") or {}))
        return out

    def get(self, instance_id: str) -> Flow[Instance]:
        host = self.host(instance_id)
        if host is None:
            raise NotFoundError(f"ssh: no host named {instance_id!r} in config.toml",
                                provider=self.name, status_code=404,
                                hint="the hosts are listed in config.toml "
                                     "[[providers.ssh.hosts]]")
        body = self._body((yield self.request("GET", self._path(host.name))))
        if body.get("state") == "free":
            raise NotFoundError(f"ssh: {host.name} is not allocated", provider=self.name,
                                status_code=404)
        return self._instance(host, body.get("info") or {}, str(body.get("state")))

    # -- allocating and releasing ---------------------------------------------------------

    def create(self, spec: InstanceSpec) -> Flow[Instance]:
        first = self.host(spec.offer.instance_type)
        candidates = [h for h in ([first] if first else []) + [
            h for h in self.hosts if h is not first and h.gpu == spec.offer.gpu
            and h.gpu_count == spec.offer.gpu_count] if h is not None]
        info = {"launch_id": spec.launch_id, "owner": owner(), "name": spec.name,
                "batch": spec.batch,
                "deadline": format_utc(spec.shutdown_at) if spec.shutdown_at else None,
                "created": format_utc(datetime.now(timezone.utc))}
        skipped: list[str] = []
        errors: list[Exception] = []
        for host in candidates:
            response = yield self.request("POST", self._path(host.name, "allocate"), json=info,
                                          kind="launch")
            if response.status_code == 409:
                held = (self.json(response) or {}).get("info") or {}
                skipped.append(f"{host.name} is held by {held.get('owner') or 'someone'}"
                               + (f" until {held['deadline']}" if held.get("deadline") else ""))
                continue
            if response.is_error:
                error = self.map_error(response)
                errors.append(error)
                skipped.append(str(error))
                continue
            body = self._body(response)
            problem = self._gpu_problem(host, str(body.get("gpus") or ""), body.get("smi_exit"))
            if problem is not None:
                # Not what config.toml says it is: give it back at once.
                yield from self._release(host, spec.launch_id)
                skipped.append(problem)
                continue
            if spec.job is not None:
                yield from self._start_job(host, spec)
            return self._instance(host, {k: v for k, v in info.items() if v is not None})
        if len(candidates) == 1 and errors:
            raise errors[0]  # one host, one reason: its own error (auth, unreachable)
        what = f"{spec.offer.gpu_count}x {spec.offer.gpu}"
        raise InsufficientCapacityError(
            f"ssh: no free host with {what}" + (f" ({'; '.join(skipped)})" if skipped else ""),
            provider=self.name, status_code=409,
            hint="`gpucloud list --provider ssh` shows who holds the hosts; wait for one to "
                 "be released, add a host to config.toml [[providers.ssh.hosts]], or rent "
                 "one (leave out --provider ssh)")

    def _gpu_problem(self, host: Host, listed: str, smi_exit: Any) -> str | None:
        """Why `nvidia-smi -L` contradicts config.toml for this host, or None."""
        from gpucloud.catalog.gpu_list import parse_list
        from gpucloud.catalog.gpus import reported_matches

        gpus = parse_list(listed)
        if smi_exit != 0 or len(gpus) < host.gpu_count:
            said = listed.strip().splitlines()[-1][:200] if listed.strip() else "nothing"
            return (f"{host.name}: nvidia-smi -L lists {len(gpus)} GPU(s), config.toml says "
                    f"{host.gpu_count}x {host.gpu} (exit {smi_exit}: {said})")
        wrong = [g.name for g in gpus if reported_matches(host.gpu, g.name) is False]
        if wrong:
            return (f"{host.name}: nvidia-smi -L lists {wrong[0]}, config.toml says "
                    f"{host.gpu}")
        return None

    def _release(self, host: Host, launch_id: str | None = None,
                 deadline: str | None = None) -> Flow[bool]:
        body = {"launch_id": launch_id, "deadline": deadline}
        response = yield self.request("POST", self._path(host.name, "release"),
                                      json={k: v for k, v in body.items() if v is not None},
                                      kind="idempotent")
        if response.status_code == 409:
            return False
        self._body(response)
        return True

    def _start_job(self, host: Host, spec: InstanceSpec) -> Flow[None]:
        assert spec.job is not None
        yield from self._run_job(host, spec.launch_id, spec.job)

    def _run_job(self, host: Host, launch_id: str, job: JobRun) -> Flow[None]:
        from gpucloud.providers import _jobscript
        from gpucloud.providers.ssh import _remote

        script = _jobscript.vm_script(job, _remote.release_end(host.dir, launch_id))
        response = yield self.request(
            "POST", self._path(host.name, "job"), kind="unsafe",
            json={"launch_id": launch_id, "script": script},
            secrets=_jobscript.secret_values(job))
        self._body(response)

    def start_node_job(self, instance: Instance, job: JobRun) -> Flow[bool]:
        """A node's job, started as a one-node job is: over this provider's own
        transport, so that releasing the host ends it too."""
        host = self.host(instance.id)
        if host is None or not instance.launch_id:
            raise NotFoundError(f"ssh: {instance.id} is not an allocation of gpucloud's",
                                provider=self.name, status_code=404)
        yield from self._run_job(host, instance.launch_id, job)
        return True

    def delete(self, instance_id: str) -> Flow[None]:
        host = self.host(instance_id)
        if host is None:
            raise NotFoundError(f"ssh: no host named {instance_id!r} in config.toml",
                                provider=self.name, status_code=404)
        yield from self._release(host)

    def delete_expired(self, instance: Instance) -> Flow[bool]:
        """Release only if the lock still holds this launch at the deadline the
        reaper read: an extend that landed since wins (the host checks both)."""
        host = self.host(instance.id)
        if host is None:
            return False
        deadline = format_utc(instance.shutdown_at) if instance.shutdown_at else None
        return (yield from self._release(host, instance.launch_id or "", deadline))

    def set_deadline(self, instance: Instance, shutdown_at: datetime) -> Flow[Instance]:
        host = self.host(instance.id)
        if host is None or not instance.launch_id:
            raise NotFoundError(f"ssh: {instance.id} is not an allocation of gpucloud's",
                                provider=self.name, status_code=404)
        response = yield self.request(
            "PUT", self._path(host.name, "deadline"), kind="idempotent",
            json={"launch_id": instance.launch_id, "deadline": format_utc(shutdown_at)})
        if response.status_code == 409:
            raise NotFoundError(f"ssh: {host.name} was released or allocated again",
                                provider=self.name, status_code=404)
        body = self._body(response)
        return self._instance(host, body.get("info") or {})

    def verify(self) -> Flow[None]:
        yield from self.list_instances()


__all__ = ["SshProvider"]
