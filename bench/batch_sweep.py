"""Batches at any latency and rate, with default settings: wall / (N / rate).

For each cell of a grid of request rates (the sandbox's limit, which its
adapter declares, so the client's limiter paces to it) and latencies (added
to every request the simulated cloud answers), `Client.create_many` makes N
machines with NO concurrency given: whatever the client chooses by default.
The bound is what the limit allows for one request per create: N / rate. The
goal is on it: every other request the batch makes counts against it, the
plan's offer lookup and the confirmation of the machines made (a reply that
names a machine is confirmed before the machine counts as made; a batch
confirms with one listing per pass, batch/confirm.py, instead of a GET per
create). Also printed, as information: requests / rate, counting every
request the cloud answered (429s included), which says how close the client
keeps to the limit whatever it sends. N is the rate times `--seconds` (at
least 10), so every cell takes about as long. The headline cell is 2,000
creates at 200 requests/s with 50 ms latency.

    python bench/batch_sweep.py [--rates 1,20,200,500] [--latencies-ms 5,50,500]
                                [--seconds 15] [--headline] [--served]

By default the simulated cloud runs in the client's process (its transport
serves each request there), so its CPU is on the client's interpreter. With
--served it runs in a process of its own behind a local HTTP server
(bench/_sandbox_http.py): the client then goes through httpx's sockets and
connection pools, as against a real provider, and the cloud's CPU is on the
other core.

Goal: wall / (N / rate) <= 1.15 in every cell. Nothing here asserts an absolute
time; each cell runs in a fresh process with its own home and cloud.

The floor: two round trips of every batch cannot overlap its creates. The
plan's offer lookup must be answered before the first create is sent (the
create names the offer), and the last create's answer comes one round trip
after it is sent. So wall >= N / rate + 2 x latency, and the ratio's floor is
1 + 2 x latency / seconds: 1.067 at 500 ms over the default 15 s, 1.17 over
6 s (hence the default: long enough that the floor is well under the goal,
not a way around it). A provider whose listing comes in pages adds the last
page read after the last create (batch/confirm.py), a round trip that
overlaps the last create's answer.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 1.15

CELL = """
import json, os, sys, time
from gpucloud import Client
from gpucloud.providers.sandbox import transport
n = int(sys.argv[1])
served = os.environ.get("BENCH_SANDBOX_URL")
if served:  # the cloud in its own process, over HTTP (--served)
    sys.path.insert(0, os.environ["BENCH_DIR"])
    from _sandbox_http import point_client_at
    point_client_at(served)
with Client(["sandbox"]) as client:
    start = time.perf_counter()
    result = client.create_many(gpu="h100", count=8, n=n, provider="sandbox",
                                auto_shutdown="1h")
    wall = time.perf_counter() - start
refused = sum(w.rate_limited for w in transport._WIRES.values())
sent = sum(w.requests for w in transport._WIRES.values())
print(json.dumps({"wall": wall, "made": len(result.instances), "refused": refused,
                  "requests": sent}))
"""


def cell(n: int, rate: float, latency_ms: float, served: bool = False) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as tmp:
        home = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLOUD_")}
        env.update({
            "GPUCLOUD_HOME": str(home), "GPUCLOUD_SANDBOX_DB": str(home / "cloud.sqlite"),
            "GPUCLOUD_SANDBOX_LATENCY_MS": f"{latency_ms:g}",
            "GPUCLOUD_SANDBOX_RATE_LIMIT": f"{rate:g}",
            "GPUCLOUD_SANDBOX_CAPACITY": str(n * 2),
            "GPUCLOUD_SANDBOX_BOOT_SECONDS": "3600",
        })
        if not served:
            out = subprocess.run([sys.executable, "-c", CELL, str(n)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            return json.loads(out.strip().splitlines()[-1])
        bench = Path(__file__).resolve().parent
        server = subprocess.Popen([sys.executable, str(bench / "_sandbox_http.py")], env=env,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            env.update(BENCH_SANDBOX_URL=f"http://127.0.0.1:{port}", BENCH_DIR=str(bench))
            out = subprocess.run([sys.executable, "-c", CELL, str(n)], env=env, check=True,
                                 capture_output=True, text=True).stdout
        finally:
            server.terminate()
            wire, _ = server.communicate(timeout=60)
        got = json.loads(out.strip().splitlines()[-1])
        got.update(json.loads(wire.strip().splitlines()[-1]))  # counted by the server
        return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="1,20,200,500")
    parser.add_argument("--latencies-ms", default="5,50,500")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--headline", action="store_true",
                        help="only 2,000 creates at 200/s with 50 ms latency")
    parser.add_argument("--served", action="store_true",
                        help="the cloud in its own process over HTTP on 127.0.0.1 "
                             "(bench/_sandbox_http.py), not in the client's")
    args = parser.parse_args()
    if args.headline:
        cells = [(2000, 200.0, 50.0)]
    else:
        rates = [float(r) for r in args.rates.split(",")]
        latencies = [float(v) for v in args.latencies_ms.split(",")]
        cells = [(max(10, round(rate * args.seconds)), rate, latency)
                 for rate in rates for latency in latencies]
    worst = worst_requests = 0.0
    print(f"{'N':>6} {'rate/s':>7} {'latency':>8} {'wall s':>7} {'N/rate':>7} "
          f"{'GOAL':>6} {'requests':>8} {'req/rate':>8} {'(info)':>6} {'429s':>5}")
    started = time.perf_counter()
    for n, rate, latency in cells:
        got = cell(n, rate, latency, args.served)
        bound = n / rate
        ratio = got["wall"] / bound
        # Information: how near the limit the requests sent ran (the offer
        # lookup, the creates, the confirmations, any 429s).
        request_bound = got["requests"] / rate
        request_ratio = got["wall"] / request_bound
        worst = max(worst, ratio)
        worst_requests = max(worst_requests, request_ratio)
        flag = "" if got["made"] == n else f"  ONLY {got['made']} MADE"
        print(f"{n:>6} {rate:>7g} {latency:>6g}ms {got['wall']:>7.2f} {bound:>7.2f} "
              f"{ratio:>6.3f} {got['requests']:>8} {request_bound:>8.2f} {request_ratio:>6.3f} "
              f"{got['refused']:>5}{flag}", flush=True)
    print(f"worst wall / (N / rate) {worst:.3f} (goal <= {GOAL} in every cell); "
          f"worst wall / (requests / rate) {worst_requests:.3f} (information); "
          f"sweep took {time.perf_counter() - started:.0f} s")
    return 0 if worst <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
