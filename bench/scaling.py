"""Scaling: the cost of one create with 2,000 machines in the cloud over its cost with 100.

Two sandbox clouds, each with its own GPUCLOUD_HOME (journal and cost ledger),
are filled with machines of the very type and region the creates take (the
cloud through the sandbox server's own insert, the journal and ledger through
their own methods, as if this client had made them), then creates through the
public client (`gpucloud.Client(["sandbox"]).create`: plan + create +
journal + ledger) alternate between the two, so machine noise hits both alike.
The script prints the median of each and their ratio. Goal: ratio <= 1.3.

    python bench/scaling.py [--small 100] [--large 2000] [--creates 60]

Bytecode is compiled first; nothing here asserts an absolute time.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

GOAL = 1.3
GPU, COUNT = "h100", 8


def sandbox_env(root: Path) -> dict[str, str]:
    return {"GPUCLOUD_HOME": str(root / "home"),
            "GPUCLOUD_SANDBOX_DB": str(root / "cloud.sqlite"),
            "GPUCLOUD_SANDBOX_CAPACITY": "1000000"}


def client_for(root: Path):  # unannotated: gpucloud is imported late, after compileall
    """A client bound to this cloud and home (both are read once, then kept)."""
    import gpucloud

    os.environ.update(sandbox_env(root))
    client = gpucloud.Client(["sandbox"])
    client.create(gpu=GPU, count=COUNT, provider="sandbox")  # binds the cloud and journal
    return client


def fill(root: Path, client, machines: int) -> None:
    """`machines` more machines, of the type and region a create takes."""
    from decimal import Decimal

    from gpucloud.safety import ledger
    from gpucloud.providers.sandbox.server import SandboxCloud
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import Journal, utcnow

    os.environ.update(sandbox_env(root))
    offer = client.plan(gpu=GPU, count=COUNT, provider="sandbox").offer
    cloud = SandboxCloud(root / "cloud.sqlite")
    with cloud._write_lock() as db:  # one transaction: the server's own insert
        now = cloud._now()
        ids = [cloud._insert(db, {"instance_type": offer.instance_type, "region": offer.region,
                                  "name": f"fill-{n}", "labels": {}}, now)
               for n in range(machines)]
    journal = Journal(state_db_path())
    rows = []
    for n, instance_id in enumerate(ids):
        launch_id = f"fill-{root.name}-{n}"
        journal.record_intent(launch_id=launch_id, provider="sandbox",
                              instance_type=offer.instance_type, region=offer.region,
                              name=f"fill-{n}", price_per_hour=str(offer.price_per_hour),
                              shutdown_at=None)
        journal.mark(launch_id, "delivered", instance_id=instance_id)
        rows.append(ledger.Row(at=utcnow(), provider="sandbox", instance_id=instance_id,
                               event="started", source="launch", state=ledger.RUNNING,
                               price_per_hour=Decimal(offer.price_per_hour),
                               instance_type=offer.instance_type, region=offer.region,
                               launch_id=launch_id, simulated=True))
    ledger.Ledger(journal).append(rows)


def timed_create(client) -> float:
    start = time.perf_counter()
    client.create(gpu=GPU, count=COUNT, provider="sandbox")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=2000)
    parser.add_argument("--creates", type=int, default=60)
    args = parser.parse_args()
    if args.creates < 10 or not 0 < args.small < args.large:
        parser.error("--creates must be at least 10, and 0 < --small < --large")

    import gpucloud

    compileall.compile_dir(str(Path(gpucloud.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory(prefix="gpucloud-bench-") as tmp:
        small, large = Path(tmp) / "small", Path(tmp) / "large"
        clients = {}
        for root, size in ((small, args.small), (large, args.large)):
            clients[root] = client_for(root)
            fill(root, clients[root], size - 1)  # the binding create made one
        for root in (small, large):  # warm caches (catalog, imports, pages)
            timed_create(clients[root])
        times: dict[Path, list[float]] = {small: [], large: []}
        for _ in range(args.creates):
            for root in (small, large):
                times[root].append(timed_create(clients[root]))
    small_med, large_med = statistics.median(times[small]), statistics.median(times[large])
    ratio = large_med / small_med
    print(f"creates timed per size: {args.creates} (through gpucloud.Client, sandbox)")
    print(f"{args.small:>5} machines in the cloud   median {small_med * 1000:7.2f} ms per create")
    print(f"{args.large:>5} machines in the cloud   median {large_med * 1000:7.2f} ms per create")
    print(f"ratio {ratio:.2f} (goal <= {GOAL})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
