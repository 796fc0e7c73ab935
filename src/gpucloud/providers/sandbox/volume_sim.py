"""Network volumes in the simulated cloud (SandboxCloud's collaborator for
/v1/volumes; state in the same SQLite file).

API (same conventions as server.py):

    GET    /v1/volumes          {"data": [volume]}
    POST   /v1/volumes          body {name, size_gb, region} -> 201 volume
    GET    /v1/volumes/{id}     volume
    DELETE /v1/volumes/{id}     202 volume (deleted); idempotent

    volume = {id, name, size_gb, region, price_per_gb_month ("0.07"),
              status ("available" | "in_use"), attached_to: [instance ids],
              created_at, simulated: true}

A volume is in one region and mounts only on machines there. It bills its
size at ``PRICE_PER_GB_MONTH`` from creation to deletion, whether or not a
machine is attached: the rate is simulated (nothing is charged), picked in the
range real network storage is sold at so that the estimates and the cost
ledger have something to show. ``attached_to`` lists the live machines of the
jobs that mount the volume (a job names volumes by id in its ``volumes``).

Errors: 400 ``invalid_request`` (unknown region, bad size or name), 409
``conflict`` (a live volume of that name exists), 404 ``not_found``. A delete
of a volume that a machine still uses is accepted (the machine loses it),
as the simulation's stand-in for a forced delete: gpucloud itself refuses
that unless told to (``gpucloud volumes delete --force``).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from decimal import Decimal
from typing import Any

import httpx

from gpucloud.providers.sandbox._machines import Machines
from gpucloud.providers.sandbox._wire import ApiError, iso, json_body

VOLUME_SCHEMA = """
CREATE TABLE IF NOT EXISTS volumes (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL,
    size_gb INTEGER NOT NULL, price TEXT NOT NULL, created_us INTEGER NOT NULL,
    deleted_us INTEGER
);
"""
# USD per GB per month: simulated (see the module's docstring).
PRICE_PER_GB_MONTH = Decimal("0.07")
MAX_SIZE_GB = 65536


class VolumeSimulation:
    """The /v1/volumes endpoints of ``cloud``."""

    def __init__(self, cloud: Machines, regions: tuple[str, ...]) -> None:
        self.cloud = cloud
        self.regions = regions

    def route(self, request: httpx.Request, parts: list[str]) -> tuple[int, Any]:
        method = request.method
        if len(parts) == 2:
            op = {"GET": "list", "POST": "create"}.get(method)
        elif len(parts) == 3:
            op = {"GET": "get", "DELETE": "delete"}.get(method)
        else:
            raise ApiError(404, "not_found", f"no such endpoint: {request.url.path}")
        if op is None:
            raise ApiError(405, "method_not_allowed", f"{method} not allowed on {request.url.path}")
        if op == "list":
            with self.cloud._read() as db:
                now = self.cloud._now()
                rows = db.execute("SELECT * FROM volumes WHERE deleted_us IS NULL"
                                  " ORDER BY created_us").fetchall()
                users = self._users(db, now)
                return 200, {"data": [_render(r, users) for r in rows]}
        if op == "create":
            return 201, self._create(json_body(request))
        if op == "get":
            with self.cloud._read() as db:
                return 200, _render(self._row(db, parts[2]), self._users(db, self.cloud._now()))
        return 202, self._delete(parts[2])

    def _create(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or set(body) != {"name", "size_gb", "region"}:
            raise ApiError(422, "invalid_request", "body must be {name, size_gb, region}")
        name, size, region = body["name"], body["size_gb"], body["region"]
        if not isinstance(name, str) or not name.strip() or len(name) > 128:
            raise ApiError(400, "invalid_request", "name must be 1-128 characters")
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_SIZE_GB:
            raise ApiError(400, "invalid_request", f"size_gb must be 1-{MAX_SIZE_GB}")
        if region not in self.regions:
            raise ApiError(400, "invalid_request",
                           f"unknown region {region!r}; volumes are offered in "
                           f"{', '.join(self.regions)}")
        with self.cloud._write_lock() as db:
            taken = db.execute("SELECT id FROM volumes WHERE name = ? AND deleted_us IS NULL",
                               (name,)).fetchone()
            if taken is not None:
                raise ApiError(409, "conflict", f"a volume named {name!r} exists ({taken['id']})")
            volume_id = "sbv-" + secrets.token_hex(6)
            db.execute("INSERT INTO volumes (id, name, region, size_gb, price, created_us)"
                       " VALUES (?, ?, ?, ?, ?, ?)",
                       (volume_id, name, region, size, str(PRICE_PER_GB_MONTH),
                        self.cloud._now()))
            return _render(self._row(db, volume_id), {})

    def _delete(self, volume_id: str) -> dict[str, Any]:
        with self.cloud._write_lock() as db:
            now = self.cloud._now()
            row = db.execute("SELECT * FROM volumes WHERE id = ?", (volume_id,)).fetchone()
            if row is None:
                raise ApiError(404, "not_found", f"no volume {volume_id!r}")
            if row["deleted_us"] is None:
                db.execute("UPDATE volumes SET deleted_us = ? WHERE id = ?", (now, volume_id))
            return dict(_render(row, {}), status="deleted")

    def _row(self, db: sqlite3.Connection, volume_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = db.execute(
            "SELECT * FROM volumes WHERE id = ? AND deleted_us IS NULL", (volume_id,)).fetchone()
        if row is None:
            raise ApiError(404, "not_found", f"no volume {volume_id!r}")
        return row

    def _users(self, db: sqlite3.Connection, now: int) -> dict[str, list[str]]:
        """volume id -> the live machines of the jobs that mount it."""
        users: dict[str, list[str]] = {}
        for job in db.execute("SELECT instance_id, spec FROM jobs ORDER BY rowid"):
            mounts = json.loads(job["spec"]).get("volumes") or []
            if not mounts:
                continue
            machine = db.execute("SELECT * FROM instances WHERE id = ?",
                                 (job["instance_id"],)).fetchone()
            if machine is None or self.cloud._status(machine, now) not in (
                    "pending", "running", "stopped"):
                continue
            for mount in mounts:
                users.setdefault(mount["id"], []).append(job["instance_id"])
        return users

    def check_mounts(self, db: sqlite3.Connection, mounts: Any,
                     region: str) -> list[dict[str, Any]]:
        """A job's ``volumes``: [{id, mount}], each a live volume in the job's region."""
        if mounts is None:
            return []
        if not isinstance(mounts, list) or not all(
                isinstance(m, dict) and set(m) == {"id", "mount"}
                and isinstance(m["id"], str) and isinstance(m["mount"], str)
                and m["mount"].startswith("/") for m in mounts):
            raise ApiError(422, "invalid_request",
                           "volumes must be a list of {id, mount} with an absolute mount path")
        out = []
        for mount in mounts:
            row = db.execute("SELECT * FROM volumes WHERE id = ? AND deleted_us IS NULL",
                             (mount["id"],)).fetchone()
            if row is None:
                raise ApiError(400, "invalid_request", f"no volume {mount['id']!r}")
            if row["region"] != region:
                raise ApiError(400, "invalid_request",
                               f"volume {row['name']} is in {row['region']}, the machine in "
                               f"{region}: a volume mounts only in its own region")
            out.append({"id": row["id"], "name": row["name"], "mount": mount["mount"],
                        "size_gb": row["size_gb"]})
        return out


def _render(row: sqlite3.Row, users: dict[str, list[str]]) -> dict[str, Any]:
    attached = users.get(row["id"], [])
    return {"id": row["id"], "name": row["name"], "size_gb": row["size_gb"],
            "region": row["region"], "price_per_gb_month": row["price"],
            "status": "in_use" if attached else "available", "attached_to": attached,
            "created_at": iso(row["created_us"]), "simulated": True}


__all__ = ["PRICE_PER_GB_MONTH", "VOLUME_SCHEMA", "VolumeSimulation"]
