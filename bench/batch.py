"""Batch provisioning at the rate-limit bound.

500 creates through ``Client.create_many`` against the sandbox with 20 ms of
latency per request and a 50 requests/s limit (the simulated cloud answers
429 above it; the sandbox adapter declares the same rate, so the client's
shared limiter paces to it). The bound is what the limit allows: N / rate
seconds for N creates (one more request, the plan's offer lookup, is left
out in the client's disfavour). Prints wall time over that bound; goal <= 1.15.

    python bench/batch.py [--n 500] [--rate 50] [--latency-ms 20] [--concurrency 8]

Side by side in the same run, a sequential batch (concurrency 1) of a tenth
of the size shows what the concurrency buys: at 20 ms a request plus the
client's own work, one launch at a time cannot reach 50 per second.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def run_batch(n: int, concurrency: int, home: Path) -> tuple[float, int, int]:
    """Wall seconds, machines made, 429s the cloud sent."""
    from gpucloud import Client
    from gpucloud.providers.sandbox import transport

    before = sum(w.rate_limited for w in transport._WIRES.values())
    with Client(["sandbox"]) as client:
        start = time.perf_counter()
        result = client.create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                    auto_shutdown="1h", concurrency=concurrency)
        wall = time.perf_counter() - start
    after = sum(w.rate_limited for w in transport._WIRES.values())
    return wall, len(result.instances), after - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ.update({
            "GPUCLOUD_HOME": str(home), "GPUCLOUD_SANDBOX_DB": str(home / "cloud.sqlite"),
            "GPUCLOUD_SANDBOX_LATENCY_MS": f"{args.latency_ms:g}",
            "GPUCLOUD_SANDBOX_RATE_LIMIT": f"{args.rate:g}",
            "GPUCLOUD_SANDBOX_CAPACITY": str(args.n * 2),
            "GPUCLOUD_SANDBOX_BOOT_SECONDS": "3600",
        })
        small = max(10, args.n // 10)
        seq_wall, seq_made, seq_429 = run_batch(small, 1, home)
        wall, made, refused = run_batch(args.n, args.concurrency, home)
    bound = args.n / args.rate
    ratio = wall / bound
    print(f"sequential (concurrency 1): {small} creates in {seq_wall:.2f} s = "
          f"{small / seq_wall:.1f}/s ({seq_made} made, {seq_429} HTTP 429)")
    print(f"batch (concurrency {args.concurrency}): {args.n} creates in {wall:.2f} s = "
          f"{args.n / wall:.1f}/s ({made} made, {refused} HTTP 429)")
    print(f"bound N/rate = {args.n} / {args.rate:g} per s = {bound:.2f} s")
    verdict = "OK" if ratio <= 1.15 else "OVER GOAL"
    print(f"wall / bound = {ratio:.3f}  (goal <= 1.15: {verdict})")
    return 0 if made == args.n and ratio <= 1.15 else 1


if __name__ == "__main__":
    sys.exit(main())
