"""top's sampling over recorded query outputs: a data-bottleneck hint when GPUs wait."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucloud.machine import top
from gpucloud.models import ExecResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"


def sample(name: str):
    stdout = (FIXTURES / name).read_text()
    return top.read_sample(ExecResult(command=top.COMMAND, exit_code=0, stdout=stdout))


def test_a_sample_reads_every_gpu():
    gpus = sample("h100x8_query_busy.txt")
    assert len(gpus) == 8 and gpus[0].memory_total_mib == 81559
    assert gpus[0].power_limit_w == 700 and all(g.utilization_pct >= 93 for g in gpus)


def test_low_utilisation_for_three_samples_hints_at_a_data_bottleneck():
    low = [sample(f"h100x8_query_low_{k}.txt") for k in (1, 2, 3)]
    assert top.low_use_hint(low[:2]) is None  # too early to say
    hint = top.low_use_hint(low)
    assert hint is not None
    assert "data loading, CPU preprocessing or network communication" in hint


def test_busy_gpus_give_no_hint():
    busy = sample("h100x8_query_busy.txt")
    low = [sample(f"h100x8_query_low_{k}.txt") for k in (1, 2)]
    assert top.low_use_hint([busy] * 3) is None
    assert top.low_use_hint([*low, busy]) is None  # one busy sample lifts the mean


def test_unavailable_values_are_none_and_a_failed_query_is_an_error():
    row = "0, NVIDIA GeForce RTX 4090, 5, 100, 24564, 40, [N/A], [N/A]\n"
    gpus = top.read_sample(ExecResult(command=top.COMMAND, exit_code=0, stdout=row))
    assert gpus[0].power_w is None and gpus[0].utilization_pct == 5
    with pytest.raises(ValueError, match="No devices were found"):
        top.read_sample(ExecResult(command=top.COMMAND, exit_code=6,
                                   stdout="No devices were found\n"))
