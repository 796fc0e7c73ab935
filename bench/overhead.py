"""Per-call overhead: `client.get` and `client.list` against raw httpx GETs of the same URLs.

A real HTTP server on 127.0.0.1 (http.server in a thread, keep-alive)
imitates Lambda's API: GET /api/v1/instances (N machines, bodies shaped as
tests/fixtures/lambda) and GET /api/v1/instances/{id}. The client reaches it
through a GPUCLOUD_HOME whose providers/lambda.toml is the bundled file with
api_base pointed at the server, and a key in GPUCLOUD_LAMBDA_API_KEY
(Lambda's pacing of 1 request per second is turned off for this run: see
unpaced). The
baseline is one `httpx.Client` sending the same GETs with the same headers.
Client and raw calls alternate, many times; the script prints the medians and
their ratios. Goals: get <= 1.2, list <= 2.

    python bench/overhead.py [--runs 300] [--machines 100] [--profile get|list]

--profile prints the cProfile of the client's calls instead. Bytecode is
compiled first; nothing here asserts an absolute time.
"""

from __future__ import annotations

import argparse
import compileall
import copy
import json
import os
import re
import statistics
import sys
import tempfile
import subprocess
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

GOALS = {"get": 1.2, "list": 2.0}
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "lambda"
KEY = "secret_bench_" + "0" * 32


def machines(n: int) -> dict[str, dict]:
    template = json.loads((FIXTURES / "get_instance_200.json").read_text())["data"]
    out = {}
    for i in range(n):
        raw = copy.deepcopy(template)
        raw["id"] = f"{i:032x}"
        raw["name"] = f"bench-{i}"
        raw["status"] = "active"
        out[raw["id"]] = raw
    return out


def serve(instances: dict[str, dict]) -> ThreadingHTTPServer:
    listing = json.dumps({"data": list(instances.values())}).encode()
    one = {k: json.dumps({"data": v}).encode() for k, v in instances.items()}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the real API

        def do_GET(self) -> None:  # http.server's name
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                return self.reply(401, b'{"error": {"code": "global/invalid-api-key"}}')
            if self.path == "/api/v1/instances":
                return self.reply(200, listing)
            match = re.fullmatch(r"/api/v1/instances/([^/]+)", self.path)
            if match and match.group(1) in one:
                return self.reply(200, one[match.group(1)])
            return self.reply(404, b'{"error": {"code": "global/object-does-not-exist"}}')

        def reply(self, status: int, body: bytes) -> None:
            # One write, as real servers do: headers and body apart would meet
            # Nagle and delayed ACKs (a 40 ms stall that is nobody's overhead).
            head = (f"HTTP/1.1 {status} {self.responses[status][0]}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
            self.wfile.write(head.encode() + body)

        def log_message(self, *args: object) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


def serve_in_child(n: int) -> tuple[subprocess.Popen[str], str]:
    """The server in its own process, as a provider's is: in a thread of this one
    it would take the GIL from both sides of the comparison."""
    child = subprocess.Popen([sys.executable, __file__, "--serve", "--machines", str(n)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


def home_for(base: str, tmp: Path) -> None:
    """GPUCLOUD_HOME with providers/lambda.toml = the bundled one, api_base replaced."""
    home = tmp / "home"
    (home / "providers").mkdir(parents=True)
    bundled = (ROOT / "providers" / "lambda.toml").read_text()
    text, n = re.subn(r'(?m)^api_base = ".*"$', f'api_base = "{base}"', bundled)
    assert n == 1, "providers/lambda.toml has no api_base line"
    (home / "providers" / "lambda.toml").write_text(text)
    os.environ["GPUCLOUD_HOME"] = str(home)
    os.environ["GPUCLOUD_LAMBDA_API_KEY"] = KEY


def unpaced() -> None:
    """Lambda's rate limit (1 request per second) is a wait the provider imposes,
    not overhead: this bench's loopback server has none, so the client does not
    pace it. Only here; the adapter keeps its limit everywhere else."""
    from gpucloud.providers.lambdalabs.adapter import LambdaProvider

    LambdaProvider.rate_limits = {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--machines", type=int, default=100)
    parser.add_argument("--profile", choices=("get", "list"))
    parser.add_argument("--sort", default="cumulative", help="cProfile order (--profile)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:  # the child: print the base URL, serve until killed
        server = serve(machines(args.machines))
        print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
        server.serve_forever()
        return 0
    if args.runs < 20:
        parser.error("--runs must be at least 20")

    import gpucloud

    compileall.compile_dir(str(Path(gpucloud.__file__).parent), quiet=1)
    one_id = next(iter(machines(1)))
    child, base = serve_in_child(args.machines)
    try:
        return measure(args, base, one_id)
    finally:
        child.terminate()
        child.wait()


def measure(args: argparse.Namespace, base: str, one_id: str) -> int:
    import gpucloud
    import httpx

    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as tmp:
        home_for(base, Path(tmp))
        unpaced()
        client = gpucloud.Client(["lambda"])
        raw = httpx.Client(headers={"Accept": "application/json",
                                    "Authorization": f"Bearer {KEY}"})
        calls = {
            "get": (lambda: client.get(f"lambda/{one_id}"),
                    lambda: raw.get(f"{base}/api/v1/instances/{one_id}").json()),
            "list": (lambda: client.list(provider="lambda"),
                     lambda: raw.get(f"{base}/api/v1/instances").json()),
        }
        assert len(client.list(provider="lambda")) == args.machines  # also warms up
        if args.profile:
            import cProfile
            import pstats

            ours = calls[args.profile][0]
            profiler = cProfile.Profile()
            profiler.runcall(lambda: [ours() for _ in range(args.runs)])
            stats = pstats.Stats(profiler).sort_stats(args.sort)
            stats.print_stats(45)
            stats.print_callers("pathlib.py:1008")
            return 0
        # Wall time (the goal) and this process's CPU time: the second shows the
        # client's own work apart from waiting on a loaded machine's scheduler.
        wall: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in calls}
        cpu: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in calls}
        # One call kind at a time, client and raw alternating: a listing's garbage
        # (100 parsed machines) must not be collected on the next get's clock.
        for name, pair in calls.items():
            for _ in range(args.runs):
                for side, fn in enumerate(pair):
                    start, start_cpu = time.perf_counter(), time.process_time()
                    fn()
                    cpu[name][side].append(time.process_time() - start_cpu)
                    wall[name][side].append(time.perf_counter() - start)
        raw.close()
    print(f"runs: {args.runs}, machines listed: {args.machines}, server: {base}")
    for name in calls:
        mine, theirs = (statistics.median(t) for t in wall[name])
        mine_cpu, theirs_cpu = (statistics.mean(t) for t in cpu[name])
        print(f"client.{name:<5} median {mine * 1000:7.3f} ms   raw httpx {theirs * 1000:7.3f} ms"
              f"   ratio {mine / theirs:5.2f} (goal <= {GOALS[name]})"
              f"   [cpu {mine_cpu * 1000:.3f} vs {theirs_cpu * 1000:.3f} ms]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
