"""Provision a batch of machines, run it again as a crashed script would, clean up.

    python examples/batch_provision.py

Runs against the sandbox (a simulated cloud: no account, nothing billed).
The same code provisions real machines with another provider.
"""

from __future__ import annotations

import secrets
import sys

from gpucloud import BatchItem, Client


def show(item: BatchItem) -> None:  # called as each machine settles, from a worker thread
    what = item.instance.ref if item.instance else f"{item.error_code}: {item.error}"
    print(f"  machine {item.index + 1}: {item.status} {what}")


def main() -> int:
    key = "example-" + secrets.token_hex(3)  # run again with this key: nothing is made twice
    with Client() as client:
        plan = client.plan(gpu="h100", count=8, provider="sandbox", auto_shutdown="1h", n=6)
        print(f"6 machines, ${plan.total} in total over 1 h (simulated)")
        result = client.create_many(gpu="h100", count=8, n=6, provider="sandbox",
                                    auto_shutdown="1h", concurrency=4, batch=key,
                                    on_item=show)
        print(f"batch {result.batch}: {len(result.instances)} made, "
              f"{len(result.failures)} failed")
        # As a script restarted after a crash would: the same key adopts what exists.
        again = client.create_many(gpu="h100", count=8, n=6, provider="sandbox",
                                   auto_shutdown="1h", batch=key)
        adopted = sum(1 for i in again.items if i.status == "adopted")
        print(f"run again with the same key: {adopted} adopted, "
              f"{sum(1 for i in again.items if i.status == 'created')} created")
        for machine in again.instances:
            client.delete(machine)
        print(f"deleted {len(again.instances)} machines")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
