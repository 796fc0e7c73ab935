from decimal import Decimal

from gpucloud.errors import InsufficientCapacityError, QuotaExceededError
from gpucloud.core.launch import _next_candidates
from gpucloud.models import Offer


def offer(provider, itype, region, price):
    return Offer(provider=provider, instance_type=itype, region=region, gpu="H100", gpu_count=8,
                 price_per_hour=Decimal(price), available=True, source="live")


QUEUE = [
    offer("vastai", "8x-H100", "US", "16.00"),
    offer("lambda", "gpu_8x_h100_sxm5", "us-south-3", "23.92"),
    offer("lambda", "gpu_8x_h100_sxm5gdr", "us-west-1", "24.00"),
    offer("verda", "8H100.80S.176V", "FIN-01", "25.00"),
]
FAILED = offer("lambda", "gpu_8x_h100_sxm5", "us-south-2", "23.92")


def capacity():
    return InsufficientCapacityError("x", provider="lambda", status_code=400)


def test_capacity_tries_another_region_of_the_same_type_first():
    order = _next_candidates(list(QUEUE), FAILED, capacity())
    assert [(o.provider, o.region) for o in order] == [
        ("lambda", "us-south-3"), ("vastai", "US"), ("lambda", "us-west-1"), ("verda", "FIN-01")]


def test_quota_skips_the_provider():
    exc = QuotaExceededError("q", provider="lambda", status_code=400)
    order = _next_candidates(list(QUEUE), FAILED, exc)
    assert [o.provider for o in order] == ["vastai", "verda"]
