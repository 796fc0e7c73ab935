"""`gpucloud top`: per-GPU samples of nvidia-smi's utilisation, memory,
temperature and power, and a hint when the GPUs mostly wait.

Pure functions: ``read_sample`` turns one ExecResult of
``nvidia.query_command(nvidia.TOP_FIELDS)`` into a Sample; ``low_use_hint``
looks at the last few samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpucloud.machine import nvidia

if TYPE_CHECKING:
    from gpucloud.models import ExecResult

LOW_USE_PERCENT = 30.0  # below 30% for long, the GPUs mostly wait: worth acting on
LOW_USE_SAMPLES = 3
COMMAND = nvidia.query_command(nvidia.TOP_FIELDS)
# Low utilisation usually means the GPUs wait for their input, not that more GPUs
# would help; if it lasts, the task is better split or put on a smaller machine.
HINT = ("GPU utilisation has stayed low (mean {mean:.0f}% over the last {n} samples): "
        "data loading, CPU preprocessing or network communication may be the bottleneck, "
        "not a lack of GPUs; if it stays under 30%, consider splitting the task or a "
        "smaller machine")


@dataclass(frozen=True)
class GpuSample:
    index: int
    name: str | None
    utilization_pct: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    temperature_c: float | None
    power_w: float | None
    power_limit_w: float | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def read_sample(result: ExecResult) -> list[GpuSample]:
    """The GPUs in one answer to COMMAND; ValueError when it is not one."""
    if not result.ok:
        from gpucloud.machine.ssh import message_line

        raise ValueError(message_line(result))
    out = []
    for row in nvidia.parse_query(result.stdout, nvidia.TOP_FIELDS):
        n = nvidia.number
        index = n(row["index"])
        if index is None:
            raise ValueError(f"no GPU index in {row!r}")
        out.append(GpuSample(int(index), row["name"], n(row["utilization.gpu"]),
                             n(row["memory.used"]), n(row["memory.total"]),
                             n(row["temperature.gpu"]), n(row["power.draw"]),
                             n(row["power.limit"])))
    return out


def mean_use(gpus: Sequence[GpuSample]) -> float | None:
    values = [g.utilization_pct for g in gpus if g.utilization_pct is not None]
    return sum(values) / len(values) if values else None


def low_use_hint(history: Sequence[Sequence[GpuSample]]) -> str | None:
    """HINT when the mean utilisation of the last LOW_USE_SAMPLES
    samples (all GPUs) is under LOW_USE_PERCENT; None otherwise or too early."""
    recent = history[-LOW_USE_SAMPLES:]
    if len(recent) < LOW_USE_SAMPLES:
        return None
    means = [mean_use(s) for s in recent]
    if any(m is None for m in means):
        return None
    mean = sum(m for m in means if m is not None) / len(means)
    return HINT.format(mean=mean, n=len(means)) if mean < LOW_USE_PERCENT else None
