"""The training-task queue on Redis Streams with a consumer group.

A task is a portable JobSpec plus parameters. Keys, for queue NAME (the
braces are a Redis Cluster hash tag: one queue's keys share a slot):

  gq:{NAME}:tasks      stream, consumer group "workers": one entry per delivery
  gq:{NAME}:task:{ID}  hash: spec, params, state, attempts, retries, worker, ...
  gq:{NAME}:log:{ID}   stream of log lines (capped)
  gq:{NAME}:dead       stream: task_id, error, log_tail (the dead letters)
  gq:{NAME}:workers    hash: worker id -> last heartbeat (epoch s)
  gq:{NAME}:ids        sorted set: every task id by submit time (for status)
  gq:{NAME}:delayed    sorted set: retries waiting for their backoff (by not_before)

Delivery is at-least-once: an entry stays in the group's pending list until
the worker settles it; a worker that stops heart-beating for the visibility
timeout loses it to the next claimer (XAUTOCLAIM).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any, Optional, Union

from urllib.parse import urlsplit

from gpucloud.errors import SpecError
from gpucloud.jobs.spec import JobSpec, from_any
from gpucloud.transport.redaction import redact_url
from gpucloud.queue import _scripts
from gpucloud.queue.models import STATES, Claim, DeadTask, LogLine, QueueStatus, TaskInfo
from gpucloud.queue.names import check_queue_name
from gpucloud.queue.params import apply_params, check_values
from gpucloud.queue.records import task_info, unknown_task, when
from gpucloud.queue.redis_errors import redis_errors

GROUP = "workers"
LOG_MAXLEN = 10_000
LOG_TAIL = 50
LOG_BATCH_READ = 1000  # log lines per read while following


class Queue:
    """A named task queue. `url` None: the embedded server under GPUCLOUD_HOME."""

    def __init__(self, url: Optional[str] = None, name: str = "default", *,
                 visibility_timeout: float = 60.0, backoff_base: float = 5.0,
                 backoff_max: float = 600.0) -> None:
        check_queue_name(name)
        if visibility_timeout <= 0 or backoff_base < 0 or backoff_max < 0:
            raise SpecError("visibility_timeout must be > 0 and backoffs >= 0")
        self.name = name
        self.visibility_timeout = float(visibility_timeout)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self._server: Any = None
        if url is None:
            from gpucloud.queue.embedded import EmbeddedServer

            self._server = EmbeddedServer()
            url = self._server.url
        self.url = url
        self._password = urlsplit(url).password if "://" in url else None
        self._reconnecting = threading.Lock()
        self._connect(url)
        self._k = f"gq:{{{name}}}"
        self._ensure_group()

    def _connect(self, url: str) -> None:
        import redis

        try:
            # Any: redis-py's types cannot say that decode_responses gives str.
            self._r: Any = redis.Redis.from_url(url, decode_responses=True)
        except ValueError as exc:
            raise SpecError(f"not a Redis URL: {self.safe_url}",
                            hint="redis://[:password@]host:port/db, rediss://... (TLS) "
                                 "or unix:///path/to/socket") from exc
        self._scripts = {n: self._r.register_script(getattr(_scripts, n))
                         for n in ("CLAIM", "HEARTBEAT", "SETTLE", "CANCEL",
                                   "REQUEUE")}

    def reconnect(self) -> bool:
        """Reach the server again after a lost connection; True when it answers.

        redis-py opens a fresh connection to a URL's server by itself at the
        next command, so only the embedded server needs more: each start of it
        makes a new unix socket, so a restarted one is found again through its
        registry, or started if none runs (the start-or-attach every gpucloud
        process does). Safe from several threads at once."""
        import redis

        from gpucloud.errors import GpuCloudError

        with self._reconnecting:
            try:
                self._r.ping()
                return True
            except redis.RedisError:
                pass
            if self._server is None:
                return False
            from gpucloud.queue.embedded import EmbeddedServer

            try:
                server = EmbeddedServer(self._server.path)
            except (GpuCloudError, redis.RedisError):
                return False  # still down, or still loading: the caller waits and asks again
            self._server = server  # the old one holds nothing: dropping it is enough
            self.url = server.url
            self._connect(server.url)
            return True

    # -- plumbing -----------------------------------------------------------------

    @property
    def safe_url(self) -> str:
        return redact_url(self.url) or ""

    def _scrub(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    def __repr__(self) -> str:
        return f"Queue({self.safe_url!r}, name={self.name!r})"

    def _key(self, *parts: str) -> str:
        return ":".join((self._k, *parts))

    @redis_errors
    def _ensure_group(self) -> None:
        import redis

        try:
            self._r.xgroup_create(self._key("tasks"), GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def close(self) -> None:
        self._r.close()
        if self._server is not None:
            self._server.close()
            self._server = None

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- producer side ------------------------------------------------------------

    @redis_errors
    def submit(self, spec: Union[JobSpec, str, Path, dict[str, Any]],
               params: Optional[list[dict[str, str]]] = None) -> list[str]:
        """Enqueue one task per parameter set (one task without params); the task ids."""
        job = from_any(spec)
        sets = params if params else [{}]
        for one in sets:
            check_values(one)
        now = time.time()
        ids = []
        pipe = self._r.pipeline(transaction=True)
        for one in sets:
            task_id = f"{job.name}-{secrets.token_hex(4)}"
            pipe.hset(self._key("task", task_id), mapping={
                "spec": apply_params(job, one).model_dump_json(), "params": json.dumps(one),
                "state": "pending", "attempts": 0, "retries": job.retries,
                "submitted_at": now, "worker": ""})
            pipe.zadd(self._key("ids"), {task_id: now})
            pipe.xadd(self._key("tasks"), {"task_id": task_id})
            ids.append(task_id)
        pipe.execute()
        return ids

    @redis_errors
    def task(self, task_id: str) -> TaskInfo:
        data = self._r.hgetall(self._key("task", task_id))
        if not data:
            raise unknown_task(task_id, self.name)
        return task_info(task_id, data, time.time())

    @redis_errors
    def status(self) -> QueueStatus:
        ids = self._r.zrange(self._key("ids"), 0, -1)
        pipe = self._r.pipeline(transaction=False)
        for task_id in ids:
            pipe.hgetall(self._key("task", task_id))
        now = time.time()
        tasks = [task_info(i, d, now) for i, d in zip(ids, pipe.execute()) if d]
        counts = {state: 0 for state in STATES}
        for t in tasks:
            counts[t.state] = counts.get(t.state, 0) + 1
        workers = {w: when(v) for w, v in self._r.hgetall(self._key("workers")).items()}
        return QueueStatus(queue=self.name, counts=counts, tasks=tasks,
                           workers={w: v for w, v in workers.items() if v is not None})

    @redis_errors
    def dead(self) -> list[DeadTask]:
        return [DeadTask(task_id=f.get("task_id", ""), error=f.get("error", ""),
                         log_tail=f.get("log_tail", ""), dead_at=when(f.get("dead_at")))
                for _, f in self._r.xrange(self._key("dead"))]

    @redis_errors
    def requeue(self, task_id: Optional[str] = None, *, all: bool = False) -> list[str]:
        """Dead (or cancelled) tasks back to pending with fresh attempts; their ids."""
        if (task_id is None) == (not all):
            raise SpecError("give a task id or all=True (not both)")
        ids = [task_id] if task_id is not None else list(dict.fromkeys(
            d.task_id for d in self.dead()))
        done = []
        for one in ids:
            answer = self._scripts["REQUEUE"](
                keys=[self._key("task", one), self._key("tasks")], args=[one])
            if answer == "" and task_id is not None:
                raise unknown_task(one, self.name)
            if answer != "ok" and task_id is not None:
                raise SpecError(f"task {one} is {answer}: only dead or cancelled tasks "
                                "are requeued", hint="`gpucloud queue dead` lists dead tasks")
            if answer == "ok":
                done.append(one)
        if done:  # their dead letters go: the dead stream lists what is dead now
            gone = set(done)
            entries = [e for e, f in self._r.xrange(self._key("dead"))
                       if f.get("task_id") in gone]
            if entries:
                self._r.xdel(self._key("dead"), *entries)
        return done

    @redis_errors
    def cancel(self, task_id: str) -> TaskInfo:
        answer = self._scripts["CANCEL"](
            keys=[self._key("task", task_id), self._key("tasks"), self._key("delayed")],
            args=[GROUP, time.time(), task_id])
        if answer == "":
            raise unknown_task(task_id, self.name)
        if answer != "ok":
            raise SpecError(f"task {task_id} already {answer}: nothing to cancel")
        return self.task(task_id)

    @redis_errors
    def logs(self, task_id: str) -> list[str]:
        return [entry.line for entry in self.log_entries(task_id)]

    @redis_errors
    def log_entries(self, task_id: str, after: Optional[str] = None, *,
                    tail: Optional[int] = None, block_seconds: float = 0.0) -> list[LogLine]:
        """The task's log lines after the entry ``after`` (None: from the first,
        or the last ``tail`` ones), waiting up to ``block_seconds`` for the next
        when there is none yet (XREAD BLOCK: no polling)."""
        key = self._key("log", task_id)
        if after is None:
            if not self._r.exists(self._key("task", task_id)):
                raise unknown_task(task_id, self.name)
            rows = (list(reversed(self._r.xrevrange(key, count=tail))) if tail
                    else self._r.xrange(key))
        else:
            rows = self._r.xrange(key, min="(" + after)
        if not rows and block_seconds > 0:
            read = self._r.xread({key: after or "0-0"}, count=LOG_BATCH_READ,
                                 block=max(1, int(block_seconds * 1000)))
            rows = read[0][1] if read else []
        return [LogLine(id=i, at=when(str(int(i.split("-")[0]) / 1000)),
                        line=f.get("line", "")) for i, f in rows]

    # -- worker side --------------------------------------------------------------

    @redis_errors
    def claim(self, worker_id: str, block_seconds: float = 5.0) -> Optional[Claim]:
        """The next task for this worker, or None after block_seconds without one.

        First a task whose worker stopped heart-beating (idle past the
        visibility timeout), then a new delivery. Cancelled and finished tasks
        are skipped; a task re-claimed after killing its worker more than its
        retries goes to the dead letters instead."""
        # One script call claims (see _scripts.CLAIM); only when nothing is
        # claimable does the worker block on a read, whose entry the next call
        # takes: at most three round trips per claim.
        stream = self._key("tasks")
        end = time.monotonic() + max(0.0, block_seconds)
        given = ("", "")
        while True:
            answer = self._scripts["CLAIM"](
                keys=[stream, self._key("delayed"), self._key("dead"), self._key("workers")],
                args=[GROUP, worker_id, time.time(), int(self.visibility_timeout * 1000),
                      self._key("task", ""), self._key("log", ""), LOG_TAIL, *given])
            given = ("", "")
            if answer[0] == "run":
                claim = self._claimed(worker_id, *answer[1:])
                if claim is not None:
                    return claim
                continue
            if answer[0] == "again":
                continue
            left = end - time.monotonic()
            if left <= 0:
                return None
            # Short blocks: a retry may come due, or a dead worker's task
            # become claimable, while we wait.
            block = max(1, int(min(left, 1.0, max(0.05, float(answer[1]))) * 1000))
            read = self._r.xreadgroup(GROUP, worker_id, {stream: ">"}, count=1, block=block)
            if read and read[0][1]:
                entry_id, fields = read[0][1][0]
                given = (entry_id, (fields or {}).get("task_id", ""))

    def _claimed(self, worker_id: str, task_id: str, entry_id: str, attempt: str,
                 spec_json: str, params_json: str) -> Optional[Claim]:
        try:
            # from_any: a spec that fails validation is a SpecError naming the field.
            spec = from_any(json.loads(spec_json or "null"))
            params = json.loads(params_json or "{}")
            check_values(params)
        except (ValueError, SpecError) as exc:
            # Stored by something other than submit (or an older gpucloud): it
            # can never run, so it is a dead letter saying why, not a retry, and
            # the worker goes on to the next task instead of failing on it.
            why = str(exc) if isinstance(exc, SpecError) else f"not a job spec: {exc}"
            self._settle(Claim.model_construct(task_id=task_id, entry_id=entry_id,
                                               worker_id=worker_id, attempt=int(attempt)),
                         "dead", None, f"the queued task cannot run: {why}", 0.0)
            return None
        return Claim(task_id=task_id, spec=spec, params=params, attempt=int(attempt),
                     entry_id=entry_id, worker_id=worker_id)

    @redis_errors
    def heartbeat(self, worker_id: str, claim: Claim) -> bool:
        """Keep the claim (resets its idle time). False: the task is no longer this
        worker's (cancelled, or re-delivered after a missed visibility timeout)."""
        return bool(self._scripts["HEARTBEAT"](
            keys=[self._key("task", claim.task_id), self._key("tasks"), self._key("workers")],
            args=[GROUP, claim.entry_id, worker_id, claim.attempt, time.time()]))

    @redis_errors
    def append_log(self, claim: Claim, lines: list[str]) -> None:
        if not lines:
            return
        pipe = self._r.pipeline(transaction=False)
        for line in lines:
            pipe.xadd(self._key("log", claim.task_id), {"line": line},
                      maxlen=LOG_MAXLEN, approximate=True)
        pipe.execute()

    @redis_errors
    def succeed(self, claim: Claim, exit_code: int = 0) -> bool:
        """Record the run as succeeded. False: the claim was stale (the task was
        re-delivered to another worker, or cancelled) and nothing changed."""
        return self._settle(claim, "succeed", exit_code, "", 0.0)

    @redis_errors
    def fail(self, claim: Claim, error: str, exit_code: Optional[int] = None,
             permanent: bool = False) -> bool:
        """A failed run: retried after an exponential backoff while attempts <=
        retries, else a dead letter with the error and the last log lines.
        `permanent`: a failure no retry can heal (a missing secret, executable
        or image) is a dead letter at once. False, as for succeed: a stale
        claim, nothing changed."""
        if claim.attempt <= claim.spec.retries and not permanent:
            delay = min(self.backoff_max, self.backoff_base * 2 ** (claim.attempt - 1))
            return self._settle(claim, "retry", exit_code, error, time.time() + delay)
        return self._settle(claim, "dead", exit_code, error, 0.0)

    def _settle(self, claim: Claim, action: str, exit_code: Optional[int], error: str,
                not_before: float) -> bool:
        return bool(self._scripts["SETTLE"](
            keys=[self._key("task", claim.task_id), self._key("tasks"), self._key("delayed"),
                  self._key("dead"), self._key("workers"), self._key("log", claim.task_id)],
            args=[GROUP, claim.entry_id, claim.worker_id, claim.attempt, action, time.time(),
                  "" if exit_code is None else int(exit_code), error, not_before, LOG_TAIL,
                  claim.task_id]))
