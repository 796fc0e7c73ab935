"""Where is 8x H100 cheapest right now, and what would three days cost?

    python examples/cheapest_h100.py

Works without any account (catalog prices); set GPUCLOUD_LAMBDA_API_KEY
(or another provider's key) and those rows become live prices with
availability.
"""

from __future__ import annotations

import sys

from gpucloud import Client


def main() -> None:
    client = Client()
    offers = client.offers(gpu="h100", count=8)
    if not offers:
        print("nobody sells 8x H100 in the catalog")
        return
    print(f"{'provider':<8} {'instance type':<24} {'region':<18} {'$/hour':>8}  source")
    for offer in offers[:10]:
        print(f"{offer.provider:<8} {offer.instance_type:<24} {offer.region:<18} "
              f"{offer.price_per_hour:>8}  {offer.source}")
    estimate = client.estimate(gpu="h100", count=8, hours=72)
    print(f"cheapest for 72 h: {estimate.offer.provider} {estimate.offer.instance_type}, "
          f"${estimate.total} {estimate.currency}")
    for warning in client.warnings:  # e.g. a provider that could not be reached
        print(f"warning: {warning}", file=sys.stderr)


if __name__ == "__main__":
    main()
