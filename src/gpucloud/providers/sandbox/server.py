"""The sandbox: a simulated GPU cloud, served in-process through an httpx transport.

Like a payment API's test mode: no real GPUs, no real money, but a real HTTP
API whose state lives in SQLite (storage.py), so ``create`` in one process
and ``list`` / ``delete`` in the next see the same machines. Time is read
from an injectable ``clock``; states are computed from timestamps on every
read, so there are no background threads.

API (JSON; base ``https://sandbox.gpucloud.invalid``; every response carries
``X-Request-Id``; errors are ``{"error": {"code", "message"}}``):

    GET    /v1/instance-types      {"data": [{name, gpu, gpu_count, gpu_memory_gb,
                                    vcpus, memory_gb, disk_gb, price ("19.92"),
                                    regions, capacity_available: {region: n}}]}
    POST   /v1/instances           body {instance_type, region, name, labels?,
                                    image?, disk_gb?, ssh_public_key?, shutdown_at?}
                                    -> 201 instance
    GET    /v1/instances           {"data": [instance]}; ?label=key=value filters;
                                    ?limit=N (1-1000) answers a page and
                                    "next_cursor" (null on the last page), passed
                                    back as ?cursor= for the next
    GET    /v1/instances/{id}      instance
    PATCH  /v1/instances/{id}      body {shutdown_at: ISO-8601 | null} -> instance
                                    (moves the native timer, for `extend`)
    DELETE /v1/instances/{id}      202 instance (terminating); idempotent
    POST   /v1/instances/{id}/stop   instance (stopped: powered off, disk kept,
                                    not billed); idempotent
    POST   /v1/instances/{id}/start  instance (pending, then running after
                                    boot_seconds); idempotent

    instance = {id, name, status, instance_type, region, gpu, gpu_count,
                price_per_hour, image, disk_gb, ip, labels, created_at,
                shutdown_at, terminated_at, billed_seconds, cost_so_far, simulated: true}

Billing (simulated, nothing is charged): a machine bills its price per hour
from creation until it terminates, except while stopped; ``billed_seconds``
and ``cost_so_far`` (a decimal string) say how much so far. A stopped
machine keeps its capacity slot and its deadline.

Status codes: 400 ``invalid_request`` (unknown instance type or region),
422 ``invalid_request`` (malformed body), 404 ``not_found``, 405
``method_not_allowed``, 409 ``capacity_exhausted`` (nothing created), 409
``conflict`` (PATCH, stop or start on a machine that has ended; start on
one that is not stopped is a no-op, as is stop on a stopped one), 429
``rate_limited`` (with ``Retry-After: 1``), 503 ``unavailable``. Times are
ISO-8601 UTC (``Z``); a time without an offset is refused (422), not guessed.

Life cycle: pending -> running after ``boot_seconds``; DELETE makes it
terminating, then terminated after ``terminate_seconds``. ``shutdown_at`` is
the cloud's own timer: once past, the machine reads as terminated whoever
looks. Terminated machines stay listed for ``retain_seconds``, then vanish
(404). Capacity is per instance type per region and counts every machine
not yet terminated.

Knobs: knobs.py; /v1/volumes: volume_sim.py; the requests answered: request_log.py.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import httpx

from gpucloud.providers.sandbox.transport import SandboxTransport  # noqa: F401 (re-exported: tests, adapter)
from gpucloud.providers.sandbox._wire import (
    MAX_PAGE, US, ApiError, fake_ip, iso, json_body, json_reply, parse_time, validate_create,
    wanted_labels,
)
from gpucloud.providers.sandbox.job_sim import JobSimulation
from gpucloud.providers.sandbox.knobs import Knobs
from gpucloud.providers.sandbox.request_log import RequestLog
from gpucloud.providers.sandbox.volume_sim import VolumeSimulation
from gpucloud.providers.sandbox.storage import Storage, live_count, made_fewer, visible_rows

if TYPE_CHECKING:
    from gpucloud.catalog.bundled import ProviderCatalog

# A machine's row: as read (sqlite3.Row), or as read and then written (a dict).
Record = Union[sqlite3.Row, Mapping[str, Any]]


class SandboxCloud(Storage):
    """The simulated cloud: ``handle(request) -> response`` over a SQLite file."""

    def __init__(self, db_path: str | os.PathLike[str],
                 knobs: Knobs | Mapping[str, Any] | None = None,
                 *, catalog: ProviderCatalog | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.db_path = Path(db_path)
        self.knobs = knobs if isinstance(knobs, Knobs) else Knobs.load(knobs)
        if catalog is None:
            from gpucloud.catalog.bundled import load_catalogs

            catalog = load_catalogs()["sandbox"]
        self.types = {t.name: t for t in catalog.instance_types}
        self.default_image = catalog.default_image or "sandbox-ubuntu-22.04"
        self.clock = clock
        self.rng = random.Random(self.knobs.seed)
        self._lock = threading.Lock()
        self.requests = RequestLog(self.knobs.request_log)  # what tests count
        self.log = self.requests.recent  # (method, path, status) of recent requests
        self._open_storage()
        self.jobs, self.volumes = JobSimulation(self), VolumeSimulation(self, catalog.regions)

    # -- plumbing -------------------------------------------------------------

    def _now(self) -> int:
        return int(round(self.clock() * US))

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        headers = [("X-Request-Id", "req_" + secrets.token_hex(10))]
        try:
            status, body = self._route(request, path)
        except ApiError as err:
            status, body = err.status, {"error": {"code": err.code, "message": err.message}}
            headers.extend(err.headers.items())
        except sqlite3.OperationalError as exc:  # e.g. the file stayed locked for 30 s
            status, body = 503, {"error": {"code": "unavailable", "message": f"database: {exc}"}}
        self.requests.record(request.method, path, status)
        return json_reply(status, body, headers)

    def _route(self, request: httpx.Request, path: str) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        method = request.method
        if parts[:2] in (["v1", "jobs"], ["v1", "volumes"]):  # job_sim.py, volume_sim.py
            return (self.jobs if parts[1] == "jobs" else self.volumes).route(request, parts)
        if parts[:2] == ["v1", "instances"] and parts[3:] == ["exec"]:  # exec_sim.py
            # Loaded for an exec only: it reads the nvidia parser's marks, which
            # a listing never needs.
            from gpucloud.providers.sandbox.exec_sim import exec_route

            return exec_route(self, request, parts[2])
        if (parts[:1] != ["v1"] or len(parts) not in (2, 3, 4)
                or parts[1] not in ("instance-types", "instances")
                or (parts[1] == "instance-types" and len(parts) > 2)
                or (len(parts) == 4 and parts[3] not in ("stop", "start"))):
            raise ApiError(404, "not_found", f"no such endpoint: {path}")
        table: dict[str, str]
        if parts[1] == "instance-types":
            table = {"GET": "types"}
        elif len(parts) == 2:
            table = {"GET": "list", "POST": "create"}
        elif len(parts) == 4:  # stop/start change the machine like a PATCH does
            table = {"POST": "update"}
        else:
            table = {"GET": "get", "PATCH": "update", "DELETE": "delete"}
        op = table.get(method)
        if op is None:
            raise ApiError(405, "method_not_allowed", f"{method} not allowed on {path}")
        if op == "list" and "cursor" in request.url.params:
            op = "list_more"  # FAIL_ON=list_more breaks a listing off part way
        ambiguous = self._roll_failure(op)
        if op == "types":
            return 200, {"data": self._types()}
        if op in ("list", "list_more"):
            params = request.url.params
            if "limit" not in params and "cursor" not in params:
                return 200, {"data": self._list(params.get_list("label"))}
            data, following = self._page(params.get_list("label"), params.get("limit"),
                                         params.get("cursor"))
            return 200, {"data": data, "next_cursor": following}
        if op == "create":
            created = self._create(json_body(request))
            if self.knobs.hang_after_create:
                time.sleep(self.knobs.hang_after_create)  # committed, not yet answered
            if ambiguous:
                raise ApiError(503, "unavailable", "the service is temporarily unavailable")
            return 201, created
        if op == "get":
            return 200, self._get(parts[2])
        if op == "update" and len(parts) == 4:
            return 200, self._power(parts[2], parts[3])
        if op == "update":
            return 200, self._update(parts[2], json_body(request))
        return 202, self._delete(parts[2])

    def _roll_failure(self, op: str) -> bool:
        """Raise an injected 429/503; True when a create must fail *after* recording."""
        if not self.knobs.injects(op):
            return False
        with self._lock:
            roll = self.rng.random()
        return self.knobs.failure(op, roll)

    # -- state ------------------------------------------------------------------

    def _ended(self, row: Record, now: int) -> int | None:
        """When the machine became terminated, or None while it is not."""
        timer = row["shutdown_us"] if self.knobs.native_timer else None
        ends = [t for t in (row["terminated_us"], timer) if t is not None and t <= now]
        return min(ends) if ends else None

    def _status(self, row: Record, now: int) -> str:
        if self._ended(row, now) is not None:
            return "terminated"
        if row["deleted_us"] is not None:
            return "terminating"
        if row["stopped_us"] is not None:
            return "stopped"
        return "running" if now >= row["ready_us"] else "pending"

    def _billed_us(self, row: Record, now: int) -> int:
        """Time billed so far: from creation to the end, less the time stopped."""
        ended = self._ended(row, now)
        until = ended if ended is not None else now
        stopped = row["stopped_total_us"] or 0
        if row["stopped_us"] is not None:
            stopped += max(0, until - row["stopped_us"])
        return max(0, until - row["created_us"] - stopped)

    def _visible(self, row: Record, now: int) -> bool:
        ended = self._ended(row, now)
        return ended is None or now < ended + int(self.knobs.retain_seconds * US)

    def _render(self, row: Record, now: int) -> dict[str, Any]:
        status = self._status(row, now)
        ended = self._ended(row, now)
        billed = self._billed_us(row, now)
        return {
            "id": row["id"], "name": row["name"], "status": status,
            "instance_type": row["instance_type"], "region": row["region"],
            "gpu": row["gpu"], "gpu_count": row["gpu_count"], "price_per_hour": row["price"],
            "image": row["image"], "disk_gb": row["disk_gb"],
            "ip": fake_ip(row["id"]) if status in ("running", "terminating") else None,
            "labels": json.loads(row["labels"]),
            "created_at": iso(row["created_us"]), "shutdown_at": iso(row["shutdown_us"]),
            "terminated_at": iso(ended if ended is not None else row["terminated_us"]),
            "billed_seconds": billed // US,
            "cost_so_far": str((Decimal(row["price"]) * billed
                                / (3600 * US)).quantize(Decimal("0.0001"))),
            "simulated": True,
        }

    def _capacity_left(self, db: sqlite3.Connection, type_name: str, region: str, now: int,
                       one: bool = False) -> int:
        """``one``: whether one more fits is all that is asked (storage.made_fewer)."""
        if "all" in self.knobs.exhaust or type_name in self.knobs.exhaust:
            return 0
        if one and made_fewer(db, self.knobs.capacity):
            return 1
        used = live_count(db, type_name, region, now, self.knobs.native_timer)
        return max(0, self.knobs.capacity - used)

    def _types(self) -> list[dict[str, Any]]:
        now = self._now()
        with self._read() as db:
            return [{
                "name": t.name, "gpu": t.gpu, "gpu_count": t.gpu_count,
                "gpu_memory_gb": t.gpu_memory_gb, "vcpus": t.vcpus, "memory_gb": t.memory_gb,
                "disk_gb": t.disk_gb, "price": str(t.price), "regions": list(t.regions),
                "capacity_available": {r: self._capacity_left(db, t.name, r, now)
                                       for r in t.regions},
            } for t in self.types.values() if t.price is not None]

    def _list(self, label_filters: list[str]) -> list[dict[str, Any]]:
        wanted = wanted_labels(label_filters)
        now = self._now()
        with self._read() as db:
            rows = visible_rows(db, now - int(self.knobs.retain_seconds * US),
                                self.knobs.native_timer)
        out = []
        for row in rows:
            labels = json.loads(row["labels"])
            if self._visible(row, now) and all(labels.get(k) == v for k, v in wanted):
                out.append(self._render(row, now))
        return out

    def _page(self, label_filters: list[str], limit: str | None,
              cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the listing: up to `limit` machines after `cursor` (a
        rowid), and the cursor of the next page (None: this was the last). A
        page the label filters empty still carries the cursor on."""
        wanted = wanted_labels(label_filters)
        if limit is None or not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE:
            raise ApiError(400, "invalid_request", f"limit must be 1-{MAX_PAGE}, got {limit!r}")
        if cursor is not None and not cursor.isdigit():
            raise ApiError(400, "invalid_request", f"bad cursor {cursor!r}")
        size, now = int(limit), self._now()
        rows = self._page_rows(int(cursor or 0), size,
                               now - int(self.knobs.retain_seconds * US), self.knobs.native_timer)
        out = []
        for row in rows:
            labels = json.loads(row["labels"])
            if self._visible(row, now) and all(labels.get(k) == v for k, v in wanted):
                out.append(self._render(row, now))
        return out, str(rows[-1]["page_seq"]) if len(rows) == size else None

    def _row(self, db: sqlite3.Connection, instance_id: str, now: int) -> sqlite3.Row:
        row = db.execute("SELECT * FROM instances WHERE id = ?", (instance_id,)).fetchone()
        if row is None or not self._visible(row, now):
            raise ApiError(404, "not_found", f"no instance {instance_id!r}")
        return row

    def _get(self, instance_id: str) -> dict[str, Any]:
        now = self._now()
        with self._read() as db:
            return self._render(self._row(db, instance_id, now), now)

    def _create(self, body: Any) -> dict[str, Any]:
        spec = validate_create(body)
        with self._write_lock() as db:  # taken before counting capacity
            now = self._now()
            instance_id = self._insert(db, spec, now)
            return self._render(self._row(db, instance_id, now), now)

    def _insert(self, db: sqlite3.Connection, spec: dict[str, Any], now: int) -> str:
        """A new machine (the write lock held), or 409 when its type is full."""
        itype = self.types.get(spec["instance_type"])
        if itype is None or itype.price is None:
            raise ApiError(400, "invalid_request",
                           f"unknown instance type {spec['instance_type']!r}; "
                           f"known: {', '.join(sorted(self.types))}")
        if spec["region"] not in itype.regions:
            raise ApiError(400, "invalid_request",
                           f"{itype.name} is not offered in region {spec['region']!r}; "
                           f"it is in {', '.join(itype.regions)}")
        if self._capacity_left(db, itype.name, spec["region"], now, one=True) <= 0:
            raise ApiError(409, "capacity_exhausted",
                           f"no capacity for {itype.name} in {spec['region']}")
        instance_id = "sbx-" + secrets.token_hex(6)
        db.execute(
            "INSERT INTO instances (id, name, instance_type, region, gpu, gpu_count, price,"
            " image, disk_gb, ssh_public_key, labels, created_us, ready_us, shutdown_us)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (instance_id, spec["name"], itype.name, spec["region"], itype.gpu,
             itype.gpu_count, str(itype.price), spec.get("image") or self.default_image,
             spec.get("disk_gb") or itype.disk_gb, spec.get("ssh_public_key"),
             json.dumps(spec.get("labels") or {}, sort_keys=True), now,
             now + int(self.knobs.boot_seconds * US), self._kept(spec.get("shutdown_us"))))
        return instance_id

    def _update(self, instance_id: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or set(body) != {"shutdown_at"}:
            raise ApiError(422, "invalid_request",
                           'body must be {"shutdown_at": ISO-8601 | null}')
        shutdown_us = None if body["shutdown_at"] is None else parse_time(body["shutdown_at"])
        return self._write(instance_id, "shutdown_us", self._kept(shutdown_us))

    def _kept(self, shutdown_us: int | None) -> int | None:
        """A deadline as the cloud keeps it: cut to the whole second under the
        WHOLE_SECONDS knob, as real clouds keep deadlines as text to the second."""
        if shutdown_us is None or not self.knobs.whole_seconds:
            return shutdown_us
        return shutdown_us - shutdown_us % US

    def _power(self, instance_id: str, action: str) -> dict[str, Any]:
        """stop: powered off, not billed; start: boots again. Repeating either is a no-op."""
        with self._write_lock() as db:
            now = self._now()
            row = self._row(db, instance_id, now)
            status = self._status(row, now)
            if status in ("terminating", "terminated"):
                raise ApiError(409, "conflict", f"instance {instance_id} is {status}")
            if action == "stop" and status != "stopped":
                db.execute("UPDATE instances SET stopped_us = ? WHERE id = ?", (now, instance_id))
            elif action == "start" and status == "stopped":
                db.execute(
                    "UPDATE instances SET stopped_total_us = stopped_total_us + ?,"
                    " stopped_us = NULL, ready_us = ? WHERE id = ?",
                    (now - row["stopped_us"], now + int(self.knobs.boot_seconds * US),
                     instance_id))
            return self._render(self._row(db, instance_id, now), now)

    def _delete(self, instance_id: str) -> dict[str, Any]:
        return self._write(instance_id, "deleted_us", None)

    def _write(self, instance_id: str, column: str, value: int | None) -> dict[str, Any]:
        with self._write_lock() as db:
            now = self._now()
            row = self._row(db, instance_id, now)
            live = self._status(row, now) in ("pending", "running", "stopped")
            # The answer is rendered from the row read and what was written: the
            # same machine a second read would return, one query fewer.
            written: dict[str, int | None] = {}
            if column == "deleted_us":
                if live:  # deleting twice (or a terminated machine) changes nothing
                    written = {"deleted_us": now,
                               "terminated_us": now + int(self.knobs.terminate_seconds * US)}
                    db.execute("UPDATE instances SET deleted_us = ?, terminated_us = ?"
                               " WHERE id = ?", (now, written["terminated_us"], instance_id))
            elif not live:
                raise ApiError(409, "conflict",
                               f"instance {instance_id} is {self._status(row, now)}")
            else:
                written = {column: value}
                db.execute(f"UPDATE instances SET {column} = ? WHERE id = ?", (value, instance_id))
            return self._render({**dict(row), **written}, now)
