"""torch.distributed's calls the all-reduce script makes (see __init__.py)."""

from __future__ import annotations

import os


def init_process_group(backend: str) -> None:
    assert backend == "nccl"


def get_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def get_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def all_reduce(tensor) -> None:
    ranks = get_world_size() - (1 if os.environ.get("FAKE_TORCH_LOSSY") else 0)
    tensor.value = tensor.value * ranks


def destroy_process_group() -> None:
    pass
