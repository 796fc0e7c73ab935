"""Queue throughput: a no-op drain through the public Queue API against a bare
XREADGROUP/XACK loop on the same server.

    python bench/queue_throughput.py [--tasks 300] [--rounds 7] [--redis URL]

Both sides run on one Redis server with one durability setting: the embedded
server (append-only file, fsync on every write) under a temporary
GPUCLOUD_HOME, or the server at --redis. In each round, alternating:

  queue  N tasks submitted (not timed), then timed: `claim(worker,
         block_seconds=0)` and `succeed(claim)` until claim returns None
  bare   N entries added to a stream with a consumer group (not timed), then
         timed: XREADGROUP COUNT 1 and XACK until the read returns nothing

Printed: each side's median rate (tasks per second) and queue / bare, the
ratio of rates (goal >= 0.5). Nothing is asserted: the ratio is the figure.
Run it with PYTHONPATH pointing at another checkout's src/ to measure that
code's Queue with the same script.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--redis", metavar="URL", help="a server of your own (default: embedded)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as home:
        os.environ["GPUCLOUD_HOME"] = home
        import redis

        from gpucloud.jobs.spec import JobSpec
        from gpucloud.queue import Queue

        q = Queue(args.redis, name="bench")
        try:
            raw = redis.Redis.from_url(q.url, decode_responses=True)
            spec = JobSpec.model_validate({"name": "noop", "image": "busybox",
                                           "resources": {"gpu": "h100"}})
            stream = "bench:bare"
            raw.delete(stream)
            raw.xgroup_create(stream, "g", id="0", mkstream=True)
            rates: dict[str, list[float]] = {"queue": [], "bare": []}

            def drain_queue() -> int:
                q.submit(spec, [{"i": str(i)} for i in range(args.tasks)])
                start, done = time.perf_counter(), 0
                while (claim := q.claim("w", block_seconds=0)) is not None:
                    q.succeed(claim)
                    done += 1
                rates["queue"].append(done / (time.perf_counter() - start))
                return done

            def drain_bare() -> int:
                pipe = raw.pipeline(transaction=False)
                for i in range(args.tasks):
                    pipe.xadd(stream, {"task_id": f"t{i}"})
                pipe.execute()
                start, done = time.perf_counter(), 0
                while read := raw.xreadgroup("g", "w", {stream: ">"}, count=1):
                    raw.xack(stream, "g", read[0][1][0][0])
                    done += 1
                rates["bare"].append(done / (time.perf_counter() - start))
                return done

            drain_queue(), drain_bare()  # warm-up: scripts loaded, connections made
            rates = {"queue": [], "bare": []}
            for _ in range(args.rounds):
                if drain_queue() != args.tasks or drain_bare() != args.tasks:
                    print("a drain did not take every task", file=sys.stderr)
                    return 1
            raw.delete(stream)
            raw.close()
        finally:
            q.close()
            if args.redis is None:
                _stop_embedded()

    queue, bare = (statistics.median(rates[k]) for k in ("queue", "bare"))
    print(f"{args.rounds} rounds of {args.tasks} tasks (medians, alternating), {q.safe_url}")
    print(f"queue: claim + succeed     {queue:8.0f} tasks/s")
    print(f"bare:  XREADGROUP + XACK   {bare:8.0f} tasks/s")
    ratio = queue / bare
    print(f"queue / bare = {ratio:.2f} (goal >= 0.5)  {'OK' if ratio >= 0.5 else 'UNDER GOAL'}")
    return 0


def _stop_embedded() -> None:
    """Stop the embedded server this run started (its data dies with the temporary home)."""
    try:
        from gpucloud.queue.embedded import stop
    except ImportError:  # an older checkout: its last client leaving stopped it
        return
    stop(force=True)


if __name__ == "__main__":
    sys.exit(main())
