"""The whole lifecycle in the simulated cloud: offers, estimate, create, list, delete.

    python examples/quickstart.py

Nothing here is billed: the sandbox provider simulates a GPU cloud on this
machine (state in GPUCLOUD_HOME or the user data directory).
"""

from __future__ import annotations

from gpucloud import Client


def main() -> None:
    with Client(providers=["sandbox"]) as client:
        offers = client.offers(gpu="h100", count=8)
        cheapest = offers[0]
        print(f"{len(offers)} offers; cheapest: {cheapest.provider} {cheapest.instance_type} "
              f"{cheapest.region} at ${cheapest.price_per_hour}/h (simulated)")

        estimate = client.estimate(gpu="h100", count=8, hours=72)
        print(f"72 hours would cost ${estimate.total} {estimate.currency}")

        machine = client.create(gpu="h100", count=8, auto_shutdown="2h", max_cost=100)
        print(f"created {machine.ref}: {machine.status.value}, shuts down at {machine.shutdown_at}")

        machine = client.wait(machine, until="running", timeout=60)
        print(f"{machine.ref} is {machine.status.value}")

        refs = [m.ref for m in client.list() if m.status.value == "running"]
        print(f"running: {', '.join(refs)}")

        client.delete(machine)
        print(f"deleted {machine.ref}: now {client.get(machine).status.value}")


if __name__ == "__main__":
    main()
