"""Jobs in the simulated cloud: a container that runs on its own machine and
ends with it (SandboxCloud's collaborator for /v1/jobs; state in the same
SQLite file).

API (same conventions as server.py):

    POST   /v1/jobs             body {instance_type, region, name, labels?, image,
                                 command?, args?, env?, secret_env?,
                                 max_runtime_seconds?, retries?, checkpoint_dir?,
                                 checkpoint_url?, disk_gb?, shutdown_at?, nodes?,
                                 interconnect?, volumes?: [{id, mount}]} -> 201 job
    GET    /v1/jobs             {"data": [job]}
    GET    /v1/jobs/{id}        job
    DELETE /v1/jobs/{id}        202 job (cancelled; its machine terminating); idempotent
    GET    /v1/jobs/{id}/logs   {"lines": [...]}; ?tail=N for the last N

    job = {id, name, status (queued|running|succeeded|failed|cancelled),
           exit_code, message, attempts, labels, created_at, started_at,
           finished_at, shutdown_at, instance, nodes, instances}

The outcome is decided by dice when the job is created (seeded by SEED), and
the status computed from timestamps on every read, like a machine's:

* the machine boots (BOOT_SECONDS: queued), the job runs JOB_SECONDS
  (running), then exits 0 (succeeded); with probability JOB_FAIL it exits 1
  half-way (failed); with probability JOB_PREEMPT the machine is reclaimed
  part-way, like a spot machine (failed, "preempted", no exit code);
* a failed or preempted run is run again, up to ``retries`` times, on a fresh
  machine (another boot); a rerun resumes from the last checkpoint in
  CHECKPOINT_DIR when the job has one, so it only has the rest to do;
* ``max_runtime_seconds`` ends the job (failed, "max_runtime exceeded"), as
  does the machine's deadline (``shutdown_at``) when NATIVE_TIMER is on;
* the machine ends with the job: it bills until the job's end, never after.

A job of ``nodes`` N > 1 is placed by the cloud itself, all or nothing: N
machines of the type in the one region (409 when they do not all fit), rank
0..N-1, each with its own private address (``private_ip``), and each node
given the rendezvous env of providers/rendezvous.py (the same MASTER_ADDR,
its own NODE_RANK), which its log lines show. ``instance`` is node 0's
machine, ``instances`` every node's in rank order. The nodes run as one: with
probability JOB_NODE_FAIL a run loses one node part-way, and the WHOLE run
fails on every node (retried whole per ``retries``, from the checkpoint); a
cancel, max_runtime or the deadline ends every node; no node outlives the job.

A job's ``volumes`` (volume_sim.py) must be in its machine's region; the
logs show each mount, and the volume lists the job's machine while it lives.

Secret values (``secret_env``) are used and never stored: only their names are
kept, and the logs show the names only.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from typing import Any

import httpx

from gpucloud.providers.rendezvous import node_env
from gpucloud.providers.sandbox._wire import (
    US, ApiError, fake_private_ip, iso, json_body, validate_create,
)
from gpucloud.providers.sandbox._machines import Machines
from gpucloud.providers.sandbox.knobs import Knobs

JOB_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, instance_id TEXT NOT NULL, spec TEXT NOT NULL,
    runs TEXT NOT NULL, created_us INTEGER NOT NULL, cancelled_us INTEGER
);
"""
JOB_FIELDS = {"image", "command", "args", "env", "secret_env", "max_runtime_seconds", "retries",
              "checkpoint_dir", "checkpoint_url", "nodes", "interconnect", "volumes"}
MAX_NODES = 64
STEPS = 10  # progress lines per run


class JobSimulation:
    """The /v1/jobs endpoints; a job's machine is one of ``cloud``'s."""

    def __init__(self, cloud: Machines) -> None:
        self.cloud = cloud

    @property
    def knobs(self) -> Knobs:
        return self.cloud.knobs

    def route(self, request: httpx.Request, parts: list[str]) -> tuple[int, Any]:
        method = request.method
        if len(parts) == 2:
            op = {"GET": "list", "POST": "create"}.get(method)
        elif len(parts) == 3:
            op = {"GET": "get", "DELETE": "delete"}.get(method)
        elif len(parts) == 4 and parts[3] == "logs":
            op = "get" if method == "GET" else None
        else:
            raise ApiError(404, "not_found", f"no such endpoint: {request.url.path}")
        if op is None:
            raise ApiError(405, "method_not_allowed", f"{method} not allowed on {request.url.path}")
        ambiguous = self.cloud._roll_failure(op)
        if op == "create":
            created = self._create_job(json_body(request))
            if ambiguous:
                raise ApiError(503, "unavailable", "the service is temporarily unavailable")
            return 201, created
        if op == "list":
            return 200, {"data": self._list_jobs()}
        if op == "delete":
            return 202, self._cancel_job(parts[2])
        if len(parts) == 4:
            return 200, {"lines": self._job_logs(parts[2], request.url.params.get("tail"))}
        return 200, self._get_job(parts[2])

    # -- create ----------------------------------------------------------------

    def _create_job(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(422, "invalid_request", "the body must be a JSON object")
        job = {k: body[k] for k in JOB_FIELDS if k in body}
        machine = validate_create({k: v for k, v in body.items() if k not in JOB_FIELDS})
        spec = _validate_job(job)
        with self.cloud._write_lock() as db:  # all nodes or none: a 409 rolls back
            now = self.cloud._now()
            spec["volumes"] = self.cloud.volumes.check_mounts(
                db, job.get("volumes"), machine["region"])
            ids = [self.cloud._insert(db, dict(machine, name=_node_name(machine["name"], rank)),
                                      now) for rank in range(spec["nodes"])]
            instance_id = ids[0]
            if spec["nodes"] > 1:
                # The cloud places the nodes, so it gives each the rendezvous env.
                spec["node_ids"] = ids
                spec["node_addrs"] = [fake_private_ip(i) for i in ids]
                spec["gpus_per_node"] = self.cloud._row(db, instance_id, now)["gpu_count"]
            runs = self._dice(spec, now + int(self.knobs.boot_seconds * US))
            end = runs[-1]["end_us"]
            if spec["max_runtime_seconds"]:
                end = min(end, now + spec["max_runtime_seconds"] * US)
            # Every machine ends with the job: it bills until then, never after.
            db.executemany("UPDATE instances SET terminated_us = ? WHERE id = ?",
                           [(end, i) for i in ids])
            job_id = "sbj-" + secrets.token_hex(6)
            db.execute("INSERT INTO jobs (id, instance_id, spec, runs, created_us)"
                       " VALUES (?, ?, ?, ?, ?)",
                       (job_id, instance_id, json.dumps(spec), json.dumps(runs), now))
            return self._render_job(db, self._job_row(db, job_id), now)

    def _dice(self, spec: dict[str, Any], start: int) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = []
        left = int(self.knobs.job_seconds * US)  # work still to do
        for _ in range(spec["retries"] + 1):
            with self.cloud._lock:
                r, part = self.cloud.rng.random(), 0.3 + 0.4 * self.cloud.rng.random()
            lost = None
            if r < self.knobs.job_preempt:
                done, outcome, code = int(left * part), "preempted", None
            elif r < self.knobs.job_preempt + self.knobs.job_fail:
                done, outcome, code = left // 2, "failed", 1
            else:
                done, outcome, code = left, "succeeded", 0
            if spec["nodes"] > 1:  # its own die: one-node jobs keep their dice as they were
                with self.cloud._lock:
                    n, rank = self.cloud.rng.random(), self.cloud.rng.randrange(spec["nodes"])
                if n < self.knobs.job_node_fail and outcome == "succeeded":
                    done, outcome, code, lost = int(left * part), "node_lost", None, rank
            runs.append({"start_us": start, "end_us": start + done, "outcome": outcome,
                         "exit_code": code, "work_us": left,
                         **({"lost_rank": lost} if lost is not None else {})})
            if outcome == "succeeded":
                break
            if spec["checkpoint_dir"] and outcome in ("preempted", "node_lost"):
                left -= done  # resumes from its checkpoint: only the rest is left
            start += done + int(self.knobs.boot_seconds * US)  # a fresh machine boots
        return runs

    # -- reads -------------------------------------------------------------------

    def _job_row(self, db: sqlite3.Connection, job_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = db.execute("SELECT * FROM jobs WHERE id = ?",
                                             (job_id,)).fetchone()
        if row is None:
            raise ApiError(404, "not_found", f"no job {job_id!r}")
        return row

    def _list_jobs(self) -> list[dict[str, Any]]:
        with self.cloud._read() as db:
            now = self.cloud._now()
            rows = db.execute("SELECT * FROM jobs ORDER BY rowid").fetchall()
            out = []
            for row in rows:
                try:
                    out.append(self._render_job(db, row, now))
                except ApiError:  # its machine was forgotten (RETAIN_SECONDS): so is the job
                    continue
            return out

    def _get_job(self, job_id: str) -> dict[str, Any]:
        with self.cloud._read() as db:
            return self._render_job(db, self._job_row(db, job_id), self.cloud._now())

    def _cancel_job(self, job_id: str) -> dict[str, Any]:
        with self.cloud._write_lock() as db:
            now = self.cloud._now()
            row = self._job_row(db, job_id)
            if self._state(db, row, now)[0] in ("queued", "running"):
                db.execute("UPDATE jobs SET cancelled_us = ? WHERE id = ?", (now, job_id))
                ends = now + int(self.knobs.terminate_seconds * US)
                db.executemany(
                    "UPDATE instances SET deleted_us = ?, terminated_us = ? WHERE id = ?",
                    [(now, ends, i) for i in _node_ids(row)])  # every node ends
            return self._render_job(db, self._job_row(db, job_id), now)

    def _limit(self, db: sqlite3.Connection, row: sqlite3.Row) -> tuple[int | None, str]:
        """When the job is cut short, and why (max_runtime, or the machine's deadline)."""
        spec = json.loads(row["spec"])
        limits = []
        if spec["max_runtime_seconds"]:
            limits.append((row["created_us"] + spec["max_runtime_seconds"] * US,
                           f"max_runtime exceeded ({spec['max_runtime_seconds']} s)"))
        machine = db.execute("SELECT shutdown_us FROM instances WHERE id = ?",
                             (row["instance_id"],)).fetchone()
        if self.knobs.native_timer and machine is not None and machine["shutdown_us"] is not None:
            limits.append((machine["shutdown_us"], "the machine reached its deadline"))
        return min(limits) if limits else (None, "")

    def _state(self, db: sqlite3.Connection, row: sqlite3.Row, now: int
               ) -> tuple[str, int | None, str | None, int, list[dict[str, Any]]]:
        """(status, exit code, message, attempts so far, runs as far as now)."""
        runs = json.loads(row["runs"])
        limit, why = self._limit(db, row)
        stop = min(t for t in (now, limit, row["cancelled_us"]) if t is not None)
        seen = [dict(r, end_us=min(r["end_us"], stop)) for r in runs if r["start_us"] < stop]
        if row["cancelled_us"] is not None and row["cancelled_us"] <= now \
                and (limit is None or row["cancelled_us"] < limit) \
                and row["cancelled_us"] < runs[-1]["end_us"]:
            return "cancelled", None, "cancelled by the user", len(seen), seen
        if limit is not None and limit <= now and limit < runs[-1]["end_us"]:
            return "failed", None, why, len(seen), seen
        if not seen:
            return "queued", None, "the machine is booting", 0, seen
        last = runs[len(seen) - 1]
        if now < last["end_us"]:
            return "running", None, None, len(seen), seen
        if last is runs[-1]:
            if last["outcome"] == "succeeded":
                return "succeeded", 0, None, len(seen), seen
            if last["outcome"] == "preempted":
                return "failed", None, "preempted: the machine was reclaimed (simulated)", \
                    len(seen), seen
            if last["outcome"] == "node_lost":
                return "failed", None, _lost(last, len(_node_ids(row))), len(seen), seen
            return "failed", last["exit_code"], f"exited with code {last['exit_code']}", \
                len(seen), seen
        nodes = len(_node_ids(row))
        outcome = "lost a node" if last["outcome"] == "node_lost" else last["outcome"]
        fresh = f"all {nodes} nodes on new machines" if nodes > 1 else "on a new machine"
        return "queued", None, f"run {len(seen)} {outcome}; retrying {fresh}", len(seen), seen

    def _render_job(self, db: sqlite3.Connection, row: sqlite3.Row, now: int) -> dict[str, Any]:
        status, code, message, attempts, seen = self._state(db, row, now)
        spec = json.loads(row["spec"])
        nodes = []
        for rank, node_id in enumerate(spec.get("node_ids") or ()):
            rendered = self.cloud._render(self.cloud._row(db, node_id, now), now)
            rendered["private_ip"] = spec["node_addrs"][rank]
            nodes.append(rendered)
        instance = nodes[0] if nodes else self.cloud._render(
            self.cloud._row(db, row["instance_id"], now), now)
        ended = status in ("succeeded", "failed", "cancelled")
        return {
            "id": row["id"], "name": instance["name"], "status": status, "exit_code": code,
            "message": message, "attempts": attempts, "retries": spec["retries"],
            "labels": instance["labels"], "image": spec["image"],
            "created_at": iso(row["created_us"]),
            "started_at": iso(seen[0]["start_us"]) if seen else None,
            "finished_at": iso(seen[-1]["end_us"] if seen else now) if ended else None,
            "shutdown_at": instance["shutdown_at"], "instance": instance,
            "nodes": spec.get("nodes", 1), "instances": nodes, "simulated": True,
        }

    def _job_logs(self, job_id: str, tail: str | None) -> list[str]:
        with self.cloud._read() as db:
            now = self.cloud._now()
            row = self._job_row(db, job_id)
            status, code, message, _, seen = self._state(db, row, now)
        spec = json.loads(row["spec"])
        lines = _log_lines(spec, json.loads(row["runs"]), seen, status, code, message)
        if tail is not None:
            try:
                count = int(tail)
            except ValueError:
                raise ApiError(422, "invalid_request", "tail must be an integer") from None
            lines = lines[-count:] if count > 0 else []
        return lines


def _validate_job(job: dict[str, Any]) -> dict[str, Any]:
    def bad(message: str) -> ApiError:
        return ApiError(422, "invalid_request", message)

    if not isinstance(job.get("image"), str) or not job["image"]:
        raise bad("image is required for a job")
    for key in ("command", "args"):
        value = job.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(f"{key} must be a list of strings")
    for key in ("env", "secret_env"):
        value = job.get(key) or {}
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise bad(f"{key} must be an object of strings")
    for key in ("max_runtime_seconds", "retries"):
        value = job.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 0):
            raise bad(f"{key} must be a non-negative integer")
    nodes = job.get("nodes", 1)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NODES:
        raise bad(f"nodes must be an integer from 1 to {MAX_NODES}")
    if job.get("interconnect", "any") not in ("any", "infiniband"):
        raise bad("interconnect must be any or infiniband")
    return {
        "image": job["image"], "command": job.get("command") or [], "args": job.get("args") or [],
        "env": job.get("env") or {},
        "secret_names": sorted(job.get("secret_env") or {}),  # the values are never kept
        "max_runtime_seconds": job.get("max_runtime_seconds"), "retries": job.get("retries") or 0,
        "checkpoint_dir": job.get("checkpoint_dir"), "checkpoint_url": job.get("checkpoint_url"),
        "nodes": nodes, "interconnect": job.get("interconnect", "any"),
    }


def _node_name(name: str, rank: int) -> str:
    return name if rank == 0 else f"{name}-node{rank}"


def _node_ids(row: sqlite3.Row) -> list[str]:
    """Every node's machine, rank order (a one-node job's one machine)."""
    return list(json.loads(row["spec"]).get("node_ids") or [row["instance_id"]])


def _lost(run: dict[str, Any], nodes: int) -> str:
    return (f"node {run['lost_rank']} of {nodes} was lost (simulated): the whole job was "
            "stopped on every node")


def _log_lines(spec: dict[str, Any], runs: list[dict[str, Any]], seen: list[dict[str, Any]],
               status: str, code: int | None, message: str | None) -> list[str]:
    ckpt = spec["checkpoint_dir"]
    env = dict(spec["env"], **({"CHECKPOINT_DIR": ckpt} if ckpt else {}))
    out = []
    for index, run in enumerate(seen):
        at = run["start_us"]
        secrets_set = (f"; secrets set: {', '.join(spec['secret_names'])} (values not shown)"
                       if spec["secret_names"] else "")
        addrs = spec.get("node_addrs") or []
        out.append(f"{iso(at)} [run {index + 1}/{spec['retries'] + 1}] pulled {spec['image']}"
                   f"{f' on {len(addrs)} nodes' if addrs else ''}; "
                   f"running: {' '.join(spec['command'] + spec['args']) or '(entrypoint)'}")
        for volume in spec.get("volumes") or []:
            out.append(f"{iso(at)} mounted volume {volume['name']} ({volume['id']}, "
                       f"{volume['size_gb']} GB) at {volume['mount']}")
        if not addrs:
            out.append(f"{iso(at)} env: {' '.join(f'{k}={v}' for k, v in sorted(env.items()))}"
                       + secrets_set)
        for rank in range(len(addrs)):  # each node's own env: its rank, the one master
            mine = dict(env, **node_env(rank, addrs, spec["gpus_per_node"]))
            out.append(f"{iso(at)} [node {rank}/{len(addrs)} {addrs[rank]}] env: "
                       f"{' '.join(f'{k}={v}' for k, v in sorted(mine.items()))}{secrets_set}")
        total = run["work_us"]
        done_before = runs[0]["work_us"] - total
        first = done_before * STEPS // runs[0]["work_us"] if runs[0]["work_us"] else 0
        if ckpt and index and first:
            out.append(f"{iso(at)} resuming from {ckpt}/step-{first:03d}")
        elif ckpt:
            out.append(f"{iso(at)} no checkpoint in {ckpt}: starting from step 0")
        span = runs[0]["work_us"] // STEPS or 1
        for step in range(first + 1, STEPS + 1):
            t = at + (step - first) * span
            if t > run["end_us"]:
                break
            out.append(f"{iso(t)} step {step}/{STEPS} loss {2.0 / step:.3f}")
            if ckpt:
                where = f" (synced to {spec['checkpoint_url']})" if spec["checkpoint_url"] else ""
                out.append(f"{iso(t)} saved {ckpt}/step-{step:03d}{where}")
        original = runs[index]
        if run["end_us"] < original["end_us"]:
            continue  # still running, or cut short: said below
        if original["outcome"] == "preempted":
            out.append(f"{iso(run['end_us'])} preempted: the machine was reclaimed (simulated)")
        elif original["outcome"] == "node_lost":
            out.append(f"{iso(run['end_us'])} {_lost(original, len(addrs))}")
        else:
            out.append(f"{iso(run['end_us'])} exited with code {original['exit_code']}")
    if status in ("cancelled", "failed") and message and not out[-1:] == [message]:
        if status == "cancelled" or "exceeded" in message or "deadline" in message:
            out.append(f"{status}: {message}")
    return out
