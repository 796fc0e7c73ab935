"""A stand-in for PyTorch, just large enough to run gpucloud's torch.distributed
all-reduce script (gpucloud.machine.nccl.TORCH_SCRIPT) on a machine without
GPUs: a "tensor" is one value repeated `count` times, and an all-reduce over
`world` ranks that all hold the same tensor multiplies it by `world` (a sum).
FAKE_TORCH_LOSSY=1 drops one rank's share, as a corrupting link would. Not
PyTorch; it only checks the script's own arithmetic and output."""

from __future__ import annotations

from types import SimpleNamespace

__version__ = "0.0-fake"
float32 = "float32"


class Tensor:
    def __init__(self, value: float, count: int) -> None:
        self.value, self.count = value, count

    def fill_(self, value: float) -> Tensor:
        self.value = value
        return self

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        return Tensor(float(self.value != other), self.count)

    def sum(self) -> Tensor:
        return Tensor(self.value * self.count, 1)

    def __int__(self) -> int:
        return int(self.value)


def zeros(count: int, device: str = "cpu", dtype: str = float32) -> Tensor:
    return Tensor(0.0, count)


cuda = SimpleNamespace(set_device=lambda device: None, synchronize=lambda device=None: None,
                       nccl=SimpleNamespace(version=lambda: (2, 21, 5)))
